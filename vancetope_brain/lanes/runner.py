"""The lane turn (ARCHITECTURE §3): lease → epoch → engine → fenced commit → release → re-check."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import redis

from vancetope_brain.engines.base import EngineRegistry, ParentReport, ThinkEngine
from vancetope_brain.engines.context import RESET_MARK, ThinkEngineContext
from vancetope_brain.engines.inspector import inspect
from vancetope_brain.errors import (
    Conflict,
    Fenced,
    Interrupted,
    NotFound,
    RuntimeFailure,
    StoreError,
)
from vancetope_brain.events import EventBus, EventOutbox, EventType
from vancetope_brain.events.interrupts import Interrupts
from vancetope_brain.events.outbox import FLUSH_PAGE
from vancetope_brain.lanes import faults
from vancetope_brain.lanes.lease import TAKE_OVER_MARGIN, Lease, LeaseKeeper
from vancetope_brain.lanes.quota import QuotaService, quota_held
from vancetope_brain.lanes.waker import Lingering, Waker
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    InboxMessage,
    OutboxEvent,
    ProcessEvent,
    ProcessStatus,
    SessionStatus,
    ThinkProcess,
    TurnCommit,
    TurnEvent,
    TurnRecord,
    lifecycle,
    new_id,
    utcnow,
)
from vancetope_brain.models.inbox import InboxQuery, ItemStatus
from vancetope_brain.models.inspector import TURN_META
from vancetope_brain.models.lifecycle import (
    CallEffect,
    LifecycleCall,
    NoTurn,
    TurnMode,
    TurnPlan,
    TurnState,
)
from vancetope_brain.models.usage import UsageKey, totals
from vancetope_brain.observability import logs, metrics, tracing
from vancetope_brain.store import InspectorStore, LaneStore, SessionStore, UserInboxStore

if TYPE_CHECKING:
    from vancetope_brain.engines.contexts import ContextFactory

log = logging.getLogger(__name__)

PENDING_PER_TURN = 1000
"""Most inbox messages one turn reads; more wait for the next turn, which starts at once."""
TURNS_PER_TASK = 50
"""Most turns one shard task runs (``LaneRunner.drain``): a longer round ends here, and what
it leaves waiting is another task's, which is queued whenever processes wait
(``Waker.next_ready``)."""
TASK_SECONDS = 0.5
"""A shard task takes no further process once it has run this long: a worker's warm
shutdown waits for one more turn at most, and turns that wait on the network (an LLM)
run one per task, side by side in the pool, as the queued task takes the next."""
MIN_LINGER = 0.001
"""Seconds below which a shard task does not linger (when less than this is left of
``TASK_SECONDS``); a blocking read of 0 s would wait forever."""
RETRY_DELAY = 1.0
"""Seconds after which a turn that the store or Redis failed under in a shard task runs
again, as a lane-turn task of its own (which retries with back-off from there)."""


Ended = Callable[[ThinkProcess, ProcessStatus, CloseReason | None], None]
"""Told, after the commit, each time a turn closes or blocks a process (with the close
reason): where a schedule's run records its outcome (``ScheduleService.run_ended``). The
commit is the one place a process's terminal status is written."""


class TurnOutcome(StrEnum):
    COMMITTED = "committed"   # a turn ran and its effects are in the store
    BUSY = "busy"             # another worker holds the lease; it re-checks the inbox on release
    NOTHING = NoTurn.NOTHING.value  # no pending message and nothing to start
    HELD = NoTurn.HELD.value        # PAUSED / SUSPENDED / CLOSED: messages wait
    FENCED = "fenced"         # the lease was taken over mid-turn; nothing was written
    GONE = "gone"             # the process does not exist


class LaneRunner:
    """Runs lane turns. One instance per worker process; thread-safe."""

    def __init__(self, *, lanes: LaneStore, processes: SessionStore, items: UserInboxStore,
                 events: EventBus, outbox: EventOutbox, leases: LeaseKeeper, waker: Waker,
                 engines: EngineRegistry, contexts: ContextFactory, max_attempts: int = 3,
                 max_engine_failures: int = 3, linger: float = 0.0,
                 worker_name: str | None = None, interrupts: Interrupts | None = None,
                 quota: QuotaService | None = None,
                 inspections: InspectorStore | None = None,
                 on_ended: Ended | None = None):
        self._lanes = lanes
        self._processes = processes
        self._items = items
        self._events = events
        self._outbox = outbox
        self._leases = leases
        self._waker = waker
        self._engines = engines
        self._contexts = contexts
        self._max_attempts = max_attempts
        self._max_engine_failures = max_engine_failures
        self._linger = linger
        self._interrupts = interrupts
        self._worker = worker_name or f"{socket.gethostname()}:{os.getpid()}"
        self._quota = quota
        self._inspections = inspections
        self._on_ended = on_ended

    def drain(self, shard: int) -> list[TurnOutcome]:
        """The shard task: one round of ``shard``'s ready processes — a turn of each that
        waited when the task began, one at a time, longest-waiting first, at most
        ``TURNS_PER_TASK`` and none begun after ``TASK_SECONDS``; returns their outcomes.
        A process woken meanwhile (a busy one too) is the next task's, queued behind the
        other shards' tasks (or, when no other shard's task is queued, this task's next
        round, within the same caps): no lane waits for more than one turn of each other ready lane
        of its shard, nor for more than a round of each other shard (docs/architecture.md,
        "The lane turn"). Each turn runs under its own lease and epoch, as a lone one would.
        One that the store or Redis failed under runs again ``RETRY_DELAY`` seconds later in
        a task of its own.
        When nothing waits, no task of the shard is queued and no other shard's task waits
        for a worker, the task lingers up to ``linger`` seconds (within ``TASK_SECONDS``)
        for a wake of the shard, which then needs no Celery message, and goes on as if it
        had just begun (and may linger again after that round); another shard's task queued
        meanwhile ends the linger. A linger always ends with a take, which clears its flag."""
        outcomes: list[TurnOutcome] = []
        until = time.monotonic() + TASK_SECONDS
        round_end: bytes | None = None
        taken = 0
        may_linger, lingered = True, False
        while taken < TURNS_PER_TASK:
            left = until - time.monotonic()
            if taken and left <= 0 and not lingered:  # a linger ends with a take (its flag)
                break
            linger = min(self._linger, left) if may_linger else 0.0
            token = self._leases.new_token()
            ready = self._waker.next_ready(shard, round_end, token=token,
                                           lease_ttl=self._leases.ttl,
                                           linger=linger if linger >= MIN_LINGER else 0.0)
            lingered = False
            if ready is None:
                break
            if isinstance(ready, Lingering):
                # Once per quiet spell: a linger nothing rang is not repeated.
                may_linger = self._waker.await_wake(shard, linger)
                lingered, round_end = True, None
                continue
            taken += 1
            round_end = ready.round_end
            lease = self._leases.adopt(ready.process_id, token) if ready.busy_for is None \
                else ready.busy_for
            try:
                outcomes.append(self.run(ready.tenant_id, ready.process_id, lease))
            except (RuntimeFailure, redis.RedisError) as e:
                log.warning("lane turn of %s failed (%s); retrying in %ss", ready.process_id, e,
                            RETRY_DELAY)
                self._waker.wake_after(ready.tenant_id, ready.process_id, RETRY_DELAY)
        return outcomes

    def run(self, tenant_id: str, process_id: str,
            lease: Lease | float | None = None) -> TurnOutcome:
        """Run at most one turn of the process; wake it again if messages remain.
        ``lease``: the lane's lease if the caller took it (``drain``), or the seconds the
        worker holding it holds it for still (the caller found it taken and asked for a
        re-check); None: the turn takes it itself."""
        with logs.turn_context(tenant_id=tenant_id, process_id=process_id), \
                tracing.span("lane.turn", process_id=process_id):
            outcome = self._run(tenant_id, process_id, lease)
        metrics.TURNS.labels(outcome.value).inc()
        return outcome

    def _run(self, tenant_id: str, process_id: str, lease: Lease | float | None) -> TurnOutcome:
        if lease is None:
            lease = self._leases.try_acquire(process_id)
            if lease is None:
                lease = self._leases.remaining(process_id)
        if not isinstance(lease, Lease):
            # A live holder looks again when it releases; a dead or frozen one never does,
            # so a turn is also due once its lease runs out (no wait for the sweeper).
            self._waker.wake_after(tenant_id, process_id, lease + TAKE_OVER_MARGIN)
            return TurnOutcome.BUSY
        status: ProcessStatus | None = None
        again = look = False
        try:
            outcome, status, again, look = self._turn(tenant_id, process_id, lease)
        finally:
            # No lost wake-up (docs/architecture.md, "No lost wake-up" 4 and 5): a task
            # that found the lease taken while we held it asked for a re-check
            # (``LeaseKeeper``); a sender that found the process holding its messages
            # (PAUSED, SUSPENDED) woke nothing, so a turn that ends that looks too
            # (``look``); everything else arrived before our reads.
            asked = self._leases.release(lease)
        if status is not None and (again or (asked or look)
                                   and self._needs_turn(tenant_id, process_id, status)):
            self._waker.wake(tenant_id, process_id)
        return outcome

    def _needs_turn(self, tenant_id: str, process_id: str, status: ProcessStatus) -> bool:
        if status is ProcessStatus.CLOSED:  # a FAILED one still answers what reaches it
            return lifecycle.takes_messages(
                status, self._processes.get_process(tenant_id, process_id).close_reason) and \
                bool(self._lanes.pending_messages(tenant_id, process_id, limit=1))
        if status in lifecycle.WAKES_ON_MESSAGE and \
                self._lanes.pending_messages(tenant_id, process_id, limit=1):
            return True
        return self._processes.get_process(tenant_id, process_id).pending_control is not None

    def _plan(self, current: ThinkProcess, pending: list[InboxMessage]) -> TurnPlan | NoTurn:
        """What the next turn of ``current``, whose inbox holds ``pending``, does and reads
        (``lifecycle.plan_turn``), decided before it takes the epoch (which counts the
        attempt of every message it reads)."""
        # RUNNING while we hold the lease: its turn died (killed, or frozen past its lease);
        # the turn records tell whether that was its start.
        state = TurnState.of(current, unstarted=current.status is ProcessStatus.RUNNING and
                             self._unstarted(current))
        if lifecycle.holds(state):
            if not self._released(current):
                return NoTurn.HELD
            # A quota held it, and allows it now: it resumes as if its user asked.
            state = TurnState.of(self._lanes.request_control(
                current.tenant_id, current.id, LifecycleCall.RESUME.value,
                allowed_from=frozenset({ProcessStatus.PAUSED})))
        return lifecycle.plan_turn(state, pending, max_attempts=self._max_attempts)

    def _released(self, current: ThinkProcess) -> bool:
        """Whether a quota holds ``current`` (``lanes/quota.py``) but no longer would:
        one read of the settings and, if a quota is set, of the usage rows. Asked only of
        a woken PAUSED process: its quota's timer fired or a quota was written."""
        return self._quota is not None and quota_held(current) and \
            current.pending_control is None and self._quota.over(current) is None

    def _turn(self, tenant_id: str, process_id: str,
              lease: Lease) -> tuple[TurnOutcome, ProcessStatus | None, bool, bool]:
        """Run the turn; returns its outcome, the status after it, whether the lane needs
        another turn at once (a reset, or messages this turn left pending), and whether it
        must look at the inbox again (it took the process out of a status that holds
        messages, whose senders therefore woke nothing)."""
        # One read (``LaneStore.turn_start``): the process, its outbox's first page, and its
        # inbox, read once, before the epoch: a message appended after this read wakes the
        # lane, and its task's re-check request reaches us on release. (If a fenced-out
        # worker drains one of these meanwhile, our commit is refused: nothing is doubled.)
        try:
            start = self._lanes.turn_start(tenant_id, process_id, messages=PENDING_PER_TURN,
                                           events=FLUSH_PAGE)
        except NotFound:
            return TurnOutcome.GONE, None, False, False
        current = start.process
        # What an earlier turn committed but never published (its worker died) goes out
        # first, before anything of this one's: the stream keeps commit order.
        self._outbox.flush(tenant_id, process_id, first=start.events)
        plan = self._plan(current, start.pending)
        if isinstance(plan, NoTurn):
            return TurnOutcome(plan.value), current.status, False, False
        started = utcnow()
        counted = plan.counted
        process = self._lanes.acquire_epoch(tenant_id, process_id, counted)
        turn_id = new_id("turn")
        logs.bind(session_id=process.session_id, turn_id=turn_id, epoch=process.epoch)
        # A call requested since the plan was made runs instead of a start or steer.
        plan = lifecycle.settle(plan, TurnState.of(process), max_attempts=self._max_attempts)
        if plan.mode is TurnMode.RESTART:
            process = process.model_copy(update={"status": ProcessStatus.INIT})
        before = process.status
        if before in lifecycle.MARKED_RUNNING:
            self._events.publish(process.session_id, process_id, EventType.STATUS_CHANGED,
                                 {"from": before.value, "to": ProcessStatus.RUNNING.value})
        if current.status is ProcessStatus.RUNNING:
            # The last attempt died: what it streamed is void; the journal replays its steps.
            metrics.LEASE_TAKEOVERS.inc()
            self._events.publish(process.session_id, process_id, EventType.TURN_RESTARTED,
                                 {"epoch": process.epoch})
        engine = self._engines.find(process.engine)
        call, name = plan.call, plan.lifecycle
        # Only start runs in INIT (think-engines §5): messages queued meanwhile are for the
        # first steer after it, which follows at once (``left`` below).
        context = self._contexts(process, lease.lost, engine, plan.read)
        keep_journal = False
        try:
            status, reason, error, failures = self._decide(plan, engine, process, context)
        except Interrupted as e:
            log.info("turn of %s (epoch %s) interrupted by its user", process_id, process.epoch)
            status, back = faults.interrupted_turn(
                context, e.said, call=call,
                read=plan.batch if plan.mode is TurnMode.STEER else [])
            reason, error, failures = None, process.last_error, process.engine_failures
            # A message put back is handled again by the next turn, which adopts this
            # turn's journal when it is given the same messages: keep it for that turn.
            keep_journal = bool(back)
            if self._interrupts is not None:
                self._interrupts.done(process_id, process.epoch)
        except Fenced:
            log.warning("turn of %s (epoch %s) fenced; writing nothing", process_id, process.epoch)
            metrics.FENCED_COMMITS.inc()
            return TurnOutcome.FENCED, None, False, False
        except (StoreError, redis.RedisError):
            # The store or Redis failed under the turn: not the engine's fault. The turn is
            # abandoned unwritten (its messages stay pending, the lane RUNNING) and the task
            # retries; a turn that finds its lane RUNNING runs again (``died`` above).
            log.warning("turn of %s (epoch %s) abandoned: the store or Redis failed",
                        process_id, process.epoch)
            metrics.TURNS.labels("abandoned").inc()
            raise
        except Exception as e:
            log.exception("engine %s failed in %s of %s", process.engine, name, process_id)
            metrics.ENGINE_FAILURES.inc()
            error = f"{type(e).__name__}: {e}"[:2000]
            status, reason, failures = faults.failed_turn(
                context, error, lifecycle=name, call=call,
                read=plan.batch if plan.mode is TurnMode.STEER else [], pending=plan.pending,
                max_failures=self._max_engine_failures)
        if call is None and self._awaits_user(process, status, reason):
            status, reason = ProcessStatus.BLOCKED, None
        turn = context.turn
        for line in turn.chat:  # the link from a chat line to its inspector record
            line.meta[TURN_META] = turn_id
        record = TurnRecord(id=turn_id, tenant_id=tenant_id, process_id=process_id,
                            epoch=process.epoch, worker=self._worker, lifecycle=name,
                            drained_ids=[m.id for m in turn.drained], started_at=started,
                            status_after=status, status_before=before)
        outbox = list(turn.outbox)
        report = None if plan.mode is TurnMode.ANSWER else \
            self._parent_report(engine, process, status, reason, turn.engine_state)
        if report is not None:
            outbox.append(report)
        read = set(record.drained_ids) | set(turn.dead_letters)
        shown_before = ProcessStatus.RUNNING if before in lifecycle.MARKED_RUNNING else before
        # ``reason``: how a process closed (webhooks tell a done one from a failed one).
        events = [] if status is shown_before else [TurnEvent(
            EventType.STATUS_CHANGED.value, {"from": shown_before.value, "to": status.value,
                                             **({"reason": reason.value} if reason else {})})]
        commit = TurnCommit(status=status, record=record, close_reason=reason,
                            last_error=error, engine_state=turn.engine_state,
                            drained_ids=record.drained_ids, chat=turn.chat,
                            control_handled=process.pending_control if call else None,
                            spawned=turn.spawned, outbox=outbox, timers=turn.timers,
                            events=events,
                            journal_opened=context.journal_opened and not keep_journal,
                            dead_letters=turn.dead_letters, engine_failures=failures,
                            uncounted_ids=[mid for mid in counted if mid not in read],
                            usage=totals(UsageKey(tenant_id, process.user_id, process.project_id,
                                                  process.session_id, "", started.date()),
                                         turn.usage))
        written = None if lease.lost.is_set() else \
            self._lanes.commit_turn(tenant_id, process_id, process.epoch, commit)
        if written is None:
            log.warning("commit of %s (epoch %s) fenced; nothing written", process_id, process.epoch)
            metrics.FENCED_COMMITS.inc()
            return TurnOutcome.FENCED, None, False, False
        metrics.TURN_SECONDS.labels(name).observe((utcnow() - started).total_seconds())
        metrics.DEAD_LETTERS.inc(len(commit.dead_letters))
        metrics.tokens_committed(tenant_id, commit.usage)
        # The turn's events first: its client waits for them, not for the record.
        self._publish_committed(tenant_id, process_id, written.events)
        self._inspect(context, turn_id, process, name, started, status)
        self._after_commit(process, commit, turn.stops, stopped=call is LifecycleCall.STOP)
        if self._on_ended is not None and status is not before and \
                status in (ProcessStatus.CLOSED, ProcessStatus.BLOCKED):
            self._on_ended(process, status, reason)
        if call is LifecycleCall.PAUSE and status is ProcessStatus.PAUSED:
            self._suspend_if_session_is(process)
        left = lifecycle.takes_messages(status, reason) and \
            (len(read) < len(plan.pending) or len(plan.pending) == PENDING_PER_TURN)
        wakes = lifecycle.WAKES_ON_MESSAGE
        return TurnOutcome.COMMITTED, status, status is ProcessStatus.INIT or left, \
            current.status not in wakes and status in wakes

    def _inspect(self, context: ThinkEngineContext, turn_id: str, process: ThinkProcess,
                 lifecycle: str, started: datetime, status: ProcessStatus) -> None:
        """Write the committed turn's inspector record (docs/architecture.md, "The
        inspector"): after the commit, not in it — a record lost to a crash in between costs
        a diagnostic, never the turn —, after its events are published, so its client does
        not wait for it, and never failing the turn."""
        if self._inspections is None:
            return
        try:
            self._inspections.put_inspection(inspect(
                context.turn.steps, turn_id=turn_id, process=process, lifecycle=lifecycle,
                profile=context.profile, started_at=started, ended_at=utcnow(),
                status_after=status, chat_ids=[line.id for line in context.turn.chat],
                secrets=self._contexts.secrets))
        except Exception:  # a diagnostic: its failure is logged, the turn stands
            log.warning("the inspector record of turn %s of %s was not written", turn_id,
                        process.id, exc_info=True)

    def _publish_committed(self, tenant_id: str, process_id: str,
                           events: list[OutboxEvent]) -> None:
        """Publish the events the commit enqueued (its chat lines, then its status): all the
        lane's outbox holds, as the turn flushed it before. The turn is committed whatever
        happens here: events that Redis or the store fail to get out stay in the outbox for
        the lane's next turn or the sweeper."""
        try:
            self._outbox.publish(tenant_id, events)
        except (StoreError, redis.RedisError):
            log.warning("events of %s stay in the outbox: publishing them failed", process_id,
                        exc_info=True)

    def _decide(self, plan: TurnPlan, engine: ThinkEngine | None, process: ThinkProcess,
                context: ThinkEngineContext) -> tuple[ProcessStatus, CloseReason | None,
                                                      str | None, int]:
        """Run the turn's engine call, or what stands in for it; returns the status, close
        reason, ``lastError`` and ``engineFailures`` to commit."""
        if plan.mode is TurnMode.ANSWER:
            faults.answer(context, plan.batch, f"the process had failed ({process.last_error}).")
            return ProcessStatus.CLOSED, CloseReason.FAILED, process.last_error, \
                process.engine_failures
        if plan.mode is TurnMode.DEAD_LETTER:
            faults.dead_letter(context, plan.batch[0])
            return lifecycle.fallback_status(None, process.status), None, process.last_error, \
                process.engine_failures
        if plan.given_up and plan.call is None:  # a start: it kills its worker
            error = faults.stuck(context, None, process.turn_attempts, ProcessStatus.CLOSED)
            faults.answer(context, plan.pending, f"the process could not start ({error}).")
            return ProcessStatus.CLOSED, CloseReason.FAILED, error, process.engine_failures
        if plan.mode is TurnMode.STEER and self._quota is not None and \
                (overrun := self._quota.over(process, context.settings())) is not None:
            return faults.over_quota(context, overrun)
        status, reason = self._call_engine(engine, process, context, plan)
        if plan.given_up:
            error = faults.stuck(context, plan.call, process.turn_attempts, status)
            return status, reason, error, process.engine_failures
        return status, reason, None, 0

    def _awaits_user(self, process: ThinkProcess, status: ProcessStatus,
                     reason: CloseReason | None) -> bool:
        """A process that ends a turn IDLE or DONE while a question it put into the user's
        Inbox is still PENDING waits for the answer instead: BLOCKED (user-interaction §10)."""
        if not lifecycle.awaits_answer(status, reason):
            return False
        return bool(self._items.list_inbox_items(process.tenant_id, InboxQuery(
            origin_process_id=process.id, statuses=frozenset({ItemStatus.PENDING}),
            requires_action=True, limit=1)))

    def _unstarted(self, process: ThinkProcess) -> bool:
        """Whether no turn committed since the process was created or last reset: the turn
        that died was its ``start``."""
        last = self._lanes.turn_records(process.tenant_id, process.id, last=1)
        return not last or last[0].status_after is ProcessStatus.INIT

    def _resumed_status(self, process: ThinkProcess) -> ProcessStatus | None:
        """Where a resume out of SUSPENDED returns a process without calling its engine:
        INIT if it never started (it starts now), PAUSED if the suspend found it PAUSED
        (a user's pause outlives the session's suspend and resume); else None."""
        def last(call: str) -> TurnRecord | None:
            found = self._lanes.turn_records(process.tenant_id, process.id, lifecycle=call,
                                             last=1)
            return found[0] if found else None

        if last("start") is None:
            return ProcessStatus.INIT
        if process.status is not ProcessStatus.SUSPENDED:
            return None
        suspend = last(LifecycleCall.SUSPEND.value)
        return ProcessStatus.PAUSED if suspend is not None and \
            suspend.status_before is ProcessStatus.PAUSED else None

    def _parent_report(self, engine: ThinkEngine | None, process: ThinkProcess,
                       status: ProcessStatus, reason: CloseReason | None,
                       state: dict[str, Any] | None) -> InboxMessage | None:
        """The ProcessEvent a parent gets when its child blocks or closes (think-engines §7a)."""
        kind = lifecycle.parent_event(status, reason)
        if process.parent_process_id is None or kind is None:
            return None
        after = process.model_copy(update={
            "status": status, "close_reason": reason,
            "engine_state": process.engine_state if state is None else state})
        summary = engine.summarize_for_parent(after, kind) if engine else \
            ParentReport(f"Process {process.name} is {kind.value}.")
        return InboxMessage(
            id=new_id("msg"), tenant_id=process.tenant_id,
            target_process_id=process.parent_process_id, sender_process_id=process.id,
            idempotency_key=f"{process.id}:{process.epoch}:{kind.value}",
            message=ProcessEvent(source_process_id=process.id, source_name=process.name,
                                 type=kind,
                                 human_summary=summary.human_summary, payload=summary.payload))

    def _after_commit(self, process: ThinkProcess, commit: TurnCommit, stops: list[str], *,
                      stopped: bool) -> None:
        """Start what the turn spawned, wake whom it messaged, stop what it stopped."""
        tenant_id = process.tenant_id
        for child in commit.spawned:
            self._waker.wake(tenant_id, child.id)
        for message in commit.outbox:
            self._waker.wake(tenant_id, message.target_process_id)
        if stopped:  # stopping a process stops everything it started
            stops = stops + self._beneath(process)
        for target in stops:
            try:
                self._lanes.request_control(tenant_id, target, LifecycleCall.STOP.value,
                                            lifecycle.SYSTEM_ALLOWED_FROM[LifecycleCall.STOP])
            except (Conflict, NotFound):
                continue  # closed or gone meanwhile
            self._waker.wake(tenant_id, target)

    def _beneath(self, process: ThinkProcess) -> list[str]:
        """The open processes a stop of ``process`` must reach itself: its children, and
        the children of every one of them already CLOSED, in turn. An open child carries
        the stop further on its own lane; a closed one runs no stop turn, so without this a
        process beneath a level that had failed or finished would outlive the stop."""
        children: dict[str | None, list[ThinkProcess]] = {}
        for p in self._processes.list_processes(process.tenant_id, process.session_id):
            children.setdefault(p.parent_process_id, []).append(p)
        found, closed = [], [process.id]
        while closed:
            for child in children.get(closed.pop(), []):
                if child.status is ProcessStatus.CLOSED:
                    closed.append(child.id)
                else:
                    found.append(child.id)
        return found

    def _suspend_if_session_is(self, process: ThinkProcess) -> None:
        """A pause the session's suspend cascade found pending (and left to run, so the
        user's pause is not lost) is followed by the suspend it skipped."""
        session = self._processes.get_session(process.tenant_id, process.session_id)
        if session.status is not SessionStatus.SUSPENDED:
            return
        try:
            self._lanes.request_control(process.tenant_id, process.id,
                                        LifecycleCall.SUSPEND.value,
                                        lifecycle.SYSTEM_ALLOWED_FROM[LifecycleCall.SUSPEND])
        except Conflict:
            return  # moved on meanwhile (stopped, or resumed by the user)
        self._waker.wake(process.tenant_id, process.id)

    def _call_engine(self, engine: ThinkEngine | None, process: ThinkProcess,
                     context: ThinkEngineContext, plan: TurnPlan
                     ) -> tuple[ProcessStatus, CloseReason | None]:
        """Run the start, steer or lifecycle call (``lifecycle.decide_call`` says what a call
        does); returns the status and close reason to commit."""
        if engine is None or engine.major_version() != int(process.engine_version.split(".")[0]):
            # think-engines §3: a missing engine or a major-version change makes the process stale.
            found = f"version {engine.version}" if engine else "no such engine"
            context.chat().append(ChatRole.ERROR, f"Engine {process.engine} "
                                  f"{process.engine_version} is gone ({found}); process is stale.")
            return ProcessStatus.CLOSED, CloseReason.STALE
        call = plan.call
        if call is None:
            (engine.start if plan.starts else engine.steer)(process, context)
            return context.turn.status or ProcessStatus.IDLE, context.turn.close_reason
        decision = lifecycle.decide_call(
            call, process.status, process.close_reason, given_up=plan.given_up,
            resumed_to=self._resumed_status(process) if call is LifecycleCall.RESUME else None)
        if decision.effect is CallEffect.DROPPED:
            # Legal when requested, overtaken since (e.g. stopped meanwhile): drop it.
            log.info("dropping %s of %s: %s", call.value, process.id,
                     lifecycle.refusal(call, process.status, by_system=True))
        elif decision.effect is CallEffect.RESET:
            context.chat().append(ChatRole.SYSTEM, "The process was reset; it starts afresh.",
                                  meta={RESET_MARK: True})
            context.save_state({})
        elif decision.effect is CallEffect.ENGINE:
            getattr(engine, call.value)(process, context)
        if decision.status is None:  # the engine's resume says
            return context.turn.status or ProcessStatus.IDLE, context.turn.close_reason
        return decision.status, decision.close_reason
