"""The OpenAI-compatible door: ``GET /v1/models`` and ``POST /v1/chat/completions``, so any
OpenAI client (the ``openai`` package, Open WebUI, a notebook) can talk to a session's chat.

A "model" is a chat recipe the caller may start (category ``chat``, project ``default``);
a conversation is a session, named by the ``X-Vancetope-Session`` header on every reply and
given back by the caller in the same header or in ``metadata.vancetope_session`` (docs/
interop.md). The bearer key is a Vancetope token, checked like the WebSocket door's; every
request counts against the user's minute (``REQUESTS_PER_MINUTE``) and every completion
against the concurrent replies of the user, the tenant and the gateway process
(``MAX_REPLIES_PER_USER``, ``_PER_TENANT``, ``_PER_GATEWAY``). A reply follows the
session's events through the gateway's one ``EventListener`` (no stream read per request):
the chat process's tokens, until the assistant line that answers the steered message is
committed. Errors are OpenAI's error objects carrying Vancetope's stable codes.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
from flask import Blueprint, Response, current_app, g, request, stream_with_context
from werkzeug.exceptions import HTTPException

from vancetope_brain import keys
from vancetope_brain.errors import (
    Conflict,
    InputTooLarge,
    InvalidInput,
    LlmError,
    ModelNotFound,
    NotFound,
    ReplyTimeout,
    RuntimeFailure,
    UnsupportedParameter,
    VancetopeError,
)
from vancetope_brain.events import EventListener, EventType, Gap, LiveEvent
from vancetope_brain.identity import Principal
from vancetope_brain.models import ChatRole, ProcessStatus, Session, SessionStatus
from vancetope_brain.models.recipe import RecipeCategory
from vancetope_gateway.auth import authenticate
from vancetope_gateway.limits import RedisSlots, count_in_minute
from vancetope_gateway.parts import Gateway
from vancetope_gateway.statuses import http_status

log = logging.getLogger(__name__)

openai = Blueprint("openai", __name__, url_prefix="/v1")

SESSION_HEADER = "X-Vancetope-Session"
"""The session a conversation maps to: on every reply; a request may name it back here (or
in ``metadata.vancetope_session``) to continue that conversation."""
PROJECT = "default"
"""The project new sessions open in and whose chat recipes ``/v1/models`` lists."""
MAX_MESSAGES = 100
"""The most ``messages`` one request may carry (more: 413 ``input_too_large``)."""
MAX_INPUT_CHARS = 32_000
"""The most characters the steered message may have (``process-steer``'s cap): a new
session's context block and last user message together; a continued one's last message
(more: 413 ``input_too_large``)."""
REQUESTS_PER_MINUTE = 60
"""Requests per user and minute to ``/v1/`` (more: 429 ``rate_limited``)."""
MAX_REPLIES_PER_USER = 4
"""Chat completions (streamed or not) one user may have under way at once, across gateways
(more: 429 ``limit_exceeded``)."""
MAX_REPLIES_PER_TENANT = 16
"""Chat completions one tenant's users may have under way at once, across gateways, so that
one tenant cannot take every gateway's slots (more: 429 ``limit_exceeded``)."""
MAX_REPLIES_PER_GATEWAY = 32
"""Chat completions one gateway process serves at once. Each holds a request thread while it
waits (the Procfile's gunicorn has ``WEB_THREADS``, default 100, per process), so the REST
routes keep the others (more: 429 ``limit_exceeded``)."""
REPLY_TIMEOUT = 300.0
"""Seconds a completion waits for the process's reply (then 504 ``reply_timeout``, or that
error in the stream; the reply still arrives in the session)."""
KEEPALIVE_SECONDS = 15.0
"""An SSE comment goes out after this long without a chunk, so proxies keep the stream."""

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "invalid_request_error", 409: "invalid_request_error",
          413: "invalid_request_error", 429: "rate_limit_error"}
"""OpenAI's error ``type`` per HTTP status (anything else: ``server_error``)."""


E = TypeVar("E", bound=VancetopeError)


def _at(error: E, param: str) -> E:
    """``error``, naming the request field at fault (the OpenAI error's ``param``)."""
    error.param = param
    return error


def _error_body(status: int, code: str, message: str, param: str | None = None) -> str:
    return json.dumps({"error": {"message": message, "type": _TYPES.get(status, "server_error"),
                                 "param": param, "code": code}})


def _error(status: int, code: str, message: str, param: str | None = None) -> Response:
    return Response(_error_body(status, code, message, param), status=status,
                    mimetype="application/json")


@openai.errorhandler(VancetopeError)
def _domain_error(e: VancetopeError) -> Response:
    status = http_status(e)
    if status >= 500:
        log.warning("OpenAI door: %s %s failed: %s", request.method, request.path,
                    type(e).__name__)
    response = _error(status, e.code, _shown(e, status), e.param)
    if isinstance(e, ReplyTimeout | LlmError):
        # The message is in the session already: a retry would send it again (the openai
        # clients honour this header).
        response.headers["x-should-retry"] = "false"
    return response


def _shown(e: VancetopeError, status: int) -> str:
    """What the caller is told: a client's error and a reply that did not come say why; a
    failure below us (the store, Redis) says nothing of our internals."""
    if status < 500 or isinstance(e, ReplyTimeout | LlmError):
        return str(e)
    return "the server failed to answer; try again in a moment"


@openai.errorhandler(HTTPException)
def _http_error(e: HTTPException) -> Response:
    status = e.code or 500
    code = "payload_too_large" if status == 413 else (e.name or "error").lower().replace(" ", "_")
    return _error(status, code, e.description or "")


@openai.errorhandler(redis.RedisError)
def _redis_down(e: redis.RedisError) -> Response:
    log.warning("OpenAI door: Redis failed handling %s: %s", request.path, type(e).__name__)
    return _error(503, RuntimeFailure.code, "the server failed to answer; try again in a moment")


@openai.errorhandler(Exception)
def _internal(e: Exception) -> Response:
    log.exception("OpenAI door: %s %s failed", request.method, request.path)
    return _error(500, "internal", "the server failed to answer; try again in a moment")


# ── the door ─────────────────────────────────────────────────────────────────
def _gateway() -> Gateway:
    return current_app.extensions["vancetope"]


@openai.before_request
def _admit() -> None:
    """Authenticate (401 ``unauthorized``) and count the request in the user's minute."""
    who = authenticate()
    count_in_minute(_gateway().redis, keys.openai_requests(who.tenant_id, who.user_id),
                    REQUESTS_PER_MINUTE,
                    f"more than {REQUESTS_PER_MINUTE} requests in a minute; wait a moment")
    g.openai_principal = who


@openai.after_request
def _name_the_session(response: Response) -> Response:
    """Every reply of a conversation names its session, errors after the steer too."""
    if (session_id := g.get("openai_session")) is not None:
        response.headers[SESSION_HEADER] = session_id
    return response


def _who() -> Principal:
    who: Principal = g.openai_principal
    return who


@openai.get("/models")
def models() -> Response:
    """The chat recipes the caller may start, in OpenAI's list shape."""
    return Response(json.dumps({"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": source}
        for name, source in _chat_recipes(_who()).items()]}), mimetype="application/json")


@openai.route("/<path:anything>", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def elsewhere(anything: str) -> Response:
    """Any other ``/v1/`` path (embeddings, the Responses API, …): an OpenAI-shaped 404."""
    raise NotFound(f"/v1/{anything} is not served here: this door answers GET /v1/models "
                   "and POST /v1/chat/completions")


def _chat_recipes(who: Principal) -> dict[str, str]:
    """Name → source (bundled, tenant, project) of every chat recipe in the project's cascade."""
    return {e.recipe.name: e.source.value for e in _gateway().recipes.list(
        who.tenant_id, PROJECT, category=RecipeCategory.CHAT)}


@openai.post("/chat/completions")
def chat_completions() -> Response:
    who = _who()
    ask = _Ask.read(request.get_json(force=True, silent=True))
    gateway = _gateway()
    session_id = request.headers.get(SESSION_HEADER) or ask.session_id
    if session_id is not None:
        session, content = _continued(gateway, who, session_id, ask), _capped(ask.last)
    else:
        if ask.model is not None and ask.model not in _chat_recipes(who):
            raise ModelNotFound(f"no chat recipe named {ask.model!r}; GET /v1/models lists them")
        content = ask.first_input()
        session = None
    reply = _take_reply(gateway, who)
    turn: _Turn | None = None
    try:
        if session is None:
            session = gateway.sessions.create(who, project_id=PROJECT, chat_recipe=ask.model)
        g.openai_session = session.id
        turn = _Turn.start(gateway, _listener(), who, session, content)
        model = ask.model or gateway.sessions.process(who, turn.process_id).recipe_name \
            or "chat"
    except BaseException:
        if turn is not None:
            turn.close()
        reply.give_back()
        raise
    if ask.stream:
        streamed = Response(stream_with_context(_stream(turn, reply, model)),
                            mimetype="text/event-stream")
        # Also when the stream never starts (both are idempotent).
        streamed.call_on_close(turn.close)
        streamed.call_on_close(reply.give_back)
        return streamed
    try:
        text = turn.reply()
    finally:
        turn.close()
        reply.give_back()
    return Response(json.dumps(_completion(turn, model, text)), mimetype="application/json")


def _listener() -> EventListener:
    listener: EventListener = current_app.extensions["vancetope.sockets"].listener
    return listener


def _continued(gateway: Gateway, who: Principal, session_id: str, ask: _Ask) -> Session:
    """The caller's session to continue (resumed if SUSPENDED), its chat running ``model``."""
    try:
        session = gateway.sessions.get(who, session_id)
    except NotFound:
        raise _at(NotFound(f"no session {session_id!r} of yours"),
                  "metadata.vancetope_session") from None
    if session.status is SessionStatus.CLOSED or session.chat_process_id is None:
        raise Conflict(f"session {session_id!r} is {session.status.value} or has no chat; "
                       "start a new conversation (send no session)")
    chat = gateway.sessions.process(who, session.chat_process_id)
    if ask.model is not None and ask.model != chat.recipe_name:
        raise _at(InvalidInput(f"session {session_id!r} chats with {chat.recipe_name!r}, "
                               f"not {ask.model!r}"), "model")
    if session.status is SessionStatus.SUSPENDED:
        try:
            session = gateway.lifecycle.resume(who, session_id)
        except Conflict:  # resumed meanwhile by another request or a client
            session = gateway.sessions.get(who, session_id)
    return session


# ── the request ──────────────────────────────────────────────────────────────
_REFUSED_FIELDS = {
    "tools": "the caller's tools", "functions": "the caller's functions",
    "tool_choice": "tool_choice", "function_call": "function_call",
    "logprobs": "log probabilities", "top_logprobs": "log probabilities",
    "audio": "audio output", "prediction": "predicted outputs"}
"""Fields that ask what a process cannot honour; refused when set to anything but their
"off" value (null, false, an empty list, ``none``)."""
_ROLES = {"system", "developer", "user", "assistant"}


@dataclass(frozen=True)
class _Ask:
    """A chat completion request, checked: what Vancetope honours, or refused."""

    model: str | None
    messages: list[tuple[str, str]]
    stream: bool
    session_id: str | None

    @property
    def last(self) -> str:
        return self.messages[-1][1]

    def first_input(self) -> str:
        """A new session's input: the earlier messages as a context block, then the last."""
        earlier = self.messages[:-1]
        if not earlier:
            text = self.last
        else:
            lines = "\n".join(f"<message role=\"{role}\">\n{content}\n</message>"
                              for role, content in earlier)
            text = f"<conversation-context>\n{lines}\n</conversation-context>\n\n{self.last}"
        return _capped(text)

    @classmethod
    def read(cls, body: Any) -> _Ask:
        if not isinstance(body, dict):
            raise InvalidInput("the body must be a JSON object")
        for name, what in _REFUSED_FIELDS.items():
            value = body.get(name)
            if value not in (None, False, [], "none"):
                raise _at(UnsupportedParameter(
                    f"{what} cannot be honoured: Vancetope's processes run their recipe's own "
                    f"tools and give one answer"), name)
        if body.get("n") not in (None, 1):
            raise _at(UnsupportedParameter("n must be 1: a process gives one answer per "
                                           "message"), "n")
        fmt = body.get("response_format")
        if fmt is not None and (not isinstance(fmt, dict) or fmt.get("type") != "text"):
            raise _at(UnsupportedParameter(
                "only response_format {\"type\": \"text\"} can be honoured"), "response_format")
        model = body.get("model")
        if model is not None and (not isinstance(model, str) or not model):
            raise _at(InvalidInput("model must be a recipe's name"), "model")
        metadata = body.get("metadata") or {}
        session_id = metadata.get("vancetope_session") if isinstance(metadata, dict) else None
        if session_id is not None and not isinstance(session_id, str):
            raise _at(InvalidInput("metadata.vancetope_session must be a string"),
                      "metadata.vancetope_session")
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise _at(InvalidInput("stream must be a boolean"), "stream")
        return cls(model, _messages(body.get("messages")), stream, session_id or None)


def _capped(text: str) -> str:
    """The text to steer, if within ``MAX_INPUT_CHARS``."""
    if len(text) > MAX_INPUT_CHARS:
        raise _at(InputTooLarge(f"the input is {len(text)} characters; at most "
                                f"{MAX_INPUT_CHARS}"), "messages")
    return text


def _messages(raw: Any) -> list[tuple[str, str]]:
    """(role, text) of each message; the last must be the user's."""
    if not isinstance(raw, list) or not raw:
        raise _at(InvalidInput("messages must be a non-empty list"), "messages")
    if len(raw) > MAX_MESSAGES:
        raise _at(InputTooLarge(f"{len(raw)} messages; at most {MAX_MESSAGES} (a continued "
                                "conversation needs only the new one)"), "messages")
    found: list[tuple[str, str]] = []
    for i, message in enumerate(raw):
        param = f"messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in _ROLES | {"tool",
                                                                                 "function"}:
            raise _at(InvalidInput(f"{param} must be an object with a role "
                                   f"({', '.join(sorted(_ROLES))})"), param)
        if message["role"] in ("tool", "function") or message.get("tool_calls") \
                or message.get("function_call"):
            raise _at(UnsupportedParameter(f"{param}: the caller's tool calls cannot be "
                                           "honoured"), param)
        found.append((message["role"], _text(message.get("content"), f"{param}.content")))
    if found[-1][0] != "user":
        raise _at(InvalidInput("the last message must be the user's"),
                  f"messages[{len(found) - 1}].role")
    if not found[-1][1].strip():
        raise _at(InvalidInput("the last message is empty"),
                  f"messages[{len(found) - 1}].content")
    return found


def _text(content: Any, param: str) -> str:
    """A message's text: a string, or a list of text parts (other parts are refused)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" \
                    or not isinstance(part.get("text"), str):
                raise _at(UnsupportedParameter("only text content can be honoured"), param)
            parts.append(part["text"])
        return "".join(parts)
    raise _at(InvalidInput("content must be a string or a list of parts"), param)


# ── the cap on replies under way ─────────────────────────────────────────────
def _take_reply(gateway: Gateway, who: Principal) -> RedisSlots:
    """A slot among the user's ``MAX_REPLIES_PER_USER``, the tenant's
    ``MAX_REPLIES_PER_TENANT`` and this gateway process's ``MAX_REPLIES_PER_GATEWAY``; an
    entry a gateway that died left expires a minute after its wait would have ended."""
    return RedisSlots.take(gateway.redis, (
        (keys.openai_replies(who.tenant_id, who.user_id), MAX_REPLIES_PER_USER,
         f"you have {MAX_REPLIES_PER_USER} chat completions under way; wait for one to end"),
        (keys.openai_tenant_replies(who.tenant_id), MAX_REPLIES_PER_TENANT,
         f"your organisation has {MAX_REPLIES_PER_TENANT} chat completions under way; "
         "wait for one to end"),
        (keys.openai_gateway_replies(f"{socket.gethostname()}:{os.getpid()}"),
         MAX_REPLIES_PER_GATEWAY, f"this server has {MAX_REPLIES_PER_GATEWAY} chat "
         "completions under way; try again shortly")), REPLY_TIMEOUT + 60)


# ── one turn, followed ───────────────────────────────────────────────────────
@dataclass
class _Turn:
    """The steered message and the chat process's events that follow it: ``pieces`` gives
    ``("token", text)`` as the process streams, ``("void", "")`` when what it streamed is not
    the reply (``stream-reset``, ``turn-restarted``, another message's reply), and ends with
    ``("reply", text)`` — the assistant line answering the message — or raises."""

    gateway: Gateway
    listener: EventListener
    who: Principal
    session_id: str
    process_id: str
    message_id: str = ""
    handle: int | None = None
    events: queue.Queue[LiveEvent | Gap] = field(default_factory=queue.Queue)
    created: int = field(default_factory=lambda: int(time.time()))

    @classmethod
    def start(cls, gateway: Gateway, listener: EventListener, who: Principal,
              session: Session, content: str) -> _Turn:
        assert session.chat_process_id is not None
        turn = cls(gateway, listener, who, session.id, session.chat_process_id)
        # Followed before the steer, from the log's end: the turn's events all come after.
        turn.handle = listener.follow(session.id, gateway.events.last_seq(session.id),
                                      turn.events.put, turn.events.put)
        try:
            gateway.presence.touch(who.tenant_id, session.id, session.idle_timeout_sec)
            message, _ = gateway.sessions.steer(who, turn.process_id, content,
                                                session_id=session.id)
        except BaseException:
            turn.close()
            raise
        turn.message_id = message.id
        return turn

    @property
    def completion_id(self) -> str:
        return f"chatcmpl-{self.message_id}"

    def close(self) -> None:
        if self.handle is not None:
            self.listener.unfollow(self.handle)
            self.handle = None

    def reply(self) -> str:
        """The reply's text (waiting for it)."""
        for kind, text in self.pieces():
            if kind == "reply":
                return text
        raise AssertionError("pieces ends with the reply or raises")  # pragma: no cover

    def pieces(self, tick: float | None = None) -> Iterator[tuple[str, str]]:
        """What the process does for this message; ``("tick", "")`` after ``tick`` seconds
        of silence (for keep-alives)."""
        deadline = time.monotonic() + REPLY_TIMEOUT
        asked = False  # our message's user line is committed
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReplyTimeout(f"no reply within {REPLY_TIMEOUT:g} s; it will arrive in "
                                   f"session {self.session_id} (continue it to read on)")
            try:
                item = self.events.get(timeout=min(left, tick or left))
            except queue.Empty:
                if tick is not None:
                    yield "tick", ""
                continue
            if isinstance(item, Gap):  # events were lost: the store holds the record
                if (found := self._committed()) is not None:
                    yield "reply", found
                    return
                yield "void", ""
                continue
            if f'"processId":"{self.process_id}"' not in item.body[:200]:
                continue
            event = item.decoded()
            if event.type is EventType.TOKEN:
                yield "token", str(event.data.get("text", ""))
            elif event.type in (EventType.STREAM_RESET, EventType.TURN_RESTARTED):
                yield "void", ""
            elif event.type is EventType.STATUS_CHANGED and \
                    event.data.get("to") == ProcessStatus.CLOSED.value:
                raise Conflict("the session's chat process closed before it answered")
            elif event.type is EventType.CHAT_MESSAGE:
                line = event.data
                role = line.get("role")
                if role == ChatRole.USER.value and line.get("sourceMessageId") == self.message_id:
                    asked = True
                elif role in (ChatRole.ASSISTANT.value, ChatRole.ERROR.value):
                    if not asked:  # the reply to something else (e.g. a worker's report)
                        yield "void", ""
                    elif role == ChatRole.ERROR.value:
                        raise LlmError(str(line.get("content", "")))
                    else:
                        yield "reply", str(line.get("content", ""))
                        return

    def _committed(self) -> str | None:
        """The reply from the store, if committed (after lost events)."""
        lines = self.gateway.sessions.chat_history(self.who, self.process_id, limit=100)
        asked = next((m.seq for m in lines if m.role is ChatRole.USER
                      and m.source_message_id == self.message_id), None)
        if asked is None:
            return None
        for line in lines:
            if line.seq > asked and line.role is ChatRole.ERROR:
                raise LlmError(line.content)
            if line.seq > asked and line.role is ChatRole.ASSISTANT:
                return line.content
        return None


def _completion(turn: _Turn, model: str, text: str) -> dict[str, Any]:
    return {"id": turn.completion_id, "object": "chat.completion", "created": turn.created,
            "model": model, "choices": [{
                "index": 0, "message": {"role": "assistant", "content": text},
                "finish_reason": "stop", "logprobs": None}]}


def _stream(turn: _Turn, reply: RedisSlots, model: str) -> Iterator[str]:
    """SSE: a role chunk, the tokens, then what the committed reply adds, a stop chunk and
    ``[DONE]``. Tokens the process voids cannot be taken back once sent: from then on the
    stream holds its tokens back and ends with a blank line and the reply in full."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return "data: " + json.dumps({
            "id": turn.completion_id, "object": "chat.completion.chunk",
            "created": turn.created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                         "logprobs": None}]}) + "\n\n"

    try:
        yield chunk({"role": "assistant", "content": ""})
        attempt = ""   # what the process streamed since its last void
        voided = False  # text was sent that is not the reply
        for kind, text in turn.pieces(tick=KEEPALIVE_SECONDS):
            if kind == "tick":
                yield ": keep-alive\n\n"
            elif kind == "token":
                attempt += text
                if not voided and text:
                    yield chunk({"content": text})
            elif kind == "void":
                voided = voided or bool(attempt)
                attempt = ""
            elif voided:
                yield chunk({"content": "\n\n" + text})
            elif text.startswith(attempt):
                if text[len(attempt):]:
                    yield chunk({"content": text[len(attempt):]})
            else:  # the tokens were not the line (they cannot be taken back either)
                yield chunk({"content": "\n\n" + text})
        yield chunk({}, "stop")
        yield "data: [DONE]\n\n"
    except VancetopeError as e:
        status = http_status(e)
        yield f"data: {_error_body(status, e.code, _shown(e, status), e.param)}\n\n"
    except Exception:
        log.exception("OpenAI door: a streamed completion failed")
        yield f"data: {_error_body(500, 'internal', 'the server failed to answer')}\n\n"
    finally:
        turn.close()
        reply.give_back()
