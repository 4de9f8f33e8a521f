"""The timers port: the due timers of every process, delivered by the sweep.

A turn arms timers in its commit (``LaneStore.commit_turn``, ``TurnCommit.timers``); this
port finds the due ones, fires them, and brings a tenant's timers of one key due early (a
quota raised: ``lanes/quota.py``).
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime

from vancetope_brain.models import InboxMessage, Timer
from vancetope_brain.store.backend import Port


class TimerStore(Port):
    """Timers. Firing is idempotent: a timer is removed by the one call that finds it at
    its due time; a re-armed timer (another due time) is left alone."""

    @abstractmethod
    def due_timers(self, now: datetime, limit: int = 100) -> list[Timer]:
        """System query for the sweeper: timers due at ``now`` (``dueAt <= now``), earliest
        first, at most ``limit``."""

    @abstractmethod
    def fire_timer(self, timer: Timer, message: InboxMessage | None) -> bool:
        """Deliver a due timer: remove it and append ``message`` to its process's inbox (as
        ``append_message`` does; ``message`` carries an idempotency key, so delivering twice
        appends once). Nothing is appended when the process is CLOSED or gone. A timer
        whose due time changed since ``timer`` was read (re-armed) is left alone. Returns
        whether a new message was appended (the caller then wakes the process); without a
        ``message`` (a timer that only wakes), whether this call removed the timer of a
        process that is not CLOSED.
        """

    @abstractmethod
    def bring_timers_due(self, tenant_id: str, key: str, due_at: datetime, *,
                         limit: int) -> int:
        """Make every timer ``key`` of the tenant's processes that is due later than
        ``due_at`` due at ``due_at`` (at most ``limit`` of them); returns how many changed."""
