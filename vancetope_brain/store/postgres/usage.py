"""PostgreSQL ``UsageStore``: table ``llm_usage``, one row per (tenant, user, project,
session, model, day) — the day as ``YYYY-MM-DD`` text (UTC), as on SQLite, so a transfer
carries it as it is.

Atomicity: a turn's rows are added by one ``INSERT … ON CONFLICT DO UPDATE`` adding the
counters, inside the lane commit — a statement of its transaction (``add_statement``) or
the same statement in ``commit_turn.sql`` (keep the two alike). The row's lock is taken
after the lane's, and nothing after it locks another lane's rows, so two commits of one
session's processes wait for each other there rather than deadlock. A read is one
``SELECT`` by the primary key's prefix (tenant, day).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from vancetope_brain.models.usage import UsageKey, UsageRow
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import JsonDoc, doc_json
from vancetope_brain.store.usage import MAX_READ, UsageStore

_TABLES = """
CREATE TABLE IF NOT EXISTS llm_usage (
    tenant_id TEXT NOT NULL, day TEXT NOT NULL, session_id TEXT NOT NULL,
    model TEXT NOT NULL, user_id TEXT NOT NULL, project_id TEXT NOT NULL,
    tokens_in BIGINT NOT NULL, tokens_out BIGINT NOT NULL, calls BIGINT NOT NULL,
    estimated_calls BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, day, session_id, model, user_id, project_id)
);
"""

_ADD = (
    "INSERT INTO llm_usage AS cur (tenant_id, day, session_id, model, user_id, project_id, "
    "tokens_in, tokens_out, calls, estimated_calls) "
    "SELECT t, d, s, m, u, p, i, o, c, e FROM jsonb_to_recordset(%s::jsonb) AS x(t text, "
    "d text, s text, m text, u text, p text, i bigint, o bigint, c bigint, e bigint) "
    "ON CONFLICT (tenant_id, day, session_id, model, user_id, project_id) DO UPDATE SET "
    "tokens_in = cur.tokens_in + excluded.tokens_in, "
    "tokens_out = cur.tokens_out + excluded.tokens_out, calls = cur.calls + excluded.calls, "
    "estimated_calls = cur.estimated_calls + excluded.estimated_calls")


def usage_json(rows: list[UsageRow]) -> JsonDoc:
    """``rows`` as the jsonb array ``_ADD`` and ``vt_commit_turn`` read."""
    return doc_json([{"t": r.key.tenant_id, "d": r.key.day.isoformat(), "s": r.key.session_id,
                      "m": r.key.model, "u": r.key.user_id, "p": r.key.project_id,
                      "i": r.tokens_in, "o": r.tokens_out, "c": r.calls,
                      "e": r.estimated_calls} for r in rows])


def add_statement(rows: list[UsageRow]) -> tuple[str, list[Any]]:
    """The statement that adds ``rows`` to the stored totals (for ``run_together``)."""
    return _ADD, [usage_json(rows)]


class PostgresUsage(PostgresAdapter, UsageStore):
    tables = _TABLES

    def read_usage(self, tenant_id: str, first_day: date, last_day: date, *,
                   user_id: str | None = None, session_id: str | None = None
                   ) -> list[UsageRow]:
        where, args = "tenant_id = %s AND day BETWEEN %s AND %s", [
            tenant_id, first_day.isoformat(), last_day.isoformat()]
        if user_id is not None:
            where, args = where + " AND user_id = %s", [*args, user_id]
        if session_id is not None:
            where, args = where + " AND session_id = %s", [*args, session_id]
        rows: list[Any] = self.db.read(
            "SELECT tenant_id, user_id, project_id, session_id, model, day, tokens_in, "
            f"tokens_out, calls, estimated_calls FROM llm_usage WHERE {where} "
            "ORDER BY day, session_id, model LIMIT %s", (*args, MAX_READ))
        return [UsageRow(UsageKey(raw[0], raw[1], raw[2], raw[3], raw[4],
                                  date.fromisoformat(raw[5])), *raw[6:]) for raw in rows]
