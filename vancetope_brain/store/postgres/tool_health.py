"""PostgreSQL ``ToolHealthStore``: table ``tool_health``.

A row holds a ``ToolHealth`` under (tenant, project, server, tool or ``''`` for the
server's own record); the key's text sorts bytewise (``COLLATE "C"``), as on SQLite.
``probe_ms`` is its ``next_probe_at`` while it is not UP (else NULL), indexed for the
probe's ``due_tool_health``. The revision is read from ``doc`` (a record stored before
revisions were kept has none: it reads as revision 0).

Atomicity: each call is one statement in its own transaction. ``put`` is a
compare-and-set in that statement: a new record is ``INSERT … ON CONFLICT DO
NOTHING``, a replacement an ``UPDATE … WHERE`` the stored revision is the expected
one. Of two concurrent writers the second waits for the first's row lock and then
re-checks its ``WHERE`` against the new row (READ COMMITTED), so only one replaces it.
"""

from __future__ import annotations

from datetime import datetime

from vancetope_brain.models.tool_health import HealthState, ToolHealth
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, equal_clauses, load_all
from vancetope_brain.store.sql import to_ms
from vancetope_brain.store.tool_health import ToolHealthStore

_TABLES = """
CREATE TABLE IF NOT EXISTS tool_health (
    tenant_id TEXT NOT NULL, project_id TEXT COLLATE "C" NOT NULL,
    server TEXT COLLATE "C" NOT NULL, tool TEXT COLLATE "C" NOT NULL, probe_ms BIGINT,
    doc JSONB NOT NULL,
    PRIMARY KEY (tenant_id, project_id, server, tool)
);
CREATE INDEX IF NOT EXISTS tool_health_due ON tool_health (probe_ms) WHERE probe_ms IS NOT NULL;
"""


class PostgresToolHealth(PostgresAdapter, ToolHealthStore):
    tables = _TABLES

    def get_tool_health(self, tenant_id: str, project_id: str, server: str,
                        tool: str | None = None) -> ToolHealth | None:
        rows = self.db.read(
            "SELECT doc FROM tool_health WHERE tenant_id = %s AND project_id = %s "
            "AND server = %s AND tool = %s", (tenant_id, project_id, server, tool or ""))
        return load_all(ToolHealth, rows)[0] if rows else None

    def list_tool_health(self, tenant_id: str, project_id: str | None = None) -> list[ToolHealth]:
        clauses, params = equal_clauses(tenant_id, project_id=project_id)
        return load_all(ToolHealth, self.db.read(
            f"SELECT doc FROM tool_health WHERE {' AND '.join(clauses)} "
            "ORDER BY project_id, server, tool", params))

    def put_tool_health(self, health: ToolHealth, *,
                        expected_revision: int | None) -> ToolHealth | None:
        stored = health.model_copy(update={"revision": (expected_revision or 0) + 1})
        key = (health.tenant_id, health.project_id, health.server, health.tool or "")
        probe = (to_ms(health.next_probe_at) if health.next_probe_at is not None
                 and health.state is not HealthState.UP else None)
        doc = doc_json(stored)
        if expected_revision is None:
            rows = self.db.read(
                "INSERT INTO tool_health (tenant_id, project_id, server, tool, probe_ms, doc) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                (*key, probe, doc))
        else:
            rows = self.db.read(
                "UPDATE tool_health SET probe_ms = %s, doc = %s WHERE tenant_id = %s "
                "AND project_id = %s AND server = %s AND tool = %s "
                "AND COALESCE((doc->>'revision')::bigint, 0) = %s RETURNING 1",
                (probe, doc, *key, expected_revision))
        return stored if rows else None

    def reset_tool_health(self, tenant_id: str, project_id: str | None = None,
                          server: str | None = None, tool: str | None = None) -> int:
        if tool is not None and server is None:
            raise ValueError("resetting one tool's record needs its server")
        clauses, params = equal_clauses(tenant_id, project_id=project_id, server=server,
                                        tool=tool)
        return self.db.execute(f"DELETE FROM tool_health WHERE {' AND '.join(clauses)}", params)

    def due_tool_health(self, now: datetime, limit: int = 100) -> list[ToolHealth]:
        return load_all(ToolHealth, self.db.read(
            "SELECT doc FROM tool_health WHERE probe_ms IS NOT NULL AND probe_ms <= %s "
            "ORDER BY probe_ms, tenant_id LIMIT %s", (to_ms(now), max(0, limit))))
