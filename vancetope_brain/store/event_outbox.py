"""The event outbox port: events committed turns have still to publish (ARCHITECTURE §5)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from datetime import datetime

from vancetope_brain.models import ChatMessage, OutboxEvent, TurnEvent, utcnow
from vancetope_brain.store.backend import Port

CHAT_MESSAGE = "chat-message"
"""The event type of a committed chat line (``EventType.CHAT_MESSAGE``)."""


class EventOutboxStore(Port):
    """Events that committed turns have still to publish into their sessions' streams.

    Rows are written only by ``LaneStore.commit_turn``, in the same write as the turn
    (``turn_events`` builds them), so a worker that dies after its commit leaves its
    events here instead of losing them. This port reads and removes them: whoever
    publishes (the lane's next turn, the sweeper) publishes a process's rows in
    ``(epoch, index)`` order and then removes them; a row published twice is
    deduplicated by its id (``EventBus.publish``'s ``dedupe``).
    """

    @abstractmethod
    def pending_events(self, tenant_id: str, process_id: str,
                       limit: int = 500) -> list[OutboxEvent]:
        """The process's unpublished events in ``(epoch, index)`` order (at most ``limit``)."""

    @abstractmethod
    def stale_event_processes(self, older_than: datetime,
                              limit: int = 100) -> list[tuple[str, str]]:
        """System query for the sweeper: distinct (tenant, process) pairs holding an event
        created before ``older_than``, the longest-waiting first, at most ``limit``."""

    @abstractmethod
    def remove_events(self, tenant_id: str, event_ids: Iterable[str]) -> None:
        """Remove the tenant's events with these ids; ids not (or no longer) stored are
        ignored, so removing twice is harmless."""


def turn_events(tenant_id: str, session_id: str, process_id: str, epoch: int,
                lines: Iterable[ChatMessage], events: Iterable[TurnEvent]) -> list[OutboxEvent]:
    """The outbox rows of one commit: a ``chat-message`` per line (its data the line as
    written), then ``events``, numbered in that order. What every adapter's ``commit_turn``
    enqueues."""
    now = utcnow()
    rows = [(f"chat:{line.id}", CHAT_MESSAGE, line.dump()) for line in lines]
    rows += [(f"{process_id}:{epoch}:{len(rows) + i}", event.type, event.data)
             for i, event in enumerate(events)]
    return [OutboxEvent(id=event_id, tenant_id=tenant_id, session_id=session_id,
                        process_id=process_id, epoch=epoch, index=index, type=kind, data=data,
                        created_at=now)
            for index, (event_id, kind, data) in enumerate(rows)]
