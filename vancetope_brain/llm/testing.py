"""Test doubles for ``ChatModel``, shipped with the code (like pydantic-ai's ``TestModel``).

- ``ScriptedModel`` returns scripted responses in order.
- ``FunctionModel`` computes each response with a function.
- ``PacedModel`` streams numbered, time-stamped tokens at a steady pace, waiting between
  them like a network read (the shape of real LLM traffic, for load benchmarks).
- ``block_network()`` refuses every non-loopback connection; the pytest plugin
  ``vancetope_brain.llm.pytest_plugin`` applies it to every test.

The first two stream content to ``on_token`` in a few chunks, record every call
in ``.calls`` and are thread-safe. Nothing here opens a connection. A ``str``
answer is the text the model streams; when the call offers the ``respond`` tool
(which Arthur and worker turns require) it is also sent as ``respond``'s message
(not awaiting input). Return an ``LlmResponse`` to answer in plain text anyway.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from vancetope_brain.llm.base import LlmMessage, LlmResponse, TokenSink, ToolCall, ToolSpec
from vancetope_brain.llm.demo import split_words

Scripted = LlmResponse | str | BaseException
ModelFunction = Callable[[list[LlmMessage], list[ToolSpec]], LlmResponse | str]


@dataclass(frozen=True)
class ModelCall:
    """What one ``complete`` call received."""

    messages: tuple[LlmMessage, ...]
    tools: tuple[ToolSpec, ...]

    @property
    def last_user_text(self) -> str:
        """The content of the last user message ('' if none)."""
        return next((m.content for m in reversed(self.messages) if m.role == "user"), "")


class ScriptExhausted(AssertionError):
    """Raised when a ScriptedModel is called more often than its script allows."""


class _RecordingModel:
    """Shared recording and streaming of the two doubles."""

    name: str

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[ModelCall] = []

    @property
    def calls(self) -> list[ModelCall]:
        """A copy of every call received so far, oldest first."""
        with self._lock:
            return list(self._calls)

    def _record(self, messages: list[LlmMessage], tools: list[ToolSpec] | None) -> int:
        with self._lock:
            self._calls.append(ModelCall(tuple(messages), tuple(tools or ())))
            return len(self._calls)

    def _deliver(self, result: LlmResponse | str, on_token: TokenSink | None,
                 tools: list[ToolSpec] | None) -> LlmResponse:
        if isinstance(result, str):
            respond = any(t.name == "respond" for t in tools or ())
            result = LlmResponse(content=result, tool_calls=(ToolCall(
                "double_respond", "respond", json.dumps(
                    {"message": result, "awaiting_user_input": False})),) if respond else ())
        elif not isinstance(result, LlmResponse):
            raise TypeError(f"{self.name}: expected LlmResponse or str, got {result!r}")
        if not result.model:
            result = dataclasses.replace(result, model=self.name)
        if on_token is not None:
            for chunk in stream_chunks(result.content):
                on_token(chunk)
        return result


class ScriptedModel(_RecordingModel):
    """Returns ``responses`` in order, one per call: a str becomes ``LlmResponse(content=str)``,
    an exception is raised. A call past the end raises ``ScriptExhausted``.
    """

    def __init__(self, responses: Sequence[Scripted], *, name: str = "scripted") -> None:
        super().__init__()
        self.name = name
        self._script = list(responses)

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been used yet."""
        with self._lock:
            return len(self._script) - len(self._calls)

    def complete(
        self,
        messages: list[LlmMessage],
        *,
        tools: list[ToolSpec] | None = None,
        on_token: TokenSink | None = None,
    ) -> LlmResponse:
        """Return (or raise) the next scripted response."""
        number = self._record(messages, tools)
        if number > len(self._script):
            last = ModelCall(tuple(messages), ()).last_user_text
            raise ScriptExhausted(
                f"{self.name}: call #{number} but the script holds only "
                f"{len(self._script)} response(s); last user message: {last!r}"
            )
        item = self._script[number - 1]
        if isinstance(item, BaseException):
            raise item
        return self._deliver(item, on_token, tools)


class FunctionModel(_RecordingModel):
    """Answers each call with ``fn(messages, tools)`` (an LlmResponse or a str).

    The model's own state is thread-safe; ``fn`` must be too if called from threads.
    """

    def __init__(self, fn: ModelFunction, *, name: str | None = None) -> None:
        super().__init__()
        self.fn = fn
        self.name = name or f"function:{getattr(fn, '__name__', 'fn')}"

    def complete(
        self,
        messages: list[LlmMessage],
        *,
        tools: list[ToolSpec] | None = None,
        on_token: TokenSink | None = None,
    ) -> LlmResponse:
        """Return ``fn(messages, tools)``, streaming its content."""
        self._record(messages, tools)
        return self._deliver(self.fn(list(messages), list(tools or ())), on_token, tools)


class PacedModel:
    """Streams ``tokens`` tokens over ``seconds``: token ``i`` goes to ``on_token`` at
    ``start + (i + 1) · seconds / tokens`` (an absolute schedule, so a late token does not
    delay the next ones), and the answer is their concatenation. Between tokens it sleeps,
    which releases the GIL like a socket read would: a threads pool overlaps its turns the
    way it overlaps turns waiting on an LLM endpoint. Each token is ``"<i> <µs>;"``, its
    index and its emission time (``time.time_ns() // 1000``), so a receiver can check the
    order and measure the delay (``paced_tokens`` parses them). Stateless, thread-safe.
    """

    def __init__(self, tokens: int = 100, seconds: float = 2.0, *, name: str = "paced") -> None:
        if tokens < 1 or seconds < 0:
            raise ValueError("PacedModel needs tokens >= 1 and seconds >= 0")
        self.tokens = tokens
        self.seconds = seconds
        self.name = name

    def complete(
        self,
        messages: list[LlmMessage],
        *,
        tools: list[ToolSpec] | None = None,
        on_token: TokenSink | None = None,
    ) -> LlmResponse:
        """Stream the tokens on schedule; return them joined."""
        step = self.seconds / self.tokens
        start = time.monotonic()
        chunks = []
        for i in range(self.tokens):
            delay = start + (i + 1) * step - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            chunk = f"{i} {time.time_ns() // 1000};"
            chunks.append(chunk)
            if on_token is not None:
                on_token(chunk)
        return LlmResponse(content="".join(chunks), model=self.name)


def paced_tokens(text: str) -> list[tuple[int, int]]:
    """The ``(index, emitted µs)`` pairs of ``PacedModel`` tokens in ``text`` (one token
    event's text, which may hold several tokens), in order. Raises ``ValueError`` on text
    that is not a run of whole tokens."""
    if not text.endswith(";"):
        raise ValueError(f"not whole PacedModel tokens: {text[-40:]!r}")
    out = []
    for part in text[:-1].split(";"):
        index, _, stamp = part.partition(" ")
        out.append((int(index), int(stamp)))
    return out


def stream_chunks(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into at most ``parts`` word-aligned chunks that join back to it."""
    words = split_words(text)
    if not words:
        return []
    size = -(-len(words) // parts)  # ceiling division
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


# --- network blocking -------------------------------------------------------------


class NetworkBlockedError(RuntimeError):
    """Raised when code under test tries to connect to a non-loopback address.

    A RuntimeError, not an OSError, so that client libraries do not mistake it
    for a transient connection failure and retry it.
    """


_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(address: Any) -> bool:
    """True for a unix socket path or an (host, port, …) tuple whose host is loopback."""
    if isinstance(address, str | bytes):
        return True  # AF_UNIX path (or abstract namespace)
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False  # a host name: resolving it would already use the network
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _refuse(address: Any) -> NetworkBlockedError:
    return NetworkBlockedError(
        f"network access to {address!r} is blocked in tests; only loopback "
        "(127.0.0.0/8, ::1, localhost) and unix sockets are allowed. "
        "Use a test double from vancetope_brain.llm.testing or a server on 127.0.0.1, "
        "or mark the test with @pytest.mark.allow_network."
    )


@contextmanager
def block_network() -> Iterator[None]:
    """While active, ``socket.connect``/``connect_ex``/``create_connection`` to any
    non-loopback address raise ``NetworkBlockedError``. Nests; restores on exit.
    """
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection

    def connect(self: socket.socket, address: Any) -> None:
        if self.family != socket.AF_UNIX and not is_loopback(address):
            raise _refuse(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family != socket.AF_UNIX and not is_loopback(address):
            raise _refuse(address)
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        # Checked before name resolution, so a blocked host name costs no DNS query.
        if not is_loopback(tuple(address)):
            raise _refuse(address)
        return real_create_connection(address, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    socket.create_connection = create_connection  # type: ignore[assignment]
    try:
        yield
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]
        socket.create_connection = real_create_connection  # type: ignore[assignment]
