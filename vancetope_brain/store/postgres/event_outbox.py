"""PostgreSQL ``EventOutboxStore``: table ``event_outbox``.

Rows are inserted by the lanes adapter's ``commit_turn`` with the statement of
``enqueue_statement``, inside the turn's one transaction, so they exist exactly when the
turn committed (an id already there is kept: ``ON CONFLICT DO NOTHING``). ``remove_events`` is one ``DELETE``;
two publishers removing the same rows at once both succeed (a row already gone is
ignored).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from vancetope_brain.models import OutboxEvent
from vancetope_brain.store.event_outbox import EventOutboxStore
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, load_all
from vancetope_brain.store.sql import to_ms

_TABLES = """
CREATE TABLE IF NOT EXISTS event_outbox (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    epoch BIGINT NOT NULL, idx INTEGER NOT NULL, created_ms BIGINT NOT NULL,
    doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS event_outbox_by_process
    ON event_outbox (tenant_id, process_id, epoch, idx);
CREATE INDEX IF NOT EXISTS event_outbox_by_age ON event_outbox (created_ms);
"""


def enqueue_statement(events: Sequence[OutboxEvent]) -> tuple[str, list[Any]]:
    """The one ``INSERT`` of outbox rows (an id already there is kept), for a transaction
    to run (``events`` not empty)."""
    rows = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(events))
    return (f"INSERT INTO event_outbox (id, tenant_id, process_id, epoch, idx, created_ms, doc) "
            f"VALUES {rows} ON CONFLICT (id) DO NOTHING",
            [value for e in events for value in (e.id, e.tenant_id, e.process_id, e.epoch,
                                                 e.index, to_ms(e.created_at), doc_json(e))])


class PostgresEventOutbox(PostgresAdapter, EventOutboxStore):
    tables = _TABLES

    def pending_events(self, tenant_id: str, process_id: str,
                       limit: int = 500) -> list[OutboxEvent]:
        return load_all(OutboxEvent, self.db.read(
            "SELECT doc FROM event_outbox WHERE tenant_id = %s AND process_id = %s "
            "ORDER BY epoch, idx LIMIT %s", (tenant_id, process_id, limit)))

    def stale_event_processes(self, older_than: datetime,
                              limit: int = 100) -> list[tuple[str, str]]:
        rows = self.db.read(
            "SELECT tenant_id, process_id FROM event_outbox WHERE created_ms < %s "
            "GROUP BY tenant_id, process_id ORDER BY MIN(created_ms) LIMIT %s",
            (to_ms(older_than), limit))
        return [(tenant, process) for tenant, process in rows]

    def remove_events(self, tenant_id: str, event_ids: Iterable[str]) -> None:
        ids = list(event_ids)
        if ids:
            self.db.execute("DELETE FROM event_outbox WHERE id = ANY(%s) AND tenant_id = %s",
                            (ids, tenant_id))
