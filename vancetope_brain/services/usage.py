"""A user's LLM token usage and its cost (``UsageService``): the stored totals
(``UsageStore``, written by the lane commit) summed per model, priced by the tenant's
``llm.prices``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from vancetope_brain.models.usage import UsageRow
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import Backend, UsageStore

PER = 1_000_000
"""Prices are per this many tokens."""


@dataclass(frozen=True)
class ModelTotals:
    """One model's totals; ``cost`` None when the tenant has no price table."""

    model: str
    tokens_in: int
    tokens_out: int
    calls: int
    estimated_calls: int
    cost: float | None


@dataclass(frozen=True)
class Totals:
    """Totals over models (each in ``models``, by name)."""

    tokens_in: int
    tokens_out: int
    calls: int
    cost: float | None
    models: list[ModelTotals]


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
            in_session = totals(self._store.read_usage(
                tenant_id, min(created, today), today, user_id=user_id, session_id=session_id),
                prices)
        return UserUsage(f"{today:%Y-%m}", totals(month, prices), in_session)


def totals(rows: list[UsageRow], prices: dict[str, dict[str, float]] | None) -> Totals:
    """``rows`` summed per model and over all, priced by ``prices`` (None: no cost; a model
    it does not list costs 0)."""
    per: dict[str, list[int]] = {}
    for row in rows:
        sums = per.setdefault(row.key.model, [0, 0, 0, 0])
        for i, value in enumerate((row.tokens_in, row.tokens_out, row.calls,
                                   row.estimated_calls)):
            sums[i] += value
    models = [ModelTotals(model, tokens_in, tokens_out, calls, estimated,
                          _cost(prices, model, tokens_in, tokens_out))
              for model, (tokens_in, tokens_out, calls, estimated) in sorted(per.items())]
    cost = None if prices is None else sum(m.cost or 0.0 for m in models)
    return Totals(sum(m.tokens_in for m in models), sum(m.tokens_out for m in models),
                  sum(m.calls for m in models), cost, models)


def _cost(prices: dict[str, Any] | None, model: str, tokens_in: int,
          tokens_out: int) -> float | None:
    if prices is None:
        return None
    price = prices.get(model, {"in": 0.0, "out": 0.0})
    return (tokens_in * price["in"] + tokens_out * price["out"]) / PER
