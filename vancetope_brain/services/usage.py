"""A user's LLM token usage and its cost (``UsageService``): the stored totals
(``UsageStore``, written by the lane commit) summed per model, priced by the tenant's
``llm.prices``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from vancetope_brain.models.usage import Totals, UsageRow, priced
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import Backend, UsageStore
from vancetope_brain.store.usage import MAX_READ

MAX_DAYS = 92
"""The longest day range one ``of_tenant`` call reads (a quarter)."""


@dataclass(frozen=True)
class UserUsage:
    """A user's usage this month (``month``: ``YYYY-MM``, UTC) and in one session (all its
    days up to today, None without a session)."""

    month: str
    this_month: Totals
    session: Totals | None


class UsageService:
    def __init__(self, store: UsageStore, settings: SettingsService) -> None:
        self._store = store
        self._settings = settings

    @classmethod
    def on(cls, store: Backend, settings: SettingsService) -> UsageService:
        return cls(store.port(UsageStore), settings)

    def of_user(self, tenant_id: str, user_id: str, today: date, *,
                session: tuple[str, date] | None = None) -> UserUsage:
        """The user's usage of ``today``'s month and, given ``session`` (its id and the day
        it was created), in that session."""
        prices = self._settings.resolve(tenant_id, None, None, "llm.prices")
        month = self._store.read_usage(tenant_id, today.replace(day=1), today, user_id=user_id)
        in_session = None
        if session is not None:
            session_id, created = session
            in_session = priced(self._store.read_usage(
                tenant_id, min(created, today), today, user_id=user_id, session_id=session_id),
                prices)
        return UserUsage(f"{today:%Y-%m}", priced(month, prices), in_session)

    def of_tenant(self, tenant_id: str, first_day: date, last_day: date, *,
                  user_id: str | None = None) -> TenantUsage:
        """The tenant's (or one user's) usage of the days ``first_day`` to ``last_day``
        (at most ``MAX_DAYS``), one entry per day, user and model (its sessions and projects
        summed), priced by the tenant's ``llm.prices``; ``truncated`` when the store's
        ``MAX_READ`` rows did not hold every row of the range."""
        rows = self._store.read_usage(tenant_id, first_day, last_day, user_id=user_id)
        prices = self._settings.resolve(tenant_id, None, None, "llm.prices")
        groups: dict[tuple[date, str, str], list[UsageRow]] = {}
        for row in rows:
            groups.setdefault((row.key.day, row.key.user_id, row.key.model), []).append(row)
        return TenantUsage(
            [DayUsage(day, user, priced(found, prices))
             for (day, user, _), found in sorted(groups.items())],
            priced(rows, prices), truncated=len(rows) >= MAX_READ)


@dataclass(frozen=True)
class DayUsage:
    """One user's usage of one day (``totals.models``: one model)."""

    day: date
    user_id: str
    totals: Totals


@dataclass(frozen=True)
class TenantUsage:
    days: list[DayUsage]
    totals: Totals
    truncated: bool
