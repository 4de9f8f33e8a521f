"""What LLM-driven engines share: the ``respond`` marker, turning chat lines and steer messages
into model input, the recipe's system prompt, and the tool loop of arthur-engine §3.4.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from vancetope_brain.engines.base import ParentReport, ThinkEngine
from vancetope_brain.engines.context import (
    EXCLUDED,
    INTERRUPTED,
    EventPublisher,
    ThinkEngineContext,
)
from vancetope_brain.errors import LlmError
from vancetope_brain.events import EventType
from vancetope_brain.llm import LlmMessage, ToolCall, ToolSpec
from vancetope_brain.models import (
    ChatMessage,
    ChatRole,
    ExternalCommand,
    InboxAnswer,
    InboxMessage,
    ProcessEvent,
    ThinkProcess,
    ToolResult,
    UserChatInput,
)
from vancetope_brain.models.knowledge import Citation
from vancetope_brain.models.markup import tagged
from vancetope_brain.models.steer import ProcessEventType, SteerMessage, ToolCallStatus

RESPOND = ToolSpec(
    "respond",
    "Finish your turn with your message to the user. Call it alone, after any other tools "
    "have returned. Set awaiting_user_input when you asked the user something and cannot go "
    "on without the answer.",
    {"type": "object",
     "properties": {"message": {"type": "string"},
                    "awaiting_user_input": {"type": "boolean"}},
     # awaiting_user_input defaults to false: a small model that leaves it out of a call
     # written as text (``llm/text_calls.py``) still makes a valid call.
     "required": ["message"]},
    stream="message",
)
RESPOND_ALONE = ("respond must stand alone in its step: the other tools ran, their results are "
                 "above; call respond again on its own")
RESPOND_REQUIRED = ("<vancetope-notice>Plain text does not reach the user: finish your turn "
                    "with the respond tool (message, awaiting_user_input).</vancetope-notice>")
MAX_STEPS = 8
TOOL_RESULT = "toolResult"
"""``meta`` key of the chat line of a ToolResult steer message: the call it answers."""
log = logging.getLogger(__name__)
_ROLES = {ChatRole.USER: "user", ChatRole.ASSISTANT: "assistant", ChatRole.EVENT: "user"}


@dataclass(frozen=True)
class Reply:
    """A turn's answer. ``without_tools``: the model has no tool calling (its profile, or
    its endpoint refused tools), so this is its plain text and nothing was delegated."""

    message: str
    awaiting_user_input: bool
    without_tools: bool = False


def event_text(message: SteerMessage) -> str:
    """A non-user message as the model sees it: an XML-tagged line (§3.4). Every value from
    outside (a worker's summary, a title, a result) goes through ``tagged`` (escaped), so no
    text can close the tag and forge another event."""
    match message:
        case ProcessEvent(source_process_id=src, source_name=name, type=kind,
                          human_summary=summary, payload=data):
            extra = ("\n" + tagged("payload", json.dumps(data)),) if data else ()
            return tagged("process-event", summary or "", *extra, sourceProcessId=src,
                          sourceName=name or None, type=kind.value)
        case ExternalCommand(command=command, params=params):
            return tagged("external-command", json.dumps(params), name=command)
        case InboxAnswer(inbox_item_id=item, item_type=kind, title=title, answer=answer):
            body = "dismissed by the user without an answer" if answer is None \
                else json.dumps(answer.dump())
            return tagged("inbox-answer", body, itemId=item, type=kind.value, title=title)
        case ToolResult(tool_call_id=call, tool_name=name, status=status, result=result,
                        error=error):
            body = json.dumps(result) if status is ToolCallStatus.SUCCESS else str(error)
            return tagged("tool-result", body, toolCallId=call, tool=name, status=status.value)
        case UserChatInput(content=content):
            return content
    raise TypeError(f"unknown steer message {message!r}")


def record(context: ThinkEngineContext, envelope: InboxMessage) -> ChatMessage:
    """The chat line of one inbound message: user input as a user line, anything else as an
    event line; a ToolResult's line remembers its call, so ``conversation`` hands it to the
    model as the tool message answering that call (§3.4)."""
    message = envelope.message
    if isinstance(message, UserChatInput):
        return context.chat().append(ChatRole.USER, message.content, source=envelope)
    meta = {TOOL_RESULT: {"toolCallId": message.tool_call_id, "toolName": message.tool_name}} \
        if isinstance(message, ToolResult) else None
    return context.chat().append(ChatRole.EVENT, event_text(message), source=envelope, meta=meta)


def conversation(lines: list[ChatMessage]) -> list[LlmMessage]:
    """Chat lines the model should see, oldest first (tool and error lines are for people,
    and a line marked ``EXCLUDED`` is one the provider refused). An asynchronous tool result
    becomes the assistant's call plus the tool message answering it, the pair OpenAI-style
    endpoints require."""
    return [message for messages in line_messages(lines) for message in messages]


def line_messages(lines: list[ChatMessage]) -> list[list[LlmMessage]]:
    """The model messages of each line (``conversation``'s, line by line). A committed
    line never changes, so its messages are converted once and kept with it
    (``ChatMessage.derived``: as long as the worker's chat cache holds the line); a line
    of this turn (not numbered yet: it may still be marked ``EXCLUDED``) is converted
    anew."""
    out: list[list[LlmMessage]] = []
    for line in lines:
        if not line.seq:
            out.append(_line_messages(line))
        elif (kept := line.derived.get(_MESSAGES)) is not None:
            out.append(kept)
        else:
            out.append(line.derived.setdefault(_MESSAGES, _line_messages(line)))
    return out


_MESSAGES = "llmMessages"


def _line_messages(line: ChatMessage) -> list[LlmMessage]:
    if line.meta.get(EXCLUDED):
        return []
    answered = line.meta.get(TOOL_RESULT) if line.role is ChatRole.EVENT else None
    if answered:
        call = ToolCall(answered["toolCallId"], answered["toolName"], "{}")
        return [LlmMessage("assistant", "", tool_calls=(call,)),
                LlmMessage("tool", line.content, tool_call_id=call.id)]
    if line.role is ChatRole.ASSISTANT and line.meta.get(INTERRUPTED):
        return [LlmMessage("assistant", interrupted_text(line))]
    if line.role in _ROLES:
        return [LlmMessage(_ROLES[line.role], line.content)]  # type: ignore[arg-type]
    return []


def interrupted_text(line: ChatMessage) -> str:
    """What the model is shown of a reply its user stopped: what it had said, that it was
    stopped there, and the tool calls that turn had already made (done: not to repeat)."""
    note = "[The user stopped this reply here."
    calls = line.meta.get("toolCalls") or []
    if calls:
        note += " Tool calls already made in it (done; do not repeat them unless asked): " + \
            "; ".join(str(call) for call in calls)
    return f"{line.content}\n{note}]" if line.content else note + "]"


def system_prompt(process: ThinkProcess, context: ThinkEngineContext, fallback: str) -> str:
    """The recipe's prompt (rendered per turn) or the engine's one-line fallback, then the
    session context of arthur-engine §3.8."""
    prompt = context.recipes().system_prompt(fallback)
    scope = context.scope
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    return f"{prompt}\n\n" + tagged("session", None, tenant=scope.tenant_id,
                                     user=scope.user_id, process=process.name, date=today)


LAST_REPLY = "lastReply"
"""``engineState`` key of a respond-driven engine's last reply, which its parent hears."""


class RespondingEngine(ThinkEngine):
    """An engine whose turns end with ``respond``: it keeps the last reply in its state and
    its parent hears that reply when the process is done or blocked."""

    @staticmethod
    def keep_reply(context: ThinkEngineContext, reply: Reply, *,
                   sources: list[Citation] | None = None, meta: dict[str, Any] | None = None,
                   **state: Any) -> None:
        """The reply as the chat's line (with the document ``sources`` it used, and ``meta``)
        and the state's ``lastReply`` (with ``state``'s other keys)."""
        context.chat().append(ChatRole.ASSISTANT, reply.message, sources=sources, meta=meta)
        context.save_state({**context.state(), **state, LAST_REPLY: reply.message})

    def summarize_for_parent(self, process: ThinkProcess,
                             event_type: ProcessEventType) -> ParentReport:
        reply = process.engine_state.get(LAST_REPLY)
        if reply and event_type in (ProcessEventType.DONE, ProcessEventType.BLOCKED):
            return ParentReport(reply)
        return super().summarize_for_parent(process, event_type)


class ToolLoop:
    """Model → tools → model … until a ``respond`` that stands alone. ``respond`` is
    mandatory: a plain-text answer is sent back once with ``notice`` (``RESPOND_REQUIRED``
    unless the engine words its own); a later plain answer is taken as the reply (not
    awaiting input), with a logged warning: the *first* plain answer when the later one is
    the model's reaction to the notice ("Understood …", or a refusal), the later one when
    tools ran in between (it speaks of their results). A model that was offered no tools
    (no tool calling) is not sent back: its text is the reply (``Reply.without_tools``).

    Every step streams (text, and respond's ``message`` as it grows); a step whose stream is
    not the reply — sent back, followed by tool calls, or not equal to the respond message —
    is followed by a ``stream-reset`` event, so clients drop it (docs/protocol.md)."""

    def __init__(self, context: ThinkEngineContext, tools: list[ToolSpec], *,
                 notice: str = RESPOND_REQUIRED) -> None:
        self._context = context
        self._tools = tools
        self._notice = notice

    def run(self, messages: list[LlmMessage]) -> Reply | None:
        """The final reply; None when the model failed (an error line is already in the chat)."""
        chat, events = self._context.chat(), self._context.events()
        messages = list(messages)
        reminded = False
        plain: str | None = None  # the plain answer the notice was sent for, until tools run
        streamed: list[str] = []  # this step's tokens

        def on_token(text: str) -> None:
            streamed.append(text)
            events.token(text)

        for _ in range(MAX_STEPS):
            streamed.clear()
            try:
                response = self._context.llm().complete(messages, tools=self._tools,
                                                        on_token=on_token)
            except LlmError as e:
                chat.append(ChatRole.ERROR, f"The model could not answer: {e}")
                return None
            if not response.tool_calls:
                if not response.tools_offered:  # it cannot call respond: its text is the reply
                    return Reply(response.content, False, without_tools=True)
                if not reminded:  # respond is mandatory (§3.4): say so once
                    reminded, plain = True, response.content
                    _reset(events, streamed, "respond-required")
                    messages += [LlmMessage("assistant", response.content),
                                 LlmMessage("user", self._notice)]
                    continue
                log.warning("process %s answered in plain text after the respond notice; "
                            "taking plain text as its reply", self._context.scope.process_id)
                if plain is None:  # tools ran since the notice: this answer speaks of them
                    return Reply(response.content, False)
                _reset(events, streamed, "not-the-reply")
                return Reply(plain, False)
            work = [c for c in response.tool_calls if c.name != RESPOND.name]
            if not work:
                reply = _parse_respond(response.tool_calls[0])
                if "".join(streamed) != reply.message:  # e.g. text before the call
                    _reset(events, streamed, "not-the-reply")
                return reply
            _reset(events, streamed, "tool-calls")
            plain = None
            calls = [self._prepare(call) for call in response.tool_calls]
            # As prepared: the model's next step sees the calls as recorded (e.g. a reference
            # to a stored file, not its bytes again).
            messages.append(LlmMessage("assistant", response.content,
                                       tool_calls=tuple(call for call, _ in calls)))
            for call, params in calls:
                result = RESPOND_ALONE if call.name == RESPOND.name else self._run(call, params)
                messages.append(LlmMessage("tool", result, tool_call_id=call.id))
        chat.append(ChatRole.ERROR, f"No reply after {MAX_STEPS} model steps; stopped this turn.")
        return None

    def _prepare(self, call: ToolCall) -> tuple[ToolCall, dict[str, Any] | None]:
        """The call as it is announced, run and recorded (``ToolDispatcher.prepare``), and
        its arguments (None when they are not a JSON object)."""
        try:
            params: Any = json.loads(call.arguments or "{}")
        except ValueError:
            return call, None
        if not isinstance(params, dict):
            return call, None
        if call.name == RESPOND.name:
            return call, params
        prepared = self._context.tools().prepare(call.name, params)
        if prepared == params:
            return call, params
        return replace(call, arguments=json.dumps(prepared, ensure_ascii=False)), prepared

    def _run(self, call: ToolCall, params: dict[str, Any] | None) -> str:
        """Execute one tool call; the model gets a JSON result or error either way."""
        events = self._context.events()
        events.emit(EventType.TOOL_CALL_STARTED,
                    {"toolCallId": call.id, "toolName": call.name, "params": params})
        body: dict[str, Any]
        if params is None:
            outcome_status, body = ToolCallStatus.ERROR, {
                "error": "arguments must be a JSON object"}
        else:
            outcome = self._context.tools().invoke(call.name, params)
            outcome_status = outcome.status
            body = ({"result": outcome.result} if outcome.status is ToolCallStatus.SUCCESS
                    else {"error": outcome.error})
        events.emit(EventType.TOOL_CALL_COMPLETED,
                    {"toolCallId": call.id, "status": outcome_status.value})
        text = json.dumps(body, default=str)
        self._context.chat().append(
            ChatRole.TOOL, f"{call.name}({call.arguments}) → {outcome_status.value}: {text[:2000]}",
            meta={"toolCallId": call.id, "toolName": call.name, "status": outcome_status.value})
        return text


def _reset(events: EventPublisher, streamed: list[str], reason: str) -> None:
    """Void what this model step streamed (if anything): it is not the reply, and clients
    must not show it as one (docs/protocol.md ``stream-reset``)."""
    if streamed:
        events.emit(EventType.STREAM_RESET, {"reason": reason})


def _parse_respond(call: ToolCall) -> Reply:
    try:
        args = json.loads(call.arguments or "{}")
        return Reply(str(args["message"]), bool(args.get("awaiting_user_input", False)))
    except (ValueError, KeyError, TypeError):
        # A malformed respond still ends the turn: show what the model said.
        return Reply(call.arguments, False)
