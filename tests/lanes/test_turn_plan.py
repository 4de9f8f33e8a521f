"""The process state machine as tables (``vancetope_brain/models/lifecycle.py``, STYLE.md 18):
what a lane turn does for every (status, pending lifecycle call, pending messages), at each
count of turns begun and never committed, and what each status means to the lane, the
sweeper, a parent and the session cascades. No store, no Redis: the rules are pure.
"""

from __future__ import annotations

import itertools

import pytest

from vancetope_brain.models import CloseReason, InboxMessage, UserChatInput
from vancetope_brain.models import ProcessStatus as S
from vancetope_brain.models import lifecycle as L
from vancetope_brain.models.lifecycle import (
    CallDecision,
    CallEffect,
    LifecycleCall,
    NoTurn,
    TurnMode,
    TurnPlan,
    TurnState,
)
from vancetope_brain.models.steer import ProcessEventType

MAX = 3
ATTEMPTS = (0, 1, MAX)
"""``turnAttempts``: a first try, a retry after a turn that died, one begun ``MAX`` times."""

# The rows' states: a status, its close reason, and whether no turn committed since the
# process's creation or reset (a RUNNING lane whose turn died in its start).
STATES = {
    "INIT": (S.INIT, None, False),
    "RUNNING": (S.RUNNING, None, False),          # a steer's turn died
    "RUNNING@start": (S.RUNNING, None, True),     # a start's turn died
    "IDLE": (S.IDLE, None, False),
    "BLOCKED": (S.BLOCKED, None, False),
    "PAUSED": (S.PAUSED, None, False),
    "SUSPENDED": (S.SUSPENDED, None, False),
    "CLOSED": (S.CLOSED, CloseReason.STOPPED, False),
    "FAILED": (S.CLOSED, CloseReason.FAILED, False),
}
CONTROLS = {"-": None, **{c.value: c for c in LifecycleCall}}


def _messages(first_attempts: int | None) -> list[InboxMessage]:
    if first_attempts is None:
        return []
    return [InboxMessage(id=f"m{i}", tenant_id="t", target_process_id="p", seq=i,
                         attempts=first_attempts if i == 1 else 0,
                         message=UserChatInput(from_user="u", content=f"line {i}"))
            for i in (1, 2)]


MESSAGES = {"none": None, "new": 0, "retried": 1, "poison": MAX}
"""The pending messages: none, two new ones, two whose first was in a turn that died, two
whose first reached ``MAX`` attempts."""

# Plan cells: the turn for turnAttempts 0/1/MAX (one token: the same for all three).
#   held, nothing          no turn (``NoTurn``)
#   start, restart, steer  the engine's start (from INIT again), steer
#   call                   the row's lifecycle call
#   answer, dead          no engine: answer every message / dead-letter the first
#   suffix * / 1           the context gets every pending message / only the first
#   suffix !               given up: a start closes FAILED, a call skips its engine step
# A call row's last columns: may a client request it; what the lane does with it
# (``decide_call``: effect>status[/reason], ? = what the engine's resume says), and the
# same once given up.
TABLE = """
state          call     none             new              retried          poison           client  does                   given-up
INIT           -        start/start/start!  start/start/start!  start/start/start!  start/start/start!  -  -  -
INIT           pause    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>INIT              drop>INIT
INIT           resume   call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>INIT              drop>INIT
INIT           suspend  call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      status>SUSPENDED       status>SUSPENDED
INIT           stop     call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      status>CLOSED/STOPPED  status>CLOSED/STOPPED
INIT           reset    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>INIT              drop>INIT
RUNNING        -        steer*           steer*           steer1           dead1             -       -                      -
RUNNING        pause    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>PAUSED          status>PAUSED
RUNNING        resume   call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>IDLE              drop>IDLE
RUNNING        suspend  call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>SUSPENDED       status>SUSPENDED
RUNNING        stop     call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>CLOSED/STOPPED  status>CLOSED/STOPPED
RUNNING        reset    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     reset>INIT             reset>INIT
RUNNING@start  -        restart/restart/restart!  restart/restart/restart!  restart/restart/restart!  restart/restart/restart!  -  -  -
RUNNING@start  pause    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>PAUSED          status>PAUSED
RUNNING@start  resume   call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>IDLE              drop>IDLE
RUNNING@start  suspend  call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>SUSPENDED       status>SUSPENDED
RUNNING@start  stop     call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>CLOSED/STOPPED  status>CLOSED/STOPPED
RUNNING@start  reset    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     reset>INIT             reset>INIT
IDLE           -        nothing          steer*           steer1           dead1             -       -                      -
IDLE           pause    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>PAUSED          status>PAUSED
IDLE           resume   call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>IDLE              drop>IDLE
IDLE           suspend  call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>SUSPENDED       status>SUSPENDED
IDLE           stop     call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>CLOSED/STOPPED  status>CLOSED/STOPPED
IDLE           reset    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     reset>INIT             reset>INIT
BLOCKED        -        nothing          steer*           steer1           dead1             -       -                      -
BLOCKED        pause    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>PAUSED          status>PAUSED
BLOCKED        resume   call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>BLOCKED           drop>BLOCKED
BLOCKED        suspend  call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>SUSPENDED       status>SUSPENDED
BLOCKED        stop     call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>CLOSED/STOPPED  status>CLOSED/STOPPED
BLOCKED        reset    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     reset>INIT             reset>INIT
PAUSED         -        held             held             held             held             -       -                      -
PAUSED         pause    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>PAUSED            drop>PAUSED
PAUSED         resume   call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>?               status>SUSPENDED
PAUSED         suspend  call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>SUSPENDED       status>SUSPENDED
PAUSED         stop     call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>CLOSED/STOPPED  status>CLOSED/STOPPED
PAUSED         reset    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     reset>INIT             reset>INIT
SUSPENDED      -        held             held             held             held             -       -                      -
SUSPENDED      pause    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>SUSPENDED         drop>SUSPENDED
SUSPENDED      resume   call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>?               status>SUSPENDED
SUSPENDED      suspend  call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  no      drop>SUSPENDED         drop>SUSPENDED
SUSPENDED      stop     call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     engine>CLOSED/STOPPED  status>CLOSED/STOPPED
SUSPENDED      reset    call/call/call!  call*/call/call! call1/call/call! dead1/call/call!  yes     reset>INIT             reset>INIT
CLOSED         -        held             held             held             held             -       -                      -
CLOSED         pause    held             held             held             held             no      drop>CLOSED/STOPPED    drop>CLOSED/STOPPED
CLOSED         resume   held             held             held             held             no      drop>CLOSED/STOPPED    drop>CLOSED/STOPPED
CLOSED         suspend  held             held             held             held             no      drop>CLOSED/STOPPED    drop>CLOSED/STOPPED
CLOSED         stop     held             held             held             held             no      drop>CLOSED/STOPPED    drop>CLOSED/STOPPED
CLOSED         reset    held             held             held             held             no      drop>CLOSED/STOPPED    drop>CLOSED/STOPPED
FAILED         -        held             answer*          answer*          answer*          -       -                      -
FAILED         pause    held             answer*          answer*          answer*          no      drop>CLOSED/FAILED     drop>CLOSED/FAILED
FAILED         resume   held             answer*          answer*          answer*          no      drop>CLOSED/FAILED     drop>CLOSED/FAILED
FAILED         suspend  held             answer*          answer*          answer*          no      drop>CLOSED/FAILED     drop>CLOSED/FAILED
FAILED         stop     held             answer*          answer*          answer*          no      drop>CLOSED/FAILED     drop>CLOSED/FAILED
FAILED         reset    held             answer*          answer*          answer*          no      drop>CLOSED/FAILED     drop>CLOSED/FAILED
"""

_MODES = {"start": TurnMode.START, "restart": TurnMode.RESTART, "steer": TurnMode.STEER,
          "call": TurnMode.CALL, "answer": TurnMode.ANSWER, "dead": TurnMode.DEAD_LETTER}
_EFFECTS = {"drop": CallEffect.DROPPED, "status": CallEffect.STATUS_ONLY,
            "reset": CallEffect.RESET, "engine": CallEffect.ENGINE}


def _rows() -> list[list[str]]:
    lines = [line.split() for line in TABLE.strip().splitlines()]
    assert lines[0] == ["state", "call", *MESSAGES, "client", "does", "given-up"]
    return lines[1:]


def _expected_plan(token: str, state: TurnState,
                   pending: list[InboxMessage]) -> TurnPlan | NoTurn:
    if token in ("held", "nothing"):
        return NoTurn(token)
    given_up = token.endswith("!")
    token = token.rstrip("!")
    reads = pending if token.endswith("*") else pending[:1] if token.endswith("1") else []
    mode = _MODES[token.rstrip("*1")]
    return TurnPlan(mode, pending, reads, state.control if mode is TurnMode.CALL else None,
                    given_up)


def _expected_call(token: str) -> CallDecision:
    effect, _, outcome = token.partition(">")
    status, _, reason = outcome.partition("/")
    return CallDecision(_EFFECTS[effect], None if status == "?" else S(status),
                        CloseReason(reason) if reason else None)


def test_the_turn_plan_table_covers_every_status_call_and_pending_messages():
    """One row per (state, pending call) — every status, and both ways a RUNNING lane's turn
    died —, one column per kind of pending messages, each cell at every ``turnAttempts``;
    a call row also says whether a client may request the call and what the lane does
    with it. A plan settled on the state it was made from is unchanged."""
    rows = _rows()
    assert sorted((r[0], r[1]) for r in rows) == sorted(itertools.product(STATES, CONTROLS))
    assert {status for status, _, _ in STATES.values()} == set(S)
    wrong = []
    for state_name, control_name, *cells in rows:
        status, reason, unstarted = STATES[state_name]
        control = CONTROLS[control_name]
        for kind, cell in zip(MESSAGES, cells[:len(MESSAGES)], strict=True):
            tokens = cell.split("/")
            tokens = tokens * len(ATTEMPTS) if len(tokens) == 1 else tokens
            assert len(tokens) == len(ATTEMPTS), (state_name, control_name, kind, cell)
            pending = _messages(MESSAGES[kind])
            for attempts, token in zip(ATTEMPTS, tokens, strict=True):
                state = TurnState(status, reason, control, attempts, unstarted)
                plan = L.plan_turn(state, pending, max_attempts=MAX)
                where = f"{state_name} {control_name} {kind} turnAttempts={attempts}"
                if plan != _expected_plan(token, state, pending):
                    wrong.append(f"{where}: expected {token}, got {plan!r}")
                elif isinstance(plan, TurnPlan) and \
                        L.settle(plan, state, max_attempts=MAX) != plan:
                    wrong.append(f"{where}: settling changed the plan")
        client, does, given_up = cells[len(MESSAGES):]
        if control is None:
            assert (client, does, given_up) == ("-", "-", "-"), (state_name, control_name)
            continue
        if (L.refusal(control, status) is None) != (client == "yes"):
            wrong.append(f"{state_name} {control_name}: client may request it: {client}?")
        for token, up in ((does, False), (given_up, True)):
            decided = L.decide_call(control, status, reason, given_up=up)
            if decided != _expected_call(token):
                wrong.append(f"{state_name} {control_name} (given up: {up}): "
                             f"expected {token}, got {decided!r}")
    assert wrong == []


@pytest.mark.parametrize("status", [S.PAUSED, S.SUSPENDED])
@pytest.mark.parametrize("back", [S.INIT, S.PAUSED])
def test_a_resume_goes_back_where_the_turn_records_say_without_the_engine(status, back):
    """``resumed_to`` (read from the turn records by the runner): a process that never
    started starts, one whose suspend found it PAUSED is PAUSED again — given up or not."""
    for given_up in (False, True):
        assert L.decide_call(LifecycleCall.RESUME, status, given_up=given_up,
                             resumed_to=back) == CallDecision(CallEffect.STATUS_ONLY, back)


def test_a_call_requested_after_the_plan_runs_instead_of_the_start_or_steer():
    """The epoch may find a lifecycle call the plan did not see: it runs, with the messages
    the plan counted; a turn without an engine stays what it was."""
    pending = _messages(0)
    for status, planned in ((S.INIT, TurnMode.START), (S.IDLE, TurnMode.STEER)):
        plan = L.plan_turn(TurnState(status), pending, max_attempts=MAX)
        assert isinstance(plan, TurnPlan) and plan.mode is planned
        settled = L.settle(plan, TurnState(status, control=LifecycleCall.STOP),
                           max_attempts=MAX)
        assert (settled.mode, settled.call, settled.lifecycle, settled.counted) == \
            (TurnMode.CALL, LifecycleCall.STOP, "stop", plan.counted)
    dead = L.plan_turn(TurnState(S.IDLE), _messages(MAX), max_attempts=MAX)
    assert isinstance(dead, TurnPlan) and dead.counted == []
    assert L.settle(dead, TurnState(S.IDLE, control=LifecycleCall.STOP),
                    max_attempts=MAX) == dead


# What each status means. Columns: a sender wakes it; a pending message gets a turn (it is
# steered, or answered); acquire_epoch marks it RUNNING; the sweeper wakes it without a
# message; the event its parent gets; skipped by the session's suspend / close cascade;
# the call a session's resume requests to undo its suspend; a failed steer leaves it; a
# turn ending so becomes BLOCKED while the process's question waits in the user's Inbox.
STATUS_TABLE = """
status           wakes  turn  marked  unsettled  parent    suspend-skips  close-skips  undo    fallback   blocks
INIT             yes    yes   yes     yes        -         no             no           resume  INIT       no
RUNNING          yes    yes   no      yes        -         no             no           resume  IDLE       no
IDLE             yes    yes   yes     no         -         no             no           resume  IDLE       yes
BLOCKED          yes    yes   yes     no         blocked   no             no           resume  BLOCKED    no
PAUSED           no     no    no      no         -         no             no           pause   PAUSED     no
SUSPENDED        no     no    no      no         -         yes            no           resume  SUSPENDED  no
CLOSED/DONE      no     no    no      no         done      yes            yes          -       CLOSED     yes
CLOSED/STOPPED   no     no    no      no         stopped   yes            yes          -       CLOSED     no
CLOSED/STALE     no     no    no      no         failed    yes            yes          -       CLOSED     no
CLOSED/FAILED    no     yes   no      no         failed    yes            yes          -       CLOSED     no
"""


def test_what_each_status_means_to_the_lane_the_sweeper_a_parent_and_a_session():
    rows = [line.split() for line in STATUS_TABLE.strip().splitlines()][1:]
    seen = set()
    wrong = []
    for name, wakes, turn, marked, unsettled, parent, suspend_skips, close_skips, undo, \
            fallback, blocks in rows:
        status_name, _, reason_name = name.partition("/")
        status, reason = S(status_name), CloseReason(reason_name) if reason_name else None
        seen.add((status, reason))
        undoes = {call.value for call, allowed in L.UNDO_SUSPEND_FROM.items()
                  if status in allowed}
        got = {
            "wakes": status in L.WAKES_ON_MESSAGE,
            "turn": L.takes_messages(status, reason),
            "marked": status in L.MARKED_RUNNING,
            "unsettled": status in L.UNSETTLED,
            "parent": L.parent_event(status, reason),
            "suspend-skips": status in L.CASCADE_SKIPS[LifecycleCall.SUSPEND],
            "close-skips": status in L.CASCADE_SKIPS[LifecycleCall.STOP],
            "undo": undoes,
            "fallback": L.fallback_status(None, status),
            "blocks": L.awaits_answer(status, reason),
        }
        expected = {
            "wakes": wakes == "yes", "turn": turn == "yes", "marked": marked == "yes",
            "unsettled": unsettled == "yes",
            "parent": None if parent == "-" else ProcessEventType(parent),
            "suspend-skips": suspend_skips == "yes", "close-skips": close_skips == "yes",
            "undo": set() if undo == "-" else {undo}, "fallback": S(fallback),
            "blocks": blocks == "yes",
        }
        wrong += [f"{name} {key}: expected {expected[key]}, got {got[key]}"
                  for key in got if got[key] != expected[key]]
    assert seen == {(s, None) for s in S if s is not S.CLOSED} | \
        {(S.CLOSED, r) for r in CloseReason}
    # A pause or suspend that could not run its engine step still takes effect.
    assert L.fallback_status(LifecycleCall.PAUSE, S.RUNNING) is S.PAUSED
    assert L.fallback_status(LifecycleCall.SUSPEND, S.IDLE) is S.SUSPENDED
    assert wrong == []
