"""PostgreSQL ``TimerStore``: the ``timers`` table that ``LaneStore.commit_turn`` arms. A fire removes
the timer (only at the due time it was read with) and appends its message through the
lane adapter's ``append_in``: in one transaction (the lane row locked first, as a commit locks it)."""

from __future__ import annotations

from datetime import datetime

from vancetope_brain.models import InboxMessage, ProcessStatus, Timer
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import load_all
from vancetope_brain.store.postgres.lanes import append_in
from vancetope_brain.store.sql import iso, to_ms
from vancetope_brain.store.timers import TimerStore


class PostgresTimers(PostgresAdapter, TimerStore):
    def due_timers(self, now: datetime, limit: int = 100) -> list[Timer]:
        return load_all(Timer, self.db.read(
            "SELECT doc FROM timers WHERE due_ms <= %s ORDER BY due_ms LIMIT %s",
            (to_ms(now), limit)))

    def fire_timer(self, timer: Timer, message: InboxMessage | None) -> bool:
        with self.db.write() as conn:
            # The lane first (as commit_turn, which upserts timers under it), then the timer.
            lane = conn.execute(
                "SELECT status FROM lanes WHERE process_id = %s AND tenant_id = %s FOR UPDATE",
                (timer.process_id, timer.tenant_id)).fetchone()
            deleted = conn.execute("DELETE FROM timers WHERE id = %s AND due_ms = %s",
                                   (timer.id, to_ms(timer.due_at))).rowcount
            if not deleted or lane is None or lane[0] == ProcessStatus.CLOSED.value:
                return False
            return message is None or append_in(conn, message)[1]

    def bring_timers_due(self, tenant_id: str, key: str, due_at: datetime, *,
                         limit: int) -> int:
        with self.db.write() as conn:
            return conn.execute(
                "UPDATE timers SET due_ms = %s, doc = jsonb_set(doc, '{dueAt}', to_jsonb(%s::text)) "
                "WHERE id IN (SELECT id FROM timers WHERE tenant_id = %s AND due_ms > %s "
                "AND doc->>'key' = %s LIMIT %s)",
                (to_ms(due_at), iso(due_at), tenant_id, to_ms(due_at), key, limit)).rowcount
