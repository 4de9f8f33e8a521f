"""SQLite ``JournalStore``: table ``journal``.

A row holds a ``JournalEntry`` under (tenant, process, key); ``rowid`` keeps the order in
which keys were first written (an upsert keeps its row). ``record_steps`` is one
``BEGIN IMMEDIATE`` transaction that reads the process's epoch from its ``lanes`` row
(owned by ``sessions.py``), so a write either precedes a newer turn's ``acquire_epoch`` —
and that turn then reads it — or is refused. ``clear_in`` is how ``commit_turn`` empties the
journal inside its own transaction.
"""

from __future__ import annotations

import sqlite3

from vancetope_brain.errors import NotFound
from vancetope_brain.models import JournalEntry, StepState
from vancetope_brain.store.journal import MAX_ENTRIES, JournalStore, entry_json, too_many
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all, marks

_TABLES = """
CREATE TABLE IF NOT EXISTS journal (
    tenant_id TEXT NOT NULL, process_id TEXT NOT NULL, key TEXT NOT NULL,
    state TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (tenant_id, process_id, key)
);
"""


def clear_in(conn: sqlite3.Connection, tenant_id: str, process_id: str, *,
             in_doubt: bool) -> None:
    """Delete the process's journal inside an open write transaction; its IN_DOUBT entries
    only if ``in_doubt``."""
    conn.execute("DELETE FROM journal WHERE tenant_id = ? AND process_id = ? "
                 "AND (? OR state <> ?)",
                 (tenant_id, process_id, in_doubt, StepState.IN_DOUBT.value))


class SqliteJournal(SqliteAdapter, JournalStore):
    tables = _TABLES

    def journal(self, tenant_id: str, process_id: str) -> list[JournalEntry]:
        return load_all(JournalEntry, self.db.read(
            "SELECT doc FROM journal WHERE tenant_id = ? AND process_id = ? ORDER BY rowid",
            (tenant_id, process_id)))

    def record_steps(self, tenant_id: str, process_id: str, epoch: int,
                     entries: list[JournalEntry]) -> bool:
        if any((e.tenant_id, e.process_id) != (tenant_id, process_id) for e in entries):
            raise ValueError(f"an entry of another process than {process_id}")
        rows = [(e.key, e.state.value, entry_json(e)) for e in entries]
        keys = {key for key, _, _ in rows}
        with self.db.write() as conn:
            # The fence and the cap in one statement (the count is wasted when fenced: rare).
            lane = conn.execute(
                "SELECT epoch, (SELECT COUNT(*) FROM journal WHERE tenant_id = ? "
                f"AND process_id = ? AND key NOT IN {marks(keys)}) "
                "FROM lanes WHERE process_id = ? AND tenant_id = ?",
                (tenant_id, process_id, *keys, process_id, tenant_id)).fetchone()
            if lane is None:
                raise NotFound(f"process {process_id} not found")
            current, held = lane
            if current != epoch:
                return False
            if held + len(keys) > MAX_ENTRIES:
                raise too_many(process_id)
            conn.executemany(
                "INSERT INTO journal (tenant_id, process_id, key, state, doc) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, process_id, key) "
                "DO UPDATE SET state = excluded.state, doc = excluded.doc",
                [(tenant_id, process_id, key, state, doc) for key, state, doc in rows])
        return True
