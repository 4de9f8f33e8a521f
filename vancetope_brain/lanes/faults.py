"""What a lane turn writes when it cannot simply run its engine (ARCHITECTURE §3, failures):
dead letters, a start or lifecycle call that never completes, a turn whose engine raised.
The turn's plan decides when (``models/lifecycle.py``); this module says what each outcome
leaves behind.

Every outcome here is committed by the turn's one fenced commit, except the user's Inbox
item, which is written just before it (as ``context.inbox()`` always does, so the user is
told at least once) under an idempotency key of the case, the process and the turn's
epoch: one item per turn; a turn that dies or is fenced between the item and its commit
leaves its item, and the turn that takes over posts its own.
"""

from __future__ import annotations

import logging

from vancetope_brain.engines.context import (
    INTERRUPTED,
    INTERRUPTED_CALLS,
    ThinkEngineContext,
    excerpt,
)
from vancetope_brain.errors import QuotaExceeded, UserError
from vancetope_brain.lanes.quota import QUOTA_TIMER, Overrun
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    DeadLetter,
    InboxMessage,
    ProcessEvent,
    ProcessStatus,
    Timer,
    UserChatInput,
    new_id,
)
from vancetope_brain.models.inbox import ItemType, NewItem
from vancetope_brain.models.lifecycle import LifecycleCall, fallback_status
from vancetope_brain.models.steer import ProcessEventType

log = logging.getLogger(__name__)

DIED = "the worker running it died or froze each time"
"""Why a turn never completed, as far as anyone can tell: a turn that dies leaves no other
trace."""


def dead_letter(context: ThinkEngineContext, message: InboxMessage) -> None:
    """Set ``message`` aside unprocessed in this turn: drained with its mark, an error line
    naming it, a ProcessEvent (``dead-letter``) to the parent if there is one, and an Inbox
    item telling the process's user."""
    process = context.process
    mark = DeadLetter(reason=f"its turn never completed: {DIED}", attempts=message.attempts)
    context.turn.dead_letters[message.id] = mark
    notice = (f"{_what(message)} could not be processed after {mark.attempts} attempts; it was set "
              f"aside (dead letter {message.id}).")
    context.chat().append(ChatRole.ERROR, notice, meta={"deadLetter": message.id})
    if process.parent_process_id is not None:
        context.turn.outbox.append(InboxMessage(
            id=new_id("msg"), tenant_id=process.tenant_id,
            target_process_id=process.parent_process_id, sender_process_id=process.id,
            idempotency_key=f"{process.id}:{process.epoch}:dead-letter",
            message=ProcessEvent(
                source_process_id=process.id, source_name=process.name,
                type=ProcessEventType.DEAD_LETTER,
                human_summary=f"Process {process.name}: {notice}",
                payload={"messageId": message.id, "attempts": mark.attempts,
                         "reason": mark.reason})))
    tell_user(context, f"A message to {process.name} was set aside",
              f"{notice}\n\nWhy: {mark.reason}. An operator can put it back with "
              f"`vancetope admin dead-letter requeue --tenant {process.tenant_id} "
              f"{message.id}`.", "dead-letter")


def stuck(context: ThinkEngineContext, call: LifecycleCall | None, attempts: int,
          status: ProcessStatus) -> str:
    """A ``start`` (``call`` None) or lifecycle call that was begun ``attempts`` times and
    never completed is given up (the runner commits ``status`` without calling the engine):
    an error line and the user's Inbox item say so. Returns the reason (``lastError``)."""
    process = context.process
    what = "start" if call is None else call.value
    reason = f"the {what} was tried {attempts} times and never completed ({DIED})"
    if call is None:
        outcome = "the process could not start and is closed FAILED"
    elif call is LifecycleCall.RESUME and status is ProcessStatus.SUSPENDED:
        outcome = "the process stays SUSPENDED; resume it to try again"
    else:
        outcome = f"the {what} was applied without the engine's {what} step"
    context.chat().append(ChatRole.ERROR, f"{reason[0].upper()}{reason[1:]}; {outcome}.")
    tell_user(context, f"{process.name}: {what} given up",
              f"Process {process.name}: {reason}; {outcome}.", "stuck")
    return reason


def answer(context: ThinkEngineContext, messages: list[InboxMessage], why: str) -> None:
    """Answer each of ``messages`` with an error line (linked to it) saying it was not
    processed and ``why``, and drain it in this turn if it is not yet, so nobody waits for
    a reply that will not come."""
    drained = {m.id for m in context.turn.drained}
    for message in messages:
        context.chat().append(ChatRole.ERROR, f"{_what(message)} was not processed: {why}",
                              source=message)
        if message.id not in drained:
            context.turn.drained.append(message)


def failed_turn(context: ThinkEngineContext, error: str, *, lifecycle: str,
                call: LifecycleCall | None, read: list[InboxMessage],
                pending: list[InboxMessage], max_failures: int
                ) -> tuple[ProcessStatus, CloseReason | None, int]:
    """The engine raised ``error``: the turn fails, not the process — unless it was a start
    (there is no state to go back to), a worker's turn (its parent, which waits for its
    report, is told it FAILED) or the ``max_failures``-th failed turn in a row; a failed
    stop still stops. What the engine decided is dropped (engine state, spawns, messages,
    timers, stops); what it wrote in the chat stays; the messages it drained and those it
    was given to ``read`` (a steer's), and all ``pending`` ones when the process closes
    FAILED, get an error line. Returns the status, close reason and ``engineFailures``."""
    process, turn = context.process, context.turn
    failures = process.engine_failures + 1
    turn.engine_state = None
    for decided in (turn.spawned, turn.outbox, turn.timers, turn.stops):
        decided.clear()
    answered = [*turn.drained, *read]
    status = ProcessStatus.CLOSED
    reason: CloseReason | None = CloseReason.FAILED
    if call is LifecycleCall.STOP:
        reason, why = CloseReason.STOPPED, f"the process was stopped; its engine failed ({error})."
    elif failures >= max_failures:
        why = f"the process failed {failures} turns in a row, last: {error}."
    elif lifecycle == "start" or process.parent_process_id is not None:
        why = f"the process failed ({error})."
    else:
        status, reason = fallback_status(call, process.status), None
        why = f"this turn failed ({error}); the process goes on."
    if reason is CloseReason.FAILED:
        answered += pending
    if answered:
        again = " You can send it again." if reason is None else ""
        answer(context, list({m.id: m for m in answered}.values()), why + again)
    else:
        context.chat().append(ChatRole.ERROR, f"The {lifecycle} turn failed: {why}")
    return status, reason, failures


def interrupted_turn(context: ThinkEngineContext, said: str, *, call: LifecycleCall | None,
                     read: list[InboxMessage]) -> tuple[ProcessStatus, list[InboxMessage]]:
    """The user stopped the turn (``Interrupted``): what the model had said is the
    assistant's line marked ``interrupted``, and the turn ends as if its last model call had
    been its last. What the engine decided is dropped (engine state, spawns, messages,
    timers, stops: a worker engine's state stays the one last committed — a marvin node the
    turn was working on is PENDING again), what it wrote in the chat stays (a tool call
    already made keeps its line, and the interrupted line names it, ``toolCalls``, so the next
    turn's model sees it and does not call it again). The user's messages the
    turn answered (drained, or given to ``read``) are drained; any other message it read
    (a worker's report, an Inbox answer) is put back, so nothing queued is lost and the
    lane's next turn handles it. Returns the status and the messages put back."""
    process, turn = context.process, context.turn
    turn.engine_state = None
    for decided in (turn.spawned, turn.outbox, turn.timers, turn.stops):
        decided.clear()
    answered = list({m.id: m for m in (*turn.drained, *read)}.values())
    users = [m for m in answered if isinstance(m.message, UserChatInput)]
    back = [m for m in answered if not isinstance(m.message, UserChatInput)]
    turn.drained[:] = users
    replied = {line.source_message_id for line in turn.chat if line.role is ChatRole.ASSISTANT}
    source = users[-1] if len(users) == 1 and users[-1].id not in replied else None
    calls = [line.content for line in turn.chat if line.role is ChatRole.TOOL]
    meta: dict[str, object] = {INTERRUPTED: True}
    if calls:
        meta["toolCalls"] = calls[-INTERRUPTED_CALLS:]
    context.chat().append(ChatRole.ASSISTANT, said, source=source, meta=meta)
    return fallback_status(call, process.status), back


def over_quota(context: ThinkEngineContext, overrun: Overrun
               ) -> tuple[ProcessStatus, CloseReason | None, str, int]:
    """The turn would start over a quota: its engine does not run and nothing is drained;
    the process is held PAUSED (``lastError`` ``quota_exceeded: …``) with a chat line
    saying why and until when, a timer that wakes it when the period ends, and one Inbox
    item for its user per quota and period (however many turns are refused). Returns
    what the runner commits."""
    process = context.process
    text = overrun.text()
    context.chat().append(ChatRole.EVENT, text, meta={
        "code": QuotaExceeded.code, "quota": overrun.key, "until": overrun.until.isoformat()})
    context.turn.timers.append(Timer(
        id=f"{process.id}:{QUOTA_TIMER}", tenant_id=process.tenant_id, process_id=process.id,
        key=QUOTA_TIMER, due_at=overrun.until))
    try:
        context.inbox().post(NewItem(
            type=ItemType.OUTPUT_TEXT, title=f"LLM quota used up: {process.name} waits"[:200],
            body=f"{text}\n\n(`{overrun.key}`, code `{QuotaExceeded.code}`.)",
            payload={"format": "markdown"}, tags=("vancetope", "quota"),
            idempotency_key=f"quota:{overrun.key}:{overrun.until:%Y-%m-%d}"))
    except UserError as e:
        log.warning("cannot tell the user of %s about its quota: %s", process.id, e)
    return ProcessStatus.PAUSED, None, overrun.error, process.engine_failures


def tell_user(context: ThinkEngineContext, title: str, body: str, case: str) -> None:
    """An informative Inbox item for the process's user, once per turn and case."""
    process = context.process
    try:
        context.inbox().post(NewItem(
            type=ItemType.OUTPUT_TEXT, title=title[:200], body=body,
            payload={"format": "markdown"}, tags=("vancetope", case),
            idempotency_key=f"{case}:{process.id}:{process.epoch}"))
    except UserError as e:  # no Inbox access here, or the user is gone: the chat still says it
        log.warning("cannot tell the user of %s (%s): %s", process.id, title, e)


def _what(message: InboxMessage) -> str:
    """How a notice names a message: the user's own words, or its kind."""
    if not isinstance(message.message, UserChatInput):
        return f"A {message.message.kind} message"
    return f"Your message \"{excerpt(message.message.content)}\""
