"""The process state machine, without I/O (think-engines.txt §3, §5-§7; ARCHITECTURE §3):
every rule of what a process may do in which status, and what a lane turn does next.

Rule: this module imports nothing but ``vancetope_brain.models`` and reads or writes
nothing; the runner (``lanes/runner.py``), the session service and lifecycle
(``sessions/``) and the lane store adapters read their status rules from here, and
``tests/lanes/test_turn_plan.py`` holds the whole table.

``start`` runs only in INIT and only by the runtime; every other call is refused in
INIT (§5: "only engine.start() is allowed in INIT status; all other lifecycle calls
in INIT → 409"). Messages are not lifecycle calls: they may be *queued* in INIT,
PAUSED and SUSPENDED (they wait; an INIT process gets them in its first ``steer``
after ``start``); only CLOSED refuses them. The control calls below are requested by
clients or the system and executed on the process's lane. ``reset`` discards the
engine state and starts the process afresh (its chat stays, as the record).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from vancetope_brain.models.process import CloseReason, ThinkProcess
from vancetope_brain.models.process import ProcessStatus as S
from vancetope_brain.models.steer import InboxMessage, ProcessEventType


class LifecycleCall(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    SUSPEND = "suspend"
    STOP = "stop"
    RESET = "reset"


# ── which call is legal where, and where it leads ───────────────────────
_STARTED_OPEN = frozenset({S.IDLE, S.BLOCKED, S.RUNNING, S.PAUSED, S.SUSPENDED})

ALLOWED_FROM: dict[LifecycleCall, frozenset[S]] = {
    LifecycleCall.PAUSE: frozenset({S.IDLE, S.BLOCKED, S.RUNNING}),
    LifecycleCall.RESUME: frozenset({S.PAUSED, S.SUSPENDED}),
    LifecycleCall.SUSPEND: frozenset({S.IDLE, S.BLOCKED, S.RUNNING, S.PAUSED}),
    LifecycleCall.STOP: _STARTED_OPEN,
    LifecycleCall.RESET: _STARTED_OPEN,
}
"""What a client (or an engine's tool) may request."""

SYSTEM_ALLOWED_FROM: dict[LifecycleCall, frozenset[S]] = {
    **ALLOWED_FROM,
    LifecycleCall.SUSPEND: ALLOWED_FROM[LifecycleCall.SUSPEND] | {S.INIT},
    LifecycleCall.STOP: ALLOWED_FROM[LifecycleCall.STOP] | {S.INIT},
}
"""What the system's own cascades may request: a session's suspend and close (§5, §6)
and a stopped process's subtree reach processes that have not started too. On the lane
these change an INIT process's status without calling its engine (SUSPENDED, to start
when resumed; CLOSED/STOPPED), since no engine method but ``start`` runs in INIT. The
lane checks a call against this table once more when it runs it (``decide_call``)."""

STATUS_AFTER: dict[LifecycleCall, S] = {
    LifecycleCall.PAUSE: S.PAUSED,
    LifecycleCall.RESUME: S.IDLE,
    LifecycleCall.SUSPEND: S.SUSPENDED,
    LifecycleCall.STOP: S.CLOSED,
    LifecycleCall.RESET: S.INIT,
}
"""The status a call leaves (a resume's engine may say otherwise; a stop closes STOPPED)."""

SETTLES_DRIFT = frozenset({LifecycleCall.RESUME, LifecycleCall.STOP, LifecycleCall.RESET})
"""The user's decisions on a process left SUSPENDED by a working-directory change."""


def allowed_from(call: LifecycleCall, *, by_system: bool = False) -> frozenset[S]:
    """The statuses ``call`` may be requested in, by a client or by the system."""
    return (SYSTEM_ALLOWED_FROM if by_system else ALLOWED_FROM)[call]


def refusal(call: LifecycleCall, status: S, *, by_system: bool = False) -> str | None:
    """Why ``call`` is illegal in ``status`` (naming the legal statuses), or None."""
    legal = allowed_from(call, by_system=by_system)
    if status in legal:
        return None
    why = " (it has not started yet: only start runs in INIT)" if status is S.INIT else ""
    return (f"cannot {call.value} a process that is {status.value}{why} "
            f"(allowed from {', '.join(sorted(s.value for s in legal))})")


# ── what statuses mean to the lane, the sweeper and a parent ────────────
WAKES_ON_MESSAGE = frozenset({S.INIT, S.RUNNING, S.IDLE, S.BLOCKED})
"""The statuses in which a new pending message starts a turn (think-engines §5 table)."""

HOLDS_MESSAGES = frozenset(S) - WAKES_ON_MESSAGE
"""PAUSED, SUSPENDED, CLOSED: a message waits without a wake, and the sweeper passes it
over (but a process closed ``ANSWERS_WHEN_CLOSED`` answers it)."""

ANSWERS_WHEN_CLOSED = CloseReason.FAILED
"""A process CLOSED for this reason still answers each message that reaches it (turn
``answer``), so no sender waits for a reply that will not come."""

MARKED_RUNNING = frozenset({S.INIT, S.IDLE, S.BLOCKED})
"""The statuses ``LaneStore.acquire_epoch`` moves to RUNNING for the turn (PAUSED and
SUSPENDED stay as they are while their lifecycle call runs)."""

UNSETTLED = frozenset({S.INIT, S.RUNNING})
"""The statuses the sweeper wakes without a message: a start whose wake was lost, a turn
that died. No engine may end a turn in one."""

REPORTED = frozenset({S.BLOCKED, S.CLOSED})
"""The statuses of its children a parent hears about (think-engines §7a)."""

CLOSE_EVENT: dict[CloseReason, ProcessEventType] = {
    CloseReason.DONE: ProcessEventType.DONE,
    CloseReason.STOPPED: ProcessEventType.STOPPED,
    CloseReason.FAILED: ProcessEventType.FAILED,
    CloseReason.STALE: ProcessEventType.FAILED,
}
"""The ProcessEvent a parent gets for each close reason of its child."""

CASCADE_SKIPS: dict[LifecycleCall, frozenset[S]] = {
    LifecycleCall.SUSPEND: frozenset({S.SUSPENDED, S.CLOSED}),
    LifecycleCall.STOP: frozenset({S.CLOSED}),
}
"""The processes a session's suspend and close cascades pass over."""

UNDO_SUSPEND_FROM: dict[LifecycleCall, frozenset[S]] = {
    LifecycleCall.RESUME: frozenset({S.SUSPENDED, S.IDLE, S.BLOCKED, S.RUNNING, S.INIT}),
    LifecycleCall.PAUSE: frozenset({S.PAUSED}),
}
"""Where a session's resume requests the call that undoes a process's suspend: a resume
(the lane drops one whose suspend never ran: the suspend is undone), or, on a PAUSED
process, a pause the lane drops (it is PAUSED already)."""


def takes_messages(status: S, close_reason: CloseReason | None) -> bool:
    """Whether a pending message gets a turn: it wakes the process, or is answered."""
    return status in WAKES_ON_MESSAGE or status is S.CLOSED and \
        close_reason is ANSWERS_WHEN_CLOSED


def parent_event(status: S, close_reason: CloseReason | None) -> ProcessEventType | None:
    """The ProcessEvent a parent gets when its child commits ``status``, or None."""
    if status not in REPORTED:
        return None
    if status is S.BLOCKED:
        return ProcessEventType.BLOCKED
    return CLOSE_EVENT[close_reason] if close_reason else ProcessEventType.FAILED


def fallback_status(call: LifecycleCall | None, before: S) -> S:
    """Where a turn that could not do its work leaves a process it does not close: a steer,
    a dead letter's turn or a resume back where it was (IDLE after a turn that died); a
    pause or suspend still takes effect (the engine's step is advisory, the caller's
    intent is not)."""
    if call is LifecycleCall.PAUSE or call is LifecycleCall.SUSPEND:
        return STATUS_AFTER[call]
    return S.IDLE if before is S.RUNNING else before


def awaits_answer(status: S, close_reason: CloseReason | None) -> bool:
    """Whether a turn ending so becomes BLOCKED when a question the process put into the
    user's Inbox is still pending (user-interaction §10): it ended IDLE or DONE."""
    return status is S.IDLE or close_reason is CloseReason.DONE


# ── the lane turn's plan ────────────────────────────────────────────────
class TurnMode(StrEnum):
    """What a lane turn does; the value is what its ``TurnRecord.lifecycle`` says, but for
    a call (the call's name) and a restart (``start``)."""

    START = "start"              # the engine's start, reading no message
    STEER = "steer"              # the engine's steer with the batch
    CALL = "call"                # the pending lifecycle call (``decide_call``)
    ANSWER = "answer"            # no engine: a CLOSED/FAILED process answers its messages
    DEAD_LETTER = "dead-letter"  # no engine: the first pending message is set aside
    RESTART = "restart"          # a start whose turn died runs again, from INIT


class NoTurn(StrEnum):
    """Why a lane has no turn to run now."""

    HELD = "held"        # PAUSED / SUSPENDED / CLOSED: messages wait
    NOTHING = "nothing"  # no pending message and nothing to start


@dataclass(frozen=True)
class TurnState:
    """What the plan of a turn reads of the process: its status (and close reason), its
    pending lifecycle call, the turns begun since its last commit (``turnAttempts``), and
    whether no turn committed since its creation or last reset (so a RUNNING one died in
    its start)."""

    status: S
    close_reason: CloseReason | None = None
    control: LifecycleCall | None = None
    turn_attempts: int = 0
    unstarted: bool = False

    @classmethod
    def of(cls, process: ThinkProcess, *, unstarted: bool = False) -> TurnState:
        return cls(status=process.status, close_reason=process.close_reason,
                   control=LifecycleCall(process.pending_control) if process.pending_control
                   else None, turn_attempts=process.turn_attempts, unstarted=unstarted)


@dataclass(frozen=True)
class TurnPlan:
    """A turn decided before it takes the epoch: its mode, the lifecycle call it runs, the
    pending messages it found, the ones its context gets (``batch``), and whether a start
    or call begun that often is given up (applied without its engine step)."""

    mode: TurnMode
    pending: list[InboxMessage] = field(default_factory=list)
    batch: list[InboxMessage] = field(default_factory=list)
    call: LifecycleCall | None = None
    given_up: bool = False

    @property
    def lifecycle(self) -> str:
        """The turn's name in its record and metrics."""
        if self.call is not None:
            return self.call.value
        return TurnMode.START.value if self.mode is TurnMode.RESTART else self.mode.value

    @property
    def runs_engine(self) -> bool:
        """Whether the engine may run (the epoch counts the attempt of each ``batch``
        message only then)."""
        return self.mode not in (TurnMode.ANSWER, TurnMode.DEAD_LETTER)

    @property
    def starts(self) -> bool:
        return self.mode in (TurnMode.START, TurnMode.RESTART)

    @property
    def read(self) -> list[InboxMessage]:
        """The messages the turn's context gets: none for a start (think-engines §5: the
        messages queued meanwhile are for the first steer after it, which follows at once)."""
        return [] if self.starts else self.batch

    @property
    def counted(self) -> list[str]:
        """The ids of the messages whose attempt the epoch counts."""
        return [m.id for m in self.batch] if self.runs_engine else []


def holds(state: TurnState) -> bool:
    """Whether the lane runs no turn whatever is pending (``NoTurn.HELD``): a CLOSED process
    (but one that answers what reaches it), a PAUSED or SUSPENDED one without a call."""
    if state.status is S.CLOSED:
        return state.close_reason is not ANSWERS_WHEN_CLOSED
    return state.control is None and state.status not in WAKES_ON_MESSAGE


def plan_turn(state: TurnState, pending: Sequence[InboxMessage], *,
              max_attempts: int) -> TurnPlan | NoTurn:
    """The next turn of a process in ``state`` with ``pending`` messages (``seq`` order).

    A message with attempts was in a turn that never committed: it is read alone, and
    dead-lettered once it reached ``max_attempts``. A lifecycle call whose last turn died
    runs without messages. A RUNNING process's last turn died (the runner holds its lane):
    it runs again regardless, a start from INIT if it died in its start.
    """
    if holds(state):
        return NoTurn.HELD
    pending = list(pending)
    if state.status is S.CLOSED:
        return TurnPlan(TurnMode.ANSWER, pending, pending) if pending else NoTurn.HELD
    died = state.status is S.RUNNING
    if state.control is None and state.status is not S.INIT and not pending and not died:
        return NoTurn.NOTHING
    if state.control is not None and state.turn_attempts:
        return _settled(TurnPlan(TurnMode.CALL, pending), state, max_attempts)
    if state.control is None and (state.status is S.INIT or died and state.unstarted):
        mode = TurnMode.RESTART if died else TurnMode.START
        return _settled(TurnPlan(mode, pending), state, max_attempts)
    # A message that kills its worker is so found out alone, and each message that shared
    # its first turn costs one extra, isolated attempt.
    batch = pending[:1] if pending and pending[0].attempts else pending
    if batch and batch[0].attempts >= max_attempts:
        return TurnPlan(TurnMode.DEAD_LETTER, pending, batch)
    return _settled(TurnPlan(TurnMode.STEER, pending, batch), state, max_attempts)


def settle(plan: TurnPlan, state: TurnState, *, max_attempts: int) -> TurnPlan:
    """The plan as the epoch found the process (``acquire_epoch`` returns it as it was
    before the turn marked it): a lifecycle call requested since the plan runs instead of
    the engine's start or steer. On the state it was planned from, a plan is unchanged."""
    if not plan.runs_engine:
        return plan
    return _settled(plan, state, max_attempts)


def _settled(plan: TurnPlan, state: TurnState, max_attempts: int) -> TurnPlan:
    if state.control is not None:
        mode = TurnMode.CALL
    elif plan.mode is TurnMode.RESTART:
        mode = TurnMode.RESTART
    else:
        mode = TurnMode.START if state.status is S.INIT else TurnMode.STEER
    call = state.control if mode is TurnMode.CALL else None
    # Begun that often, never committed: it kills its worker. Give it up.
    given_up = mode in (TurnMode.CALL, TurnMode.START, TurnMode.RESTART) and \
        state.turn_attempts >= max_attempts
    return replace(plan, mode=mode, call=call, given_up=given_up)


# ── what a lifecycle call does on the lane ──────────────────────────────
class CallEffect(StrEnum):
    DROPPED = "dropped"          # overtaken since requested (e.g. stopped meanwhile)
    STATUS_ONLY = "status-only"  # the status changes without an engine step
    RESET = "reset"              # the engine state is discarded; the process starts afresh
    ENGINE = "engine"            # the engine's lifecycle method runs


@dataclass(frozen=True)
class CallDecision:
    """What a lifecycle call's turn does, and the status and close reason it commits
    (``status`` None: what the engine's resume sets, IDLE if nothing)."""

    effect: CallEffect
    status: S | None
    close_reason: CloseReason | None = None


def decide_call(call: LifecycleCall, before: S, close_reason: CloseReason | None = None, *,
                given_up: bool = False, resumed_to: S | None = None) -> CallDecision:
    """What ``call`` does on a lane that found the process ``before`` (with
    ``close_reason``). ``given_up``: begun too often, the call is applied without its
    engine step (a resume, which needs it, leaves the process SUSPENDED). ``resumed_to``:
    where a resume returns the process without its engine (INIT if it never started, PAUSED
    if the suspend found it PAUSED), if anywhere."""
    if before not in SYSTEM_ALLOWED_FROM[call]:
        return CallDecision(CallEffect.DROPPED, fallback_status(None, before), close_reason)
    closes = CloseReason.STOPPED if call is LifecycleCall.STOP else None
    if before is S.INIT:  # the system's stop or suspend: no engine method but start runs
        return CallDecision(CallEffect.STATUS_ONLY, STATUS_AFTER[call], closes)
    if call is LifecycleCall.RESET:
        return CallDecision(CallEffect.RESET, S.INIT)
    if call is LifecycleCall.RESUME and resumed_to is not None:
        return CallDecision(CallEffect.STATUS_ONLY, resumed_to)
    if given_up:
        return CallDecision(CallEffect.STATUS_ONLY, S.SUSPENDED if call is LifecycleCall.RESUME
                            else STATUS_AFTER[call], closes)
    return CallDecision(CallEffect.ENGINE, None if call is LifecycleCall.RESUME
                        else STATUS_AFTER[call], closes)
