"""What a lane turn commits, and the audit record it leaves."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from pydantic import Field

from vancetope_brain.models.base import Document, utcnow
from vancetope_brain.models.chat import ChatMessage
from vancetope_brain.models.process import CloseReason, ProcessStatus, ThinkProcess
from vancetope_brain.models.steer import DeadLetter, InboxMessage
from vancetope_brain.models.usage import UsageRow


class TurnRecord(Document):
    """One committed lane turn: who ran it, under which epoch, from when to when.

    Only committed turns leave a record, so the records of one process never
    overlap in time; tests of lane serialization check exactly that.
    """

    id: str
    tenant_id: str
    process_id: str
    epoch: int
    worker: str
    lifecycle: str
    drained_ids: list[str] = Field(default_factory=list)
    started_at: datetime
    ended_at: datetime = Field(default_factory=utcnow)
    status_after: ProcessStatus
    #: The process's status when the turn took the lane (None in records older than it).
    status_before: ProcessStatus | None = None


class Timer(Document):
    """A process's wake-up call (``context.timers().after``): once ``due_at`` has passed, the
    sweep delivers ``ExternalCommand(command="timer", params={"key": key})`` into the
    process's inbox. One per (process, key), ``id`` = ``<process id>:<key>``: arming a key
    again replaces its due time. A timer of a CLOSED or missing process is dropped unfired.
    """

    id: str
    tenant_id: str
    process_id: str
    key: str
    due_at: datetime


class TurnEvent(NamedTuple):
    """An event a turn publishes once committed (a ``StreamEvent`` type and its data)."""

    type: str
    data: dict[str, Any]


class OutboxEvent(Document):
    """An event a committed turn has still to publish into its session's stream
    (``EventOutboxStore``). Written by ``LaneStore.commit_turn`` with the turn; removed
    once published.

    ``id`` is also the publication's dedupe key, so an event published twice (its
    publisher died before removing it) lands in the stream once: ``chat:<line id>`` for
    a committed chat line, ``<process id>:<epoch>:<index>`` for the turn's other events.
    A process's events are published in ``(epoch, index)`` order.
    """

    id: str
    tenant_id: str
    session_id: str
    process_id: str
    epoch: int
    index: int
    type: str
    data: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)


@dataclass
class TurnCommit:
    """Everything one turn writes, applied by ``LaneStore.commit_turn`` all-or-nothing."""

    status: ProcessStatus
    record: TurnRecord
    close_reason: CloseReason | None = None
    last_error: str | None = None
    engine_state: dict[str, Any] | None = None
    drained_ids: list[str] = field(default_factory=list)
    chat: list[ChatMessage] = field(default_factory=list)
    control_handled: str | None = None
    """The lifecycle call this turn executed; cleared from the process if still the pending one."""
    spawned: list[ThinkProcess] = field(default_factory=list)
    """Child processes this turn started (inserted as given, status INIT)."""
    outbox: list[InboxMessage] = field(default_factory=list)
    """Messages this turn sends to other processes (appended like ``LaneStore.append_message``)."""
    timers: list[Timer] = field(default_factory=list)
    """Timers this turn arms (inserted, or replacing the same id's due time)."""
    events: list[TurnEvent] = field(default_factory=list)
    """Events to publish once committed, after one ``chat-message`` per chat line written
    (all enqueued in the event outbox with the commit)."""
    journal_opened: bool = False
    """The turn read the process's turn journal (``JournalStore``): the commit deletes its
    entries but the IN_DOUBT ones. A turn that never read it (a pause, say) leaves the
    journal to the turn that redoes the work; a commit that closes the process deletes every
    entry either way."""
    dead_letters: dict[str, DeadLetter] = field(default_factory=dict)
    """Messages this turn sets aside unprocessed (id → why): drained, with the mark."""
    uncounted_ids: list[str] = field(default_factory=list)
    """Messages whose attempt this turn counted but which it leaves pending (a pause reads
    no message): their ``attempts`` go back down by one."""
    engine_failures: int = 0
    """The process's ``engineFailures`` after this turn (0 after a turn whose engine
    succeeded)."""
    usage: list[UsageRow] = field(default_factory=list)
    """The tokens of the turn's completions, one row per model (``models/usage.py``): each
    added to the stored totals of its key, in the same write, so a turn that never commits
    counts nothing and one that does counts once."""


@dataclass(frozen=True)
class Committed:
    """What ``LaneStore.commit_turn`` wrote: the chat lines, with their ``seq``, and the
    outbox events it enqueued, in publishing order (so its caller publishes them without
    reading them back)."""

    lines: list[ChatMessage]
    events: list[OutboxEvent]


@dataclass(frozen=True)
class TurnStart:
    """What ``LaneStore.turn_start`` read: the process, the first events its outbox holds
    and the first messages its inbox holds, each in its own order."""

    process: ThinkProcess
    events: list[OutboxEvent]
    """At most the ``events`` asked for, in publishing order (``EventOutboxStore.pending_events``)."""
    pending: list[InboxMessage]
    """At most the ``messages`` asked for, undrained, in ``seq`` order
    (``LaneStore.pending_messages``)."""
