"""The lanes port: a process's inbox of steer messages, its epoch, committed turns and chat."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import datetime

from vancetope_brain.models import (
    ChatMessage,
    Committed,
    InboxMessage,
    ProcessStatus,
    ThinkProcess,
    TurnCommit,
    TurnRecord,
    TurnStart,
)
from vancetope_brain.store.backend import Backend, Port
from vancetope_brain.store.event_outbox import EventOutboxStore
from vancetope_brain.store.sessions import SessionStore


class LaneStore(Port):
    """What a lane turn reads and writes (ARCHITECTURE §3).

    Ordering: inbox ``seq`` is strictly increasing per process in the order the
    appends complete; chat ``seq`` is consecutive per process in commit order.
    Fencing: every epoch-conditional write is a no-op for a turn whose epoch
    has moved on. ``stale_pending`` is a system query across tenants (the
    sweeper's).
    """

    @abstractmethod
    def append_message(self, message: InboxMessage) -> tuple[InboxMessage, bool]:
        """Persist a message into its target's inbox, assigning the next per-process ``seq``.

        Sequence numbers are strictly increasing per process in the order the
        appends complete. A repeated (target, idempotencyKey) stores nothing
        and returns the first message with ``False``. Raises ``NotFound`` if
        the target process does not exist in the tenant.
        """

    @abstractmethod
    def pending_messages(self, tenant_id: str, process_id: str, limit: int = 1000) -> list[InboxMessage]:
        """Undrained messages of the process in ``seq`` order (at most ``limit``)."""

    @abstractmethod
    def turn_start(self, tenant_id: str, process_id: str, *, messages: int,
                   events: int) -> TurnStart:
        """What a lane turn reads before its epoch, in one read: the process (as
        ``SessionStore.get_process``), its first ``events`` outbox events (as
        ``EventOutboxStore.pending_events``) and its first ``messages`` undrained messages (as
        ``pending_messages``).

        PostgreSQL reads the three in one snapshot (one statement); SQLite and MongoDB one
        after the other in this order, as the three calls would. Raises ``NotFound``.
        """

    @abstractmethod
    def stale_pending(self, older_than: datetime, limit: int = 100) -> list[tuple[str, str]]:
        """System query for the sweeper: distinct (tenant, process) pairs that need a turn and
        were left waiting since before ``older_than``: an undrained message of a process that is
        not CLOSED, PAUSED or SUSPENDED (``lifecycle.HOLDS_MESSAGES``) — or that is CLOSED with
        closeReason FAILED (``lifecycle.ANSWERS_WHEN_CLOSED``: its turn answers the
        message) —, or a ``pendingControl`` of a process that is not CLOSED
        requested before ``older_than``.
        """

    @abstractmethod
    def unsettled(self, limit: int = 100) -> list[tuple[str, str]]:
        """System query for the sweeper: (tenant, process) pairs whose status is INIT or
        RUNNING (``lifecycle.UNSETTLED``) — a start whose wake was lost, or (with no live lease) a turn that died —
        at most ``limit``. Such a turn may have left no message behind to find it by."""

    @abstractmethod
    def acquire_epoch(self, tenant_id: str, process_id: str,
                      message_ids: Sequence[str] = ()) -> ThinkProcess:
        """Start a lane turn: atomically increment ``epoch`` and ``turnAttempts`` and, if the
        status is INIT, IDLE or BLOCKED (``lifecycle.MARKED_RUNNING``), set it to RUNNING; then count a delivery attempt
        (``attempts`` + 1) of each listed message of the process that is still undrained.

        Returns the document with the *new* epoch and the status and ``turnAttempts``
        it had *before* this call (the engine needs to know where it came from; the
        runner, whether the turn before this one died). Any turn holding an older
        epoch is fenced from then on. The attempts are counted before this returns,
        so a turn that dies anywhere after it was counted. (An adapter may count
        them in a second write right after the first; a crash between the two
        leaves that turn's messages uncounted, and it had run nothing.)
        Raises ``NotFound``.
        """

    @abstractmethod
    def request_control(self, tenant_id: str, process_id: str, call: str,
                        allowed_from: frozenset[ProcessStatus]) -> ThinkProcess:
        """Atomically record a lifecycle call for the next lane turn, if the status allows it.

        Sets ``pendingControl = call`` and ``controlRequestedAt = now`` (replacing
        any earlier request) only while the status is in ``allowed_from``, and
        returns the updated document. Raises ``Conflict`` naming the current
        status otherwise, ``NotFound`` if the process does not exist.
        """

    @abstractmethod
    def commit_turn(self, tenant_id: str, process_id: str, epoch: int,
                    commit: TurnCommit) -> Committed | None:
        """Apply a turn's effects all-or-nothing, only if ``epoch`` is still current.

        Effects: mark ``commit.drained_ids`` drained (with this epoch), append
        ``commit.chat`` with consecutive chat ``seq`` numbers in list order, set
        status / closeReason / lastError / engineState, insert ``commit.record``,
        insert ``commit.spawned`` processes and append ``commit.outbox`` messages to
        their targets' inboxes (as ``append_message`` does), upsert ``commit.timers`` by id,
        clear ``pendingControl`` (and ``controlRequestedAt``) if it still equals
        ``commit.control_handled`` (a newer request survives), enqueue the turn's events
        in the event outbox (``EventOutboxStore``; ``event_outbox.turn_events``: one
        ``chat-message`` per line written, then ``commit.events``), and clear the process's
        turn journal (``JournalStore``): all of it when the status is CLOSED, else, if
        ``commit.journal_opened``, every entry but the IN_DOUBT ones. Each of
        ``commit.dead_letters`` is drained too, with its ``deadLetter`` mark; each of
        ``commit.uncounted_ids`` still pending gets one ``attempts`` fewer (never below
        0). Sets ``engineFailures`` to ``commit.engine_failures`` and ``turnAttempts``
        to 0.
        Returns what it wrote (``Committed``): the chat lines as written (with their
        ``seq``) and the events it enqueued, in publishing order; or None, having
        written nothing, when the epoch moved on (fenced) or a listed message (or dead
        letter) was already drained. Chat lines whose (process, sourceMessageId, role)
        already exists are skipped and not returned.
        """

    @abstractmethod
    def chat_history(
        self, tenant_id: str, process_id: str, *, before_seq: int | None = None, limit: int = 100
    ) -> list[ChatMessage]:
        """The last ``limit`` chat lines of the process before ``before_seq``, oldest first."""

    @abstractmethod
    def turn_records(self, tenant_id: str, process_id: str, *, lifecycle: str | None = None,
                     last: int | None = None) -> list[TurnRecord]:
        """The process's committed turns in epoch order; with ``lifecycle``, only the turns
        of that lifecycle call; with ``last``, only the last ``last`` of them (an indexed
        read, however many turns the process ran)."""


def turn_start_read_by_read(backend: Backend, tenant_id: str, process_id: str, *,
                            messages: int, events: int) -> TurnStart:
    """``LaneStore.turn_start`` as the three reads it stands for, one after the other, in its
    order (SQLite: each costs microseconds in-process, and one transaction would add its own
    BEGIN and COMMIT; MongoDB: no multi-document snapshot without a transaction, which
    mongomock lacks)."""
    process = backend.port(SessionStore).get_process(tenant_id, process_id)
    return TurnStart(
        process=process,
        events=backend.port(EventOutboxStore).pending_events(tenant_id, process_id, events),
        pending=backend.port(LaneStore).pending_messages(tenant_id, process_id, messages))
