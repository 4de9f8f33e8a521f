"""A fake OpenAI-compatible server on 127.0.0.1, for the provider's tests.

    with FakeOpenAiServer() as server:
        server.script(HttpError(500), Text("hello", usage={...}))
        model = OpenAiChatModel("m", api_key="k", base_url=server.base_url)
        ...
        server.requests[0].body["messages"]

Each POST /v1/chat/completions consumes the next scripted reply, streamed as
SSE when the request says ``stream: true``, else as one JSON body. Every
request is recorded (headers and JSON body). With no reply left it answers a
non-retryable 500. ``server.reject(marker, HttpError(400, …, code=…))`` answers
every request whose messages contain ``marker`` with that error instead, as a
provider's content filter would, consuming no scripted reply.
``server.respond_with(fn)`` answers every other request with ``fn(body)`` where that
is not None (a server that answers by what it is asked, e.g. for a real worker whose
requests a test cannot foresee one by one), consuming no scripted reply.

POST /v1/embeddings answers deterministic vectors of ``EMBEDDING_DIM`` numbers from a toy
model that knows only the concepts it is taught (``server.teach({"automobile": "car", "car":
"car"})``): each known word of a text adds 1 to its concept's dimension (a hash of the
concept), and every text has a small constant component, so no vector is zero and texts
sharing no concept are nearly orthogonal (cosine about 0.05 or less), whatever words they
share. ``server.break_embeddings(reply)`` answers every embedding request with ``reply``
(an ``HttpError``, or ``Raw`` garbage) until ``break_embeddings(None)``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Text:
    """Stream ``text`` in ``chunks`` deltas; ``stall`` seconds of silence after the first,
    ``pace`` seconds after each (a slowly streaming model)."""

    text: str
    chunks: int = 3
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None  # sent only when the request asks for usage
    stall: float = 0.0
    pace: float = 0.0


@dataclass(frozen=True)
class Call:
    """One tool call of a ``ToolCalls`` reply."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCalls:
    """Stream tool calls: id/name in each call's first delta, then ``fragments`` argument
    deltas, the calls' deltas interleaved round-robin."""

    calls: tuple[Call, ...]
    fragments: int = 3
    finish_reason: str = "tool_calls"
    usage: dict[str, int] | None = None
    pace: float = 0.0
    """Seconds after each delta (a slowly streaming model)."""


@dataclass(frozen=True)
class HttpError:
    """Answer ``status`` with an OpenAI-style error body (and a short retry-after)."""

    status: int
    message: str = "fake server error"
    code: str | None = None


@dataclass(frozen=True)
class Stall:
    """Send nothing for ``seconds`` (or until the server closes), then hang up."""

    seconds: float


@dataclass(frozen=True)
class Raw:
    """Send ``body`` verbatim with HTTP 200, as an event stream unless ``content_type`` says
    otherwise (for malformed or unusual streams, or a web page where the API should be)."""

    body: str
    content_type: str = "text/event-stream"


Reply = Text | ToolCalls | HttpError | Stall | Raw


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]


EMBEDDING_DIM = 384
_BIAS = 0.1  # the constant component of every vector (dimension 0)


def embedding(text: str, concepts: dict[str, str]) -> list[float]:
    """The toy model's vector of ``text`` (module docstring)."""
    vector = [0.0] * EMBEDDING_DIM
    vector[0] = _BIAS
    for word in re.findall(r"[^\W_]+", text.lower()):
        if word in concepts:
            digest = hashlib.sha256(concepts[word].encode()).digest()
            vector[1 + int.from_bytes(digest[:4], "big") % (EMBEDDING_DIM - 1)] += 1.0
    return vector


@dataclass
class _State:
    replies: list[Reply] = field(default_factory=list)
    concepts: dict[str, str] = field(default_factory=dict)
    broken_embeddings: Reply | None = None
    rejections: list[tuple[str, HttpError]] = field(default_factory=list)
    responder: Callable[[dict[str, Any]], Reply | None] | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closing: threading.Event = field(default_factory=threading.Event)


class FakeOpenAiServer:
    """The fake server; a context manager that serves on an ephemeral loopback port."""

    def __init__(self) -> None:
        self._state = _State()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.state = self._state
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The ``/v1`` base URL to give the client."""
        port = self._httpd.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first."""
        with self._state.lock:
            return list(self._state.requests)

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request consumes the next one."""
        with self._state.lock:
            self._state.replies.extend(replies)

    def reject(self, marker: str, error: HttpError) -> None:
        """Answer ``error`` to every request with ``marker`` in a message's content."""
        with self._state.lock:
            self._state.rejections.append((marker, error))

    def respond_with(self, responder: Callable[[dict[str, Any]], Reply | None]) -> None:
        """Answer each request (not rejected) with ``responder(body)`` unless it returns
        None; called under the server's lock, so it must not block (answer ``Stall``)."""
        with self._state.lock:
            self._state.responder = responder

    def teach(self, concepts: dict[str, str]) -> None:
        """Teach the embedding model words and their concepts (module docstring)."""
        with self._state.lock:
            self._state.concepts.update(concepts)

    def break_embeddings(self, reply: Reply | None) -> None:
        """Answer every embedding request with ``reply`` (None: embed again)."""
        with self._state.lock:
            self._state.broken_embeddings = reply

    def __enter__(self) -> FakeOpenAiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._state.closing.set()  # wakes stalled handlers so server_close can join them
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


class _Server(ThreadingHTTPServer):
    # Join handler threads on close, so no socket outlives the test (ResourceWarning).
    daemon_threads = False
    block_on_close = True
    state: _State


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    # HTTP/1.0: one request per connection and the stream ends when the socket closes.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        state = self.server.state
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.loads(raw or b"{}")
        with state.lock:
            state.requests.append(
                RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            embeds = self.path.rstrip("/") == "/v1/embeddings"
            broken, concepts = state.broken_embeddings, dict(state.concepts)
            said = json.dumps([m.get("content") for m in body.get("messages", [])])
            rejected = next((e for marker, e in state.rejections if marker in said), None)
            reply = None if embeds else rejected or (
                state.responder(body) if state.responder else None) or (
                state.replies.pop(0) if state.replies else None)
        if embeds:
            self._embeddings(body, broken, concepts)
            return
        try:
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._error(HttpError(404, f"no route {self.path}"))
            elif reply is None:
                self._error(HttpError(500, "fake server: no scripted reply left"), retry=False)
            else:
                self._answer(reply, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test); nothing to tell it

    def _embeddings(self, body: dict[str, Any], broken: Reply | None,
                    concepts: dict[str, str]) -> None:
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        try:
            if broken is not None:
                self._answer(broken, body)
                return
            self._json(200, {"object": "list", "model": body.get("model", ""),
                             "data": [{"object": "embedding", "index": i,
                                       "embedding": embedding(text, concepts)}
                                      for i, text in enumerate(texts)],
                             "usage": {"prompt_tokens": 0, "total_tokens": 0}})
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _answer(self, reply: Reply, body: dict[str, Any]) -> None:
        if isinstance(reply, HttpError):
            self._error(reply)
        elif isinstance(reply, Stall):
            self.server.state.closing.wait(reply.seconds)
        elif isinstance(reply, Raw):
            self._start_stream(reply.content_type)
            self.wfile.write(reply.body.encode())
        elif body.get("stream"):
            self._stream(reply, body)
        else:
            self._json(200, _completion(reply, body.get("model", "")))

    def _stream(self, reply: Text | ToolCalls, body: dict[str, Any]) -> None:
        model = body.get("model", "")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._start_stream()
        self._event(_chunk(model, {"role": "assistant", "content": ""}))
        if isinstance(reply, Text):
            for i, piece in enumerate(split(reply.text, reply.chunks)):
                self._event(_chunk(model, {"content": piece}))
                if i == 0 and reply.stall:
                    self.server.state.closing.wait(reply.stall)
                if reply.pace:
                    self.server.state.closing.wait(reply.pace)
        else:
            for delta in _tool_call_deltas(reply):
                self._event(_chunk(model, {"tool_calls": [delta]}))
                if reply.pace:
                    self.server.state.closing.wait(reply.pace)
        self._event(_chunk(model, {}, finish_reason=reply.finish_reason))
        if include_usage and reply.usage is not None:
            self._event({**_chunk(model, None), "usage": reply.usage})
        self.wfile.write(b"data: [DONE]\n\n")

    def _start_stream(self, content_type: str = "text/event-stream") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

    def _event(self, data: dict[str, Any]) -> None:
        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _error(self, error: HttpError, *, retry: bool = True) -> None:
        payload = {"error": {"message": error.message, "type": "fake_error",
                             "code": error.code}}
        # A tiny retry-after keeps the client's retry back-off out of the test time.
        headers = {"retry-after-ms": "10"} if retry else {"x-should-retry": "false"}
        self._json(error.status, payload, headers)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def split(text: str, parts: int) -> list[str]:
    """Split ``text`` into at most ``parts`` non-empty pieces that join back to it."""
    if not text:
        return []
    size = -(-len(text) // max(parts, 1))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunk(model: str, delta: dict[str, Any] | None, finish_reason: str | None = None) -> dict:
    choices = (
        [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    )
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": choices,
    }


def _tool_call_deltas(reply: ToolCalls) -> list[dict[str, Any]]:
    per_call = []
    for index, call in enumerate(reply.calls):
        head = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        tail = [
            {"index": index, "function": {"arguments": piece}}
            for piece in split(call.arguments, reply.fragments)
        ]
        per_call.append([head, *tail])
    deltas: list[dict[str, Any]] = []
    for round_ in range(max(len(d) for d in per_call)):
        deltas.extend(d[round_] for d in per_call if round_ < len(d))
    return deltas


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if isinstance(reply, Text):
        message["content"] = reply.text
    elif isinstance(reply, ToolCalls):
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in reply.calls
        ]
    usage = getattr(reply, "usage", None) or {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
    }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": getattr(reply, "finish_reason", "stop"),
            }
        ],
        "usage": usage,
    }
