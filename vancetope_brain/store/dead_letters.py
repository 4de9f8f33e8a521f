"""The dead-letter port: messages a lane set aside unprocessed, for operators to list and put
back (``vancetope admin dead-letter``)."""

from __future__ import annotations

from abc import abstractmethod

from vancetope_brain.models import InboxMessage
from vancetope_brain.store.backend import Port

MAX_LISTED = 1000
"""Most dead letters one ``dead_letters`` call returns."""


class DeadLetterStore(Port):
    """Dead letters are inbox messages drained with a ``deadLetter`` mark by a fenced turn
    commit (``LaneStore.commit_turn``); nothing here deletes one."""

    @abstractmethod
    def dead_letters(self, tenant_id: str, process_id: str | None = None,
                     limit: int = 100) -> list[InboxMessage]:
        """The tenant's dead letters (of one process, if given), oldest mark first, at most
        ``min(limit, MAX_LISTED)``."""

    @abstractmethod
    def requeue_dead_letter(self, tenant_id: str, message_id: str) -> InboxMessage:
        """Put a dead letter back into its process's inbox, atomically: undrained, with
        ``attempts`` 0 and no mark, keeping its ``seq`` (so it comes before every message
        sent after it). Returns it as stored. Nothing wakes the process here: the sweeper
        finds the (old) pending message. Raises ``NotFound`` when the tenant has no such
        dead letter (a message that is not one looks missing), ``Conflict`` when its
        process is CLOSED (nothing would ever read it)."""
