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
