"""SQLite ``EventOutboxStore``: table ``event_outbox``.

Rows are inserted by the lanes adapter's ``commit_turn`` through ``enqueue_in``, inside
the turn's one ``BEGIN IMMEDIATE`` transaction, so they exist exactly when the turn
committed. A new table needs no schema version (``_db.py``): an older server opening
the file leaves it alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime

from vancetope_brain.models import OutboxEvent
from vancetope_brain.store.event_outbox import EventOutboxStore
from vancetope_brain.store.sql import to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all

_TABLES = """
CREATE TABLE IF NOT EXISTS event_outbox (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    epoch INTEGER NOT NULL, idx INTEGER NOT NULL, created_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS event_outbox_by_process
    ON event_outbox (tenant_id, process_id, epoch, idx);
CREATE INDEX IF NOT EXISTS event_outbox_by_age ON event_outbox (created_ms);
"""


def enqueue_in(conn: sqlite3.Connection, events: Iterable[OutboxEvent]) -> None:
    """Insert outbox rows inside an open write transaction (an id already there is kept)."""
    conn.executemany(
        "INSERT INTO event_outbox (id, tenant_id, process_id, epoch, idx, created_ms, doc) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        [(e.id, e.tenant_id, e.process_id, e.epoch, e.index, to_ms(e.created_at),
          e.model_dump_json(by_alias=True)) for e in events])


class SqliteEventOutbox(SqliteAdapter, EventOutboxStore):
    tables = _TABLES

    def pending_events(self, tenant_id: str, process_id: str,
                       limit: int = 500) -> list[OutboxEvent]:
        return load_all(OutboxEvent, self.db.read(
            "SELECT doc FROM event_outbox WHERE tenant_id = ? AND process_id = ? "
            "ORDER BY epoch, idx LIMIT ?", (tenant_id, process_id, limit)))

    def stale_event_processes(self, older_than: datetime,
                              limit: int = 100) -> list[tuple[str, str]]:
        rows = self.db.read(
            "SELECT tenant_id, process_id FROM event_outbox WHERE created_ms < ? "
            "GROUP BY tenant_id, process_id ORDER BY MIN(created_ms) LIMIT ?",
            (to_ms(older_than), limit))
        return [(tenant, process) for tenant, process in rows]

    def remove_events(self, tenant_id: str, event_ids: Iterable[str]) -> None:
        ids = list(event_ids)
        if ids:
            with self.db.write() as conn:
                conn.executemany("DELETE FROM event_outbox WHERE id = ? AND tenant_id = ?",
                                 [(event_id, tenant_id) for event_id in ids])
