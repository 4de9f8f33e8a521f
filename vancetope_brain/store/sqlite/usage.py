"""SQLite ``UsageStore``: table ``llm_usage``, one row per (tenant, user, project, session,
model, day) — the day as ``YYYY-MM-DD`` (UTC).

Atomicity: ``add_usage_in`` upserts (``INSERT … ON CONFLICT DO UPDATE`` adding the
counters) inside the lane commit's transaction (``lanes._commit_in``). A read is one
``SELECT`` by the primary key's prefix (tenant, day).
"""

from __future__ import annotations

import sqlite3
from datetime import date
from typing import Any

from vancetope_brain.models.usage import UsageKey, UsageRow
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.usage import MAX_READ, UsageStore

_TABLES = """
CREATE TABLE IF NOT EXISTS llm_usage (
    tenant_id TEXT NOT NULL, day TEXT NOT NULL, session_id TEXT NOT NULL,
    model TEXT NOT NULL, user_id TEXT NOT NULL, project_id TEXT NOT NULL,
    tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, calls INTEGER NOT NULL,
    estimated_calls INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, day, session_id, model, user_id, project_id)
);
"""

_ADD = (
    "INSERT INTO llm_usage (tenant_id, day, session_id, model, user_id, project_id, "
    "tokens_in, tokens_out, calls, estimated_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (tenant_id, day, session_id, model, user_id, project_id) DO UPDATE SET "
    "tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out, "
    "calls = calls + excluded.calls, estimated_calls = estimated_calls + excluded.estimated_calls")


def add_usage_in(conn: sqlite3.Connection, rows: list[UsageRow]) -> None:
    """Add ``rows`` to the stored totals, in the caller's transaction."""
    conn.executemany(_ADD, [
        (r.key.tenant_id, r.key.day.isoformat(), r.key.session_id, r.key.model, r.key.user_id,
         r.key.project_id, r.tokens_in, r.tokens_out, r.calls, r.estimated_calls)
        for r in rows])


class SqliteUsage(SqliteAdapter, UsageStore):
    tables = _TABLES

    def read_usage(self, tenant_id: str, first_day: date, last_day: date, *,
                   user_id: str | None = None, session_id: str | None = None
                   ) -> list[UsageRow]:
        where, args = "tenant_id = ? AND day BETWEEN ? AND ?", [
            tenant_id, first_day.isoformat(), last_day.isoformat()]
        if user_id is not None:
            where, args = where + " AND user_id = ?", [*args, user_id]
        if session_id is not None:
            where, args = where + " AND session_id = ?", [*args, session_id]
        rows: list[Any] = self.db.read(
            "SELECT tenant_id, user_id, project_id, session_id, model, day, tokens_in, "
            f"tokens_out, calls, estimated_calls FROM llm_usage WHERE {where} "
            "ORDER BY day, session_id, model LIMIT ?", (*args, MAX_READ))
        return [_row(raw) for raw in rows]


def _row(raw: Any) -> UsageRow:
    tenant, user, project, session, model, day, tokens_in, tokens_out, calls, estimated = raw
    return UsageRow(UsageKey(tenant, user, project, session, model, date.fromisoformat(day)),
                    tokens_in, tokens_out, calls, estimated)
