"""Token and cost quotas per tenant and per user (issue 32, part 3): whether a turn may
start (``QuotaService.over``), and waking the processes a quota holds once it is raised
(``release_holds``).

A turn that would start over a quota is refused before its engine runs (``lanes/faults.py``
``over_quota``): its process is held PAUSED with ``lastError`` ``quota_exceeded: …`` and a
timer ``QUOTA_TIMER`` armed for the start of the next day or month (UTC). The process runs
again when that timer fires or when a quota setting is written (which brings the tenant's
quota timers due now); either way the lane checks the quota once more before it resumes
(``LaneRunner``), so a wake that comes too early only holds it again. Nothing polls: a held
process is PAUSED, which the sweeper passes over.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from vancetope_brain.engines.context import RESERVED_TIMER_PREFIX
from vancetope_brain.errors import QuotaExceeded
from vancetope_brain.models import ProcessStatus, ThinkProcess, utcnow
from vancetope_brain.models.usage import priced
from vancetope_brain.settings import SettingsApi, SettingsService
from vancetope_brain.store import Backend, TimerStore, UsageStore

QUOTA_TIMER = f"{RESERVED_TIMER_PREFIX}quota"
"""The key of the timer that wakes a process held by a quota (engines may not arm keys
starting ``vt.``)."""
RELEASED_PER_WRITE = 10_000
"""Most held processes one quota write brings due; the rest wake with their own timer."""
KEYS = [f"quota.{who}.{what}Per{period}" for who in ("tenant", "user")
        for what in ("tokens", "cost") for period in ("Day", "Month")]


@dataclass(frozen=True)
class Overrun:
    """A quota a turn would start over: its setting, limit, what was used, and when the
    period ends (UTC)."""

    key: str
    limit: float
    used: float
    until: datetime

    @property
    def period(self) -> str:
        return "day" if self.key.endswith("Day") else "month"

    @property
    def error(self) -> str:
        """The process's ``lastError``: the stable code first."""
        return f"{QuotaExceeded.code}: {self.key} {_amount(self.used)} of {_amount(self.limit)}"

    def text(self) -> str:
        """What the user is told, in the chat and the Inbox."""
        whose = "This workspace's" if self.key.startswith("quota.tenant.") else "Your"
        what = "tokens" if ".tokens" in self.key else "spend"
        return (f"{whose} {self.period}ly LLM quota is used up ({what}: {_amount(self.used)} "
                f"of {_amount(self.limit)}). Your messages are kept and this conversation "
                f"goes on by itself at {self.until:%Y-%m-%d %H:%M} UTC, or as soon as an "
                f"operator raises the quota.")


def _amount(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4f}"


def quota_held(process: ThinkProcess) -> bool:
    """Whether ``process`` is PAUSED by a quota (not by its user)."""
    return process.status is ProcessStatus.PAUSED and \
        (process.last_error or "").startswith(f"{QuotaExceeded.code}:")


def period_end(today: date, period: str) -> datetime:
    """The start (UTC) of the day or month after ``today``."""
    if period == "day":
        following = today + timedelta(days=1)
    else:
        following = (today.replace(day=28) + timedelta(days=4)).replace(day=1)
    return datetime.combine(following, time(), tzinfo=UTC)


class QuotaService:
    def __init__(self, usage: UsageStore, settings: SettingsService) -> None:
        self._usage = usage
        self._settings = settings

    @classmethod
    def on(cls, store: Backend, settings: SettingsService) -> QuotaService:
        return cls(store.port(UsageStore), settings)

    def over(self, process: ThinkProcess, settings: SettingsApi | None = None,
             today: date | None = None) -> Overrun | None:
        """The first quota of the process's tenant or user that its usage of ``today``'s
        day or month (UTC) has reached, or None. Reads the settings through ``settings``
        (a turn's own, read once for the whole turn) and, only when a quota is set, the
        usage rows once: those of the month if a monthly quota is set, else of the day
        (the tenant's if a tenant quota is set, else the user's)."""
        settings = settings or SettingsApi.for_process(self._settings, process)
        limits = {key: limit for key in KEYS if (limit := settings.get(key)) is not None}
        if not limits:
            return None
        today = today or utcnow().date()
        monthly = any(key.endswith("Month") for key in limits)
        tenant_wide = any(key.startswith("quota.tenant.") for key in limits)
        rows = self._usage.read_usage(
            process.tenant_id, today.replace(day=1) if monthly else today, today,
            user_id=None if tenant_wide else process.user_id)
        prices = settings.get("llm.prices")
        for key, limit in limits.items():
            mine = [row for row in rows
                    if (key.startswith("quota.tenant.") or row.key.user_id == process.user_id)
                    and (key.endswith("Month") or row.key.day == today)]
            summed = priced(mine, prices)
            used = summed.tokens_in + summed.tokens_out if ".tokens" in key \
                else summed.cost or 0.0
            if used >= limit:
                return Overrun(key, limit, used,
                               period_end(today, "day" if key.endswith("Day") else "month"))
        return None


def release_holds(timers: TimerStore, tenant_id: str) -> int:
    """A quota (or the price table) of the tenant was written: every process of the tenant
    a quota holds looks again at the next sweep (its quota timer is brought due now; the
    lane holds it again if its quota still does). Returns how many."""
    return timers.bring_timers_due(tenant_id, QUOTA_TIMER, utcnow(), limit=RELEASED_PER_WRITE)
