"""SQLite ``DeadLetterStore``: the dead-lettered rows of ``messages`` (owned by ``lanes.py``),
found by the partial index ``messages_dead``.

Atomicity: ``requeue_dead_letter`` is one ``BEGIN IMMEDIATE`` transaction that reads the
message and its process's status and rewrites the row, so a requeue and a turn commit
never interleave.
"""

from __future__ import annotations

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import InboxMessage, ProcessStatus
from vancetope_brain.store.dead_letters import MAX_LISTED, DeadLetterStore
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import equal_clauses
from vancetope_brain.store.sqlite.lanes import MESSAGE_SELECT, load_message


class SqliteDeadLetters(SqliteAdapter, DeadLetterStore):
    def dead_letters(self, tenant_id: str, process_id: str | None = None,
                     limit: int = 100) -> list[InboxMessage]:
        clauses, params = equal_clauses(tenant_id, target_process_id=process_id)
        rows = self.db.read(
            f"{MESSAGE_SELECT} WHERE {' AND '.join(clauses)} AND dead_ms IS NOT NULL "
            "ORDER BY dead_ms, seq LIMIT ?", (*params, max(0, min(limit, MAX_LISTED))))
        return [load_message(row) for row in rows]

    def requeue_dead_letter(self, tenant_id: str, message_id: str) -> InboxMessage:
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT m.target_process_id, l.status FROM messages m JOIN lanes l "
                "ON l.process_id = m.target_process_id AND l.tenant_id = m.tenant_id "
                "WHERE m.id = ? AND m.tenant_id = ? AND m.dead_ms IS NOT NULL",
                (message_id, tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"no dead letter {message_id} in tenant {tenant_id}")
            if row[1] == ProcessStatus.CLOSED.value:
                raise Conflict(f"process {row[0]} of dead letter {message_id} is CLOSED; "
                               f"nothing would read it")
            conn.execute(
                "UPDATE messages SET drained_at = NULL, drained_epoch = NULL, attempts = 0, "
                "dead_ms = NULL, doc = json_remove(doc, '$.deadLetter') WHERE id = ?",
                (message_id,))
            stored = conn.execute(f"{MESSAGE_SELECT} WHERE id = ?", (message_id,)).fetchone()
        return load_message(stored)
