"""SQLite ``TimerStore``: the ``timers`` table that ``LaneStore.commit_turn`` arms. A fire removes
the timer (only at the due time it was read with) and appends its message through the
lane adapter's ``append_in``: in one transaction."""

from __future__ import annotations

from datetime import datetime

from vancetope_brain.models import InboxMessage, ProcessStatus, Timer
from vancetope_brain.store.sql import to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all
from vancetope_brain.store.sqlite.lanes import append_in
from vancetope_brain.store.timers import TimerStore


class SqliteTimers(SqliteAdapter, TimerStore):
    def due_timers(self, now: datetime, limit: int = 100) -> list[Timer]:
        return load_all(Timer, self.db.read(
            "SELECT doc FROM timers WHERE due_ms <= ? ORDER BY due_ms LIMIT ?",
            (to_ms(now), limit)))

    def fire_timer(self, timer: Timer, message: InboxMessage | None) -> bool:
        with self.db.write() as conn:
            deleted = conn.execute("DELETE FROM timers WHERE id = ? AND due_ms = ?",
                                   (timer.id, to_ms(timer.due_at))).rowcount
            lane = conn.execute("SELECT status FROM lanes WHERE process_id = ? AND tenant_id = ?",
                                (timer.process_id, timer.tenant_id)).fetchone()
            if not deleted or lane is None or lane[0] == ProcessStatus.CLOSED.value:
                return False
            return message is None or append_in(conn, message)[1]

    def bring_timers_due(self, tenant_id: str, key: str, due_at: datetime, *,
                         limit: int) -> int:
        with self.db.write() as conn:
            timers = load_all(Timer, conn.execute(
                "SELECT doc FROM timers WHERE tenant_id = ? AND due_ms > ? "
                "AND json_extract(doc, '$.key') = ? LIMIT ?",
                (tenant_id, to_ms(due_at), key, limit)).fetchall())
            for timer in timers:
                conn.execute("UPDATE timers SET due_ms = ?, doc = ? WHERE id = ?",
                             (to_ms(due_at), timer.model_copy(update={"due_at": due_at})
                              .model_dump_json(by_alias=True), timer.id))
        return len(timers)
