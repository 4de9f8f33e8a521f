"""SQLite ``ToolHealthStore``: table ``tool_health``.

A row holds a ``ToolHealth`` under (tenant, project, server, tool or ``''`` for the
server's own record); ``probe_ms`` is its ``next_probe_at`` while it is not UP (else
NULL), indexed for the probe's ``due_tool_health``. Atomicity: each call is one
``BEGIN IMMEDIATE`` transaction; ``put`` reads the stored revision and upserts inside it.
"""

from __future__ import annotations

import json
from datetime import datetime

from vancetope_brain.models.tool_health import HealthState, ToolHealth
from vancetope_brain.store.sql import to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import equal_clauses, load_all
from vancetope_brain.store.tool_health import ToolHealthStore

_TABLES = """
CREATE TABLE IF NOT EXISTS tool_health (
    tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, server TEXT NOT NULL,
    tool TEXT NOT NULL, probe_ms INTEGER, doc TEXT NOT NULL,
    PRIMARY KEY (tenant_id, project_id, server, tool)
);
CREATE INDEX IF NOT EXISTS tool_health_due ON tool_health (probe_ms) WHERE probe_ms IS NOT NULL;
"""


class SqliteToolHealth(SqliteAdapter, ToolHealthStore):
    tables = _TABLES

    def get_tool_health(self, tenant_id: str, project_id: str, server: str,
                        tool: str | None = None) -> ToolHealth | None:
        rows = self.db.read(
            "SELECT doc FROM tool_health WHERE tenant_id = ? AND project_id = ? AND server = ? "
            "AND tool = ?", (tenant_id, project_id, server, tool or ""))
        return load_all(ToolHealth, rows)[0] if rows else None

    def list_tool_health(self, tenant_id: str, project_id: str | None = None) -> list[ToolHealth]:
        clauses, params = equal_clauses(tenant_id, project_id=project_id)
        return load_all(ToolHealth, self.db.read(
            f"SELECT doc FROM tool_health WHERE {' AND '.join(clauses)} "
            "ORDER BY project_id, server, tool", tuple(params)))

    def put_tool_health(self, health: ToolHealth, *,
                        expected_revision: int | None) -> ToolHealth | None:
        stored = health.model_copy(update={"revision": (expected_revision or 0) + 1})
        key = (health.tenant_id, health.project_id, health.server, health.tool or "")
        probe = (to_ms(health.next_probe_at) if health.next_probe_at is not None
                 and health.state is not HealthState.UP else None)
        with self.db.write() as conn:
            row = conn.execute("SELECT doc FROM tool_health WHERE tenant_id = ? AND "
                               "project_id = ? AND server = ? AND tool = ?", key).fetchone()
            revision = None if row is None else ToolHealth.load(json.loads(row[0])).revision
            if revision != expected_revision:
                return None
            conn.execute(
                "INSERT INTO tool_health (tenant_id, project_id, server, tool, probe_ms, doc) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, project_id, server, tool) "
                "DO UPDATE SET probe_ms = excluded.probe_ms, doc = excluded.doc",
                (*key, probe, stored.model_dump_json(by_alias=True)))
        return stored

    def reset_tool_health(self, tenant_id: str, project_id: str | None = None,
                          server: str | None = None, tool: str | None = None) -> int:
        if tool is not None and server is None:
            raise ValueError("resetting one tool's record needs its server")
        clauses, params = equal_clauses(tenant_id, project_id=project_id, server=server,
                                        tool=tool)
        return self.db.execute(f"DELETE FROM tool_health WHERE {' AND '.join(clauses)}",
                               tuple(params)).rowcount

    def due_tool_health(self, now: datetime, limit: int = 100) -> list[ToolHealth]:
        return load_all(ToolHealth, self.db.read(
            "SELECT doc FROM tool_health WHERE probe_ms IS NOT NULL AND probe_ms <= ? "
            "ORDER BY probe_ms LIMIT ?", (to_ms(now), max(0, limit))))
