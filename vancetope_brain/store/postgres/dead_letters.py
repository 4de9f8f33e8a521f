"""PostgreSQL ``DeadLetterStore``: the dead-lettered rows of ``messages`` (owned by
``lanes.py``), found by the partial index ``messages_dead``.

Atomicity: ``requeue_dead_letter`` is one transaction that locks the message's
process's ``lanes`` row ``FOR UPDATE`` (as a turn commit does first), reads its status
under that lock and rewrites the message only while it is still a dead letter
(``UPDATE … WHERE dead_ms IS NOT NULL RETURNING``), so a requeue and a turn commit of
that process never interleave, and of two requeues of one message the second finds none.
"""

from __future__ import annotations

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import InboxMessage, ProcessStatus
from vancetope_brain.store.dead_letters import MAX_LISTED, DeadLetterStore
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import equal_clauses
from vancetope_brain.store.postgres.lanes import MESSAGE_SELECT, load_message


class PostgresDeadLetters(PostgresAdapter, DeadLetterStore):
    def dead_letters(self, tenant_id: str, process_id: str | None = None,
                     limit: int = 100) -> list[InboxMessage]:
        clauses, params = equal_clauses(tenant_id, target_process_id=process_id)
        rows = self.db.read(
            f"{MESSAGE_SELECT} WHERE {' AND '.join(clauses)} AND dead_ms IS NOT NULL "
            "ORDER BY dead_ms, seq LIMIT %s", (*params, max(0, min(limit, MAX_LISTED))))
        return [load_message(row) for row in rows]

    def requeue_dead_letter(self, tenant_id: str, message_id: str) -> InboxMessage:
        missing = f"no dead letter {message_id} in tenant {tenant_id}"
        with self.db.write() as conn:
            found = conn.execute(
                "SELECT target_process_id FROM messages "
                "WHERE id = %s AND tenant_id = %s AND dead_ms IS NOT NULL",
                (message_id, tenant_id)).fetchone()
            if found is None:
                raise NotFound(missing)
            process_id = found[0]
            lane = conn.execute(
                "SELECT status FROM lanes WHERE process_id = %s AND tenant_id = %s FOR UPDATE",
                (process_id, tenant_id)).fetchone()
            if lane is None:
                raise NotFound(missing)
            if lane[0] == ProcessStatus.CLOSED.value:
                raise Conflict(f"process {process_id} of dead letter {message_id} is CLOSED; "
                               f"nothing would read it")
            stored = conn.execute(
                "UPDATE messages SET drained_at = NULL, drained_epoch = NULL, attempts = 0, "
                "dead_ms = NULL, doc = doc - 'deadLetter' "
                "WHERE id = %s AND tenant_id = %s AND dead_ms IS NOT NULL "
                "RETURNING doc, seq, drained_at, drained_epoch, attempts",
                (message_id, tenant_id)).fetchone()
            if stored is None:
                raise NotFound(missing)
        return load_message(stored)
