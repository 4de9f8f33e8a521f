"""LLM token usage: what one model call used, and the per-day totals a turn commits.

A turn collects one ``CallUsage`` per completion it got (a live one or one the turn journal
replayed: only the attempt that commits counts, so each completion counts once); its commit
adds them, summed per model, to the ``UsageRow`` of (tenant, user, project, session, model,
day) in the same write (``TurnCommit.usage``). Rows are totals, never per call, so reading a
month of a tenant stays bounded by its users × sessions × models × days.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import Any


class UsageSource(StrEnum):
    """Where a call's token counts come from."""

    PROVIDER = "provider"
    """The endpoint reported them (the response's ``usage``)."""
    ESTIMATED = "estimated"
    """The endpoint reported none: counted from the characters (``llm/budget.py``)."""


@dataclass(frozen=True)
class CallUsage:
    """The tokens of one completion."""

    model: str
    tokens_in: int
    tokens_out: int
    source: UsageSource


@dataclass(frozen=True)
class UsageKey:
    """What a ``UsageRow`` totals over: one model's calls by one user's session on one day
    (UTC)."""

    tenant_id: str
    user_id: str
    project_id: str
    session_id: str
    model: str
    day: date


@dataclass(frozen=True)
class UsageRow:
    """Totals of one ``UsageKey``: tokens in and out, calls, and how many of those calls
    were ``ESTIMATED``."""

    key: UsageKey
    tokens_in: int
    tokens_out: int
    calls: int
    estimated_calls: int = 0


def totals(key: UsageKey, calls: list[CallUsage]) -> list[UsageRow]:
    """``calls`` summed per model under ``key`` (whose ``model`` is replaced), in the order
    each model first appears."""
    rows: dict[str, UsageRow] = {}
    for call in calls:
        row = rows.get(call.model) or UsageRow(
            UsageKey(key.tenant_id, key.user_id, key.project_id, key.session_id, call.model,
                     key.day), 0, 0, 0)
        rows[call.model] = UsageRow(row.key, row.tokens_in + call.tokens_in,
                                    row.tokens_out + call.tokens_out, row.calls + 1,
                                    row.estimated_calls + (call.source is UsageSource.ESTIMATED))
    return list(rows.values())


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


def priced(rows: list[UsageRow], prices: dict[str, dict[str, float]] | None) -> Totals:
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
