"""The usage port: LLM token totals per (tenant, user, project, session, model, day).

Written only by ``LaneStore.commit_turn`` (``TurnCommit.usage``), in the turn's own write:
each backend's lane adapter adds the rows through its usage module (``add_usage_in`` /
``add_usage``). This port reads them.
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import date

from vancetope_brain.models.usage import UsageRow
from vancetope_brain.store.backend import Port

MAX_READ = 10_000
"""Most rows one ``read_usage`` call returns."""


class UsageStore(Port):
    """Token totals. A row's counters only grow: a commit adds its turn's tokens to the row
    of each of its keys (creating it at zero first), atomically with the rest of the turn
    on SQLite and PostgreSQL; on MongoDB right after the turn's record is inserted, so a
    commit retried after a crash adds nothing twice, and a crash between the two loses
    that one turn's tokens.
    """

    @abstractmethod
    def read_usage(self, tenant_id: str, first_day: date, last_day: date, *,
                   user_id: str | None = None, session_id: str | None = None
                   ) -> list[UsageRow]:
        """The tenant's rows of the days ``first_day`` to ``last_day`` (both included), only
        the user's / session's if given, at most ``MAX_READ``, ordered by day, then session,
        then model."""
