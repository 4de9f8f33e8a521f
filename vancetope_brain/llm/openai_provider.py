"""``OpenAiChatModel``: the ChatModel over the official ``openai`` client.

Works against any OpenAI-compatible endpoint (OpenAI, Azure, vLLM, Ollama,
llama.cpp, LM Studio). Always streams, on the OS process's model loop (``aio``): a turn's
thread sleeps through its completion instead of waking for each token. Every ``openai``
failure becomes an ``LlmError`` whose message never contains the API key; a refusal of the
input itself (a content filter, a context limit) is the subclass ``LlmRejected``. So does
a 200 response that holds no completion (no text and no tool call: a web page or an
empty body where the API should be, or a model that said nothing).

Tools: a model without tool calling (``tool_calling=False``, the profile's ``tools:
false``) is offered none, and neither is one whose endpoint refused them once (it is
remembered per endpoint and model in this OS process, and logged once); its answer then
says ``tools_offered=False``. With ``text_tool_calls`` a call the model wrote as text
(``text_calls``) becomes a tool call, and an answer that starts like one is held back from
``on_token`` until it is complete, so no raw JSON streams to the user.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import jiter
import openai

from vancetope_brain.errors import Interrupted, LlmError, LlmRejected
from vancetope_brain.llm import aio
from vancetope_brain.llm.base import LlmMessage, LlmResponse, TokenSink, ToolCall, ToolSpec
from vancetope_brain.llm.endpoint import DEFAULT_BASE_URL, safe_url
from vancetope_brain.llm.text_calls import CALL_STARTS, text_tool_calls

if TYPE_CHECKING:
    # (responses are typed Any: the SDK's HTTP library is httpx in openai 1.x and 2.x,
    # httpx2 in 3.x)
    from openai._streaming import ServerSentEvent

log = logging.getLogger(__name__)

# Local servers (vLLM, Ollama, llama.cpp) ignore the key, but the client refuses to
# start without one.
_PLACEHOLDER_KEY = "not-needed"

# Endpoints sometimes echo a (partly masked) key back in a 401 message.
_KEY_LIKE = re.compile(r"\bsk-[\w*.\-]{6,}")

# Statuses the client retries (besides connection errors and timeouts).
_RETRIED_STATUSES = {408, 409, 429}

# How endpoints say that the input itself is refused (OpenAI and Azure error codes, the
# wording of vLLM, llama.cpp, Ollama and Anthropic-compatible proxies), in a 400 or 413.
_REJECTED_STATUSES = {400, 413}
_REJECTED = re.compile(r"content[_ ]?filter|content management polic|context[_ ]length|"
                       r"context (size|window)|maximum context|prompt is too long|"
                       r"too many tokens|string_above_max_length", re.IGNORECASE)


class OpenAiChatModel:
    """A ChatModel for one model on one OpenAI-compatible endpoint.

    Thread-safe: the calls of an OS process stream on its model loop (``aio``: the calling
    thread waits once, ``on_token`` runs on the loop's thread), with one ``AsyncOpenAI``
    client and connection pool per endpoint on that loop; a forked child starts its own
    loop and clients. In a gevent process each call builds its own synchronous client
    and closes it.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        include_usage: bool = True,
        tool_calling: bool = True,
        text_tool_calls: bool = False,
    ) -> None:
        self.name = model
        self.model = model
        # Explicit values, so the client never falls back to its own environment lookup.
        self.base_url = base_url or DEFAULT_BASE_URL
        self._api_key = api_key or _PLACEHOLDER_KEY
        self.timeout = timeout
        self.max_retries = max_retries
        self.include_usage = include_usage
        self.tool_calling = tool_calling
        self.text_tool_calls = text_tool_calls

    def __repr__(self) -> str:
        return f"OpenAiChatModel(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    def complete(
        self,
        messages: list[LlmMessage],
        *,
        tools: list[ToolSpec] | None = None,
        on_token: TokenSink | None = None,
    ) -> LlmResponse:
        """Stream one completion; see ``ChatModel.complete``. Raises ``LlmError``."""
        tools = list(tools or ())
        if tools and (not self.tool_calling or (self.base_url, self.model) in _REFUSED_TOOLS):
            return replace(self._stream(messages, [], on_token), tools_offered=False)
        try:
            return self._stream(messages, tools, on_token)
        except LlmError as e:
            if not tools or not _refuses_tools(e.__cause__):
                raise
            log.warning("%s; its processes answer in plain text from now on", e)
        _REFUSED_TOOLS.add((self.base_url, self.model))
        return replace(self._stream(messages, [], on_token), tools_offered=False)

    def _stream(self, messages: list[LlmMessage], tools: list[ToolSpec],
                on_token: TokenSink | None) -> LlmResponse:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [to_openai_message(m) for m in messages],
            "stream": True,
        }
        if tools:
            request["tools"] = [to_openai_tool(t) for t in tools]
        if self.include_usage:
            request["stream_options"] = {"include_usage": True}
        acc = _Accumulator(model=self.model,
                           streamed={t.name: t.stream for t in tools if t.stream})
        held = _HeldBack(on_token) if on_token is not None and tools and \
            self.text_tool_calls else None
        sink = held or on_token
        try:
            if aio.available():
                media = aio.run(self._read_async(request, acc, sink))
            else:
                media = self._read(request, acc, sink)
            response = acc.response()
        except Interrupted:
            raise Interrupted(acc.said()) from None
        except openai.OpenAIError as e:
            error = LlmRejected if _rejected(e) else LlmError
            raise error(self._describe(e, mid_stream=acc.chunks > 0)) from e
        except json.JSONDecodeError as e:
            # An SSE event whose data is not the JSON the protocol promises.
            raise LlmError(
                f"LLM endpoint {safe_url(self.base_url)} sent a malformed stream: {e}"
            ) from e
        if not response.content and not response.tool_calls:
            # What a wrong base URL behind a proxy gives (a web page, an empty body), or a
            # model that said nothing: no reply to show, so it fails like any other outage.
            raise LlmError(self._empty(acc, media))
        if held is None:
            return response
        calls, rest = text_tool_calls(response.content, tools) if not response.tool_calls \
            else ((), response.content)
        if not calls:
            held.release()
            return response
        held.drop()
        streamed = {t.name: t.stream for t in tools if t.stream}
        for call in calls:  # as a native call's ``stream`` argument would have streamed
            if call.name in streamed and on_token is not None:
                value = json.loads(call.arguments).get(streamed[call.name])
                if isinstance(value, str) and value:
                    on_token(value)
        return replace(response, content=rest, tool_calls=calls, finish_reason="tool_calls")

    async def _read_async(self, request: dict[str, Any], acc: _Accumulator,
                          sink: TokenSink | None) -> str:
        """Stream ``request`` into ``acc`` on the process's model loop (``aio``), with the
        loop's client for this endpoint; the media type of the response."""
        options = (self.base_url, self._api_key, self.timeout, self.max_retries)
        client = aio.shared((_CLIENT, options), lambda: openai.AsyncOpenAI(
            api_key=self._api_key, base_url=self.base_url, timeout=self.timeout,
            max_retries=self.max_retries, http_client=_aiohttp_client()))
        async with await client.chat.completions.create(**request) as stream:
            reader = _event_reader(stream)
            if reader is None:  # an SDK without it: its chunk models
                async for chunk in stream:
                    acc.add(chunk.to_dict(), sink)
                return _media_type(stream.response)
            async with contextlib.aclosing(reader()) as events:
                done = False
                async for event in events:
                    done = done or _add(event, stream.response, acc, sink)
            return _media_type(stream.response)

    def _read(self, request: dict[str, Any], acc: _Accumulator,
              sink: TokenSink | None) -> str:
        """``_read_async`` on the calling thread, with a client of its own (a gevent
        process, which has no thread for the loop)."""
        with (
            openai.OpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
            ) as client,
            client.chat.completions.create(**request) as stream,
        ):
            reader = _event_reader(stream)
            if reader is None:  # an SDK without it: its chunk models
                for chunk in stream:
                    acc.add(chunk.to_dict(), sink)
                return _media_type(stream.response)
            with contextlib.closing(reader()) as events:
                done = False
                for event in events:
                    done = done or _add(event, stream.response, acc, sink)
            return _media_type(stream.response)

    def _describe(self, e: openai.OpenAIError, *, mid_stream: bool) -> str:
        where = f"LLM endpoint {safe_url(self.base_url)} (model {self.model})"
        if mid_stream:
            # The client retries only the request, never a stream that already started.
            if _timed_out(e):
                return f"{where} stalled mid-stream for more than {self.timeout:g}s"
            return self._redact(f"{where} broke off the stream: {_root_cause(e)}")
        if _timed_out(e):
            text = f"{where} timed out after {self.timeout:g}s"
        elif isinstance(e, openai.APIConnectionError):
            text = f"{where} is unreachable: {_root_cause(e)}"
        elif isinstance(e, openai.APIStatusError):
            text = f"{where} answered HTTP {e.status_code}: {_status_message(e)}"
            if e.status_code in (401, 403):
                text += " (check OPENAI_API_KEY)"
        else:
            text = f"{where} failed: {type(e).__name__}: {e}"
        if self.max_retries and _retried(e):
            text += f" (after {self.max_retries} retries)"
        return self._redact(text)

    def _empty(self, acc: _Accumulator, media: str) -> str:
        """Why a 200 response holds no completion: no stream events (another kind of body,
        or none), or events without text or a tool call."""
        where = f"LLM endpoint {safe_url(self.base_url)} (model {self.model})"
        if acc.chunks:
            return (f"{where} sent an empty completion (finish reason "
                    f"{acc.finish_reason or 'none'}): no text and no tool call")
        if media and media != "text/event-stream":
            return (f"{where} answered HTTP 200 with {media} instead of a completion stream "
                    "(is the base URL the OpenAI-compatible API's, such as http://host/v1?)")
        return f"{where} answered HTTP 200 with an empty stream: no completion"

    def _redact(self, text: str) -> str:
        if self._api_key != _PLACEHOLDER_KEY:
            text = text.replace(self._api_key, "***")
        return _KEY_LIKE.sub("***", text)


def to_openai_message(message: LlmMessage) -> dict[str, Any]:
    """Map one LlmMessage to the OpenAI chat message dict."""
    if message.role == "tool":
        if message.tool_call_id is None:
            raise ValueError("a tool message needs tool_call_id")
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            # OpenAI's own form for a tool-calling turn without text is a null content.
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def to_openai_tool(tool: ToolSpec) -> dict[str, Any]:
    """Map one ToolSpec to the OpenAI ``tools`` entry."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    shown: str = ""  # what of its ``stream`` argument already went to ``on_token``

    def stream(self, argument: str, on_token: TokenSink) -> None:
        """Send the newly grown end of the string ``argument`` to ``on_token``: the arguments
        so far are parsed as partial JSON (an unfinished string counts as far as it goes)."""
        try:
            parsed = jiter.from_json("".join(self.arguments).encode(),
                                     partial_mode="trailing-strings")
        except ValueError:  # not JSON (yet, or at all): the assembled call says what it is
            return
        value = parsed.get(argument) if isinstance(parsed, dict) else None
        if isinstance(value, str) and len(value) > len(self.shown) \
                and value.startswith(self.shown):
            on_token(value[len(self.shown):])
            self.shown = value


@dataclass
class _Accumulator:
    """Folds stream chunks into one LlmResponse; ``streamed``: tool name → its ``stream``
    argument, whose text goes to ``on_token`` as the call's arguments stream."""

    model: str
    streamed: dict[str, str] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    chunks: int = 0

    def add(self, chunk: Any, on_token: TokenSink | None) -> None:
        """Fold one chunk, the JSON of a ``chat.completion.chunk`` event."""
        self.chunks += 1
        if not isinstance(chunk, dict):
            return
        if chunk.get("model"):
            self.model = chunk["model"]
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            # Servers with continuous usage stats send it on every chunk; the last one wins.
            self.usage = {k: v for k, v in usage.items()
                          if isinstance(v, int) and not isinstance(v, bool)}
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:  # we never ask for n > 1
                continue
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if not delta:
                continue
            content = delta.get("content")
            if content:
                self.text.append(content)
                if on_token is not None:
                    on_token(content)
            for position, tc in enumerate(delta.get("tool_calls") or ()):
                # Some local servers omit the index; fall back to the position in the delta.
                index = tc.get("index")
                call = self.calls.setdefault(position if index is None else index,
                                             _PartialCall())
                if tc.get("id") and not call.id:
                    call.id = tc["id"]
                function = tc.get("function")
                if function:
                    if function.get("name") and not call.name:
                        call.name = function["name"]
                    if function.get("arguments"):
                        call.arguments.append(function["arguments"])
                        if on_token is not None and call.name in self.streamed:
                            call.stream(self.streamed[call.name], on_token)

    def said(self) -> str:
        """What went to ``on_token`` so far: the text, and the streamed argument of a call
        (``respond``'s message) — what a call cut short had said."""
        return "".join(self.text) + "".join(c.shown for _, c in sorted(self.calls.items()))

    def response(self) -> LlmResponse:
        calls = tuple(
            ToolCall(id=c.id or f"call_{i}", name=c.name, arguments="".join(c.arguments) or "{}")
            for i, c in sorted(self.calls.items())
        )
        finish = self.finish_reason or ("tool_calls" if calls else "stop")
        return LlmResponse(
            content="".join(self.text),
            tool_calls=calls,
            finish_reason=finish,
            model=self.model,
            usage=self.usage,
        )


class _HeldBack:
    """An ``on_token`` that passes text on, except an answer that may be nothing but a tool
    call written as text (it starts like one, ``text_calls.CALL_STARTS``): that is held
    until the answer is complete, then released (no call in it) or dropped."""

    def __init__(self, sink: TokenSink) -> None:
        self._sink = sink
        self._held: list[str] = []
        self._holding = True

    def __call__(self, text: str) -> None:
        if not self._holding:
            self._sink(text)
            return
        self._held.append(text)
        start = "".join(self._held).lstrip()
        if start and not any(start.startswith(m) or m.startswith(start) for m in CALL_STARTS):
            self._holding = False
            self.release()

    def release(self) -> None:
        if self._held:
            self._sink("".join(self._held))
            self._held = []

    def drop(self) -> None:
        self._held = []


_REFUSED_TOOLS: set[tuple[str, str]] = set()
"""(base URL, model) of endpoints that refused ``tools`` in this OS process: asked without
them from then on (a restart asks once more)."""

# How servers say they take no tools: llama.cpp without --jinja ("tools param requires
# --jinja flag"), Ollama ("… does not support tools"), vLLM without a tool parser ('"auto"
# tool choice requires --enable-auto-tool-choice …').
_REFUSES_TOOLS = re.compile(r"does not support tools|tools? (?:are |is )?not supported|"
                            r"\btool(?:s| param| choice|_choice)\b[^.]{0,40}\brequires?\b|"
                            r"enable-auto-tool-choice", re.IGNORECASE)


def _event_reader(stream: Any) -> Any:
    """The stream's private server-sent event reader, or None in an SDK without one."""
    return getattr(stream, "_iter_events", None)


def _add(event: ServerSentEvent, response: Any, acc: _Accumulator,
         sink: TokenSink | None) -> bool:
    """Fold one server-sent event into ``acc``; whether it ends the stream (``[DONE]``: the
    events after it are read, so the connection can be reused, and ignored).

    The events are read with the stream's ``_iter_events`` (which maps a read timeout or a
    broken connection to ``openai``'s errors) and parsed here as plain JSON, not into the
    SDK's chunk models: building those was most of a token's CPU (benchmarks/README.md,
    "the model loop"). An ``error`` event raises ``openai.APIError`` as the SDK's own
    iteration does. ``_iter_events`` is private: an SDK release without it makes the
    readers fall back to the public iteration over chunk models (``to_dict``), slower but
    the same completion (``test_a_sdk_without_its_event_reader_streams_the_same``)."""
    if event.data.startswith("[DONE]"):
        return True
    data = json.loads(event.data)
    if isinstance(data, dict) and data.get("error"):
        error = data["error"]
        message = error.get("message") if isinstance(error, dict) else None
        raise openai.APIError(message if isinstance(message, str) and message
                              else "An error occurred during streaming",
                              request=response.request, body=error)
    acc.add(data, sink)
    return False


_CLIENT = object()
"""With the endpoint's options, the key of an ``AsyncOpenAI`` client on the model loop."""


def _aiohttp_client() -> Any:
    """The SDK's aiohttp transport for the loop's clients (``openai.DefaultAioHttpClient``,
    the ``openai[aiohttp]`` extra), or None — the SDK's default httpx transport — in an SDK
    without it or an install without aiohttp. A streamed token costs the loop about half the
    CPU over aiohttp (its HTTP parser is C; httpx's h11 reads the body in Python) and the
    SDK keeps its errors: the transport maps aiohttp's to httpx's, which the SDK maps to
    ``openai``'s (benchmarks/README.md, "the lean token stream")."""
    make = getattr(openai, "DefaultAioHttpClient", None)
    if make is None:
        return None
    try:
        return make()
    except RuntimeError:  # "you must have installed the package with the `aiohttp` extra"
        return None


def _media_type(response: Any) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip()


def _timed_out(e: openai.OpenAIError) -> bool:
    """Whether ``e`` is a timeout. The SDK's aiohttp transport maps every aiohttp connection
    error that is not a timeout (a refused connection, a server that hung up) to httpx's
    ``ConnectTimeout``, which the SDK raises as ``APITimeoutError``: its cause says which."""
    if not isinstance(e, openai.APITimeoutError):
        return False
    cause = e.__cause__
    while cause is not None:
        if isinstance(cause, TimeoutError):  # aiohttp's own timeouts are TimeoutErrors
            return True
        if type(cause).__module__.startswith("aiohttp."):
            return False
        cause = cause.__cause__
    return True


def _refuses_tools(e: BaseException | None) -> bool:
    return isinstance(e, openai.APIStatusError) and e.status_code in (400, 422, 500, 501) \
        and bool(_REFUSES_TOOLS.search(_status_message(e)))


def _status_message(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:500]
        if isinstance(error, str):
            return error[:500]
    return e.message[:500]


def _rejected(e: openai.OpenAIError) -> bool:
    """Whether the endpoint refused the request for its content (the same input fails
    again), judged by status and the error's code or message."""
    if not isinstance(e, openai.APIStatusError) or e.status_code not in _REJECTED_STATUSES:
        return False
    body = e.body.get("error", e.body) if isinstance(e.body, dict) else e.body
    said = " ".join(str(body.get(k) or "") for k in ("code", "type", "message")) \
        if isinstance(body, dict) else str(body or e.message)
    return bool(_REJECTED.search(said))


def _retried(e: openai.OpenAIError) -> bool:
    if isinstance(e, openai.APIConnectionError):
        return True
    return isinstance(e, openai.APIStatusError) and (
        e.status_code >= 500 or e.status_code in _RETRIED_STATUSES
    )


def _root_cause(e: BaseException) -> str:
    cause: BaseException = e
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return str(cause) or type(cause).__name__
