"""PostgreSQL ``JournalStore``: table ``journal``.

A row holds a ``JournalEntry`` under (tenant, process, key); ``row_no`` (an identity
column) keeps the order in which keys were first written (an upsert keeps its row).
``record_steps`` is one statement, a call of the function of ``record_steps.sql`` (named
by its digest: ``_db.function``), which first locks the process's ``lanes`` row (owned
by ``sessions.py``) ``FOR UPDATE`` and checks its epoch under that lock, so a write
either precedes a newer turn's ``acquire_epoch`` — which waits for the lock, and that
turn then reads it — or is refused; the lock also serialises two writers of one
process, so the ``MAX_ENTRIES`` count and the upserts are one step (run after the lock,
in a snapshot of their own that sees every entry committed before it). ``clear_statement``
is how ``commit_turn`` empties the journal inside its own transaction (which holds the
lane's lock).
"""

from __future__ import annotations

from typing import Any

from vancetope_brain.errors import NotFound
from vancetope_brain.models import JournalEntry, StepState
from vancetope_brain.store.journal import MAX_ENTRIES, JournalStore, entry_json, too_many
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import JsonDoc, function, load_all

_RECORD_STEPS = function("record_steps").name

_TABLES = """
CREATE TABLE IF NOT EXISTS journal (
    tenant_id TEXT NOT NULL, process_id TEXT NOT NULL, key TEXT NOT NULL,
    state TEXT NOT NULL, doc JSONB NOT NULL,
    row_no BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (tenant_id, process_id, key)
);
"""


def clear_statement(tenant_id: str, process_id: str, *,
                    in_doubt: bool) -> tuple[str, list[Any]]:
    """The ``DELETE`` of the process's journal, for a transaction to run; its IN_DOUBT
    entries only if ``in_doubt``."""
    return ("DELETE FROM journal WHERE tenant_id = %s AND process_id = %s "
            "AND (%s OR state <> %s)",
            [tenant_id, process_id, in_doubt, StepState.IN_DOUBT.value])


class PostgresJournal(PostgresAdapter, JournalStore):
    tables = _TABLES
    functions = ("record_steps",)

    def journal(self, tenant_id: str, process_id: str) -> list[JournalEntry]:
        return load_all(JournalEntry, self.db.read(
            "SELECT doc FROM journal WHERE tenant_id = %s AND process_id = %s ORDER BY row_no",
            (tenant_id, process_id)))

    def record_steps(self, tenant_id: str, process_id: str, epoch: int,
                     entries: list[JournalEntry]) -> bool:
        if any((e.tenant_id, e.process_id) != (tenant_id, process_id) for e in entries):
            raise ValueError(f"an entry of another process than {process_id}")
        # A key given twice keeps its first place and its last state, as upserts one by
        # one would.
        latest = {e.key: (e.state.value, entry_json(e)) for e in entries}
        (outcome,) = self.db.read(
            f"SELECT {_RECORD_STEPS}(%s, %s, %s::bigint, %s::text[], %s::text[], %s, "
            "%s::integer)",
            (tenant_id, process_id, epoch, list(latest),
             [state for state, _ in latest.values()],
             JsonDoc(f"[{','.join(doc for _, doc in latest.values())}]"), MAX_ENTRIES))[0]
        if outcome == "missing":
            raise NotFound(f"process {process_id} not found")
        if outcome == "full":
            raise too_many(process_id)
        return bool(outcome == "ok")
