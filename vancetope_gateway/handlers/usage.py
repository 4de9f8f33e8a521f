"""The usage frame: the caller's own LLM token usage and its cost (issue 32, part 3)."""

from __future__ import annotations

from pydantic import Field

from vancetope_brain.models import utcnow
from vancetope_brain.models.base import Wire
from vancetope_brain.models.usage import Totals
from vancetope_gateway.handlers.declare import Context, frame


class UsageQuery(Wire):
    """The caller's usage this month and, with ``sessionId`` (one of their sessions), in
    that session."""

    session_id: str | None = Field(default=None, min_length=1, max_length=64)


class ModelUsage(Wire):
    """One model's tokens in (the input) and out (the answer), its calls and how many of
    them the endpoint reported no usage for (counted from the characters: ``estimatedCalls``);
    ``cost`` by the tenant's ``llm.prices`` (per 1M tokens), null when it has none."""

    model: str
    tokens_in: int
    tokens_out: int
    calls: int
    estimated_calls: int
    cost: float | None


class UsageTotals(Wire):
    """Totals over ``models``."""

    tokens_in: int
    tokens_out: int
    calls: int
    cost: float | None
    models: list[ModelUsage]

    @classmethod
    def of(cls, totals: Totals) -> UsageTotals:
        return cls(tokens_in=totals.tokens_in, tokens_out=totals.tokens_out,
                   calls=totals.calls, cost=totals.cost,
                   models=[ModelUsage(model=m.model, tokens_in=m.tokens_in,
                                      tokens_out=m.tokens_out, calls=m.calls,
                                      estimated_calls=m.estimated_calls, cost=m.cost)
                           for m in totals.models])


class UsageReport(Wire):
    """Reply to ``usage``: ``month`` (``YYYY-MM``, UTC) and the caller's totals in it in
    every session, and in the session asked about (null when none was). Only committed
    turns count: a turn still running shows once it commits."""

    month: str
    this_month: UsageTotals
    session: UsageTotals | None


@frame("usage")
def usage(conn: Context, data: UsageQuery) -> UsageReport:
    who, today = conn.who, utcnow().date()
    session = None
    if data.session_id is not None:
        found = conn.gateway.sessions.get(who, data.session_id)
        session = (found.id, found.created_at.date())
    report = conn.gateway.usage.of_user(who.tenant_id, who.user_id, today, session=session)
    return UsageReport(month=report.month, this_month=UsageTotals.of(report.this_month),
                       session=None if report.session is None
                       else UsageTotals.of(report.session))
