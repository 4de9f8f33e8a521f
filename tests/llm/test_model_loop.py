"""The process's model loop (``llm/aio.py``) under ``OpenAiChatModel``, against the fake
server on loopback: where tokens are delivered, how a call ends early, a forked child."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import warnings
from collections.abc import Iterator

import openai
import pytest

from vancetope_brain.engines.context import FencedModel
from vancetope_brain.errors import Fenced
from vancetope_brain.errors import Interrupted as Cut
from vancetope_brain.llm import aio, openai_provider
from vancetope_brain.llm.base import LlmMessage
from vancetope_brain.llm.openai_provider import OpenAiChatModel

from .fake_openai_server import FakeOpenAiServer, Stall, Text

USER = [LlmMessage(role="user", content="hi")]


@pytest.fixture
def server() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as s:
        yield s


def make(server: FakeOpenAiServer) -> OpenAiChatModel:
    return OpenAiChatModel("fake-model", api_key="k", base_url=server.base_url, timeout=3.0,
                           max_retries=0)


def calls_on_the_loop() -> int:
    """Tasks on the model loop other than the one asking."""
    async def count() -> int:
        return len(asyncio.all_tasks()) - 1
    return aio.run(count())


def wait_until_idle() -> None:
    deadline = time.monotonic() + 3
    while calls_on_the_loop() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert calls_on_the_loop() == 0


def test_tokens_reach_on_token_on_the_loop_thread_while_callers_wait(
        server: FakeOpenAiServer) -> None:
    server.script(*(Text(f"answer number {i}", chunks=3) for i in range(4)))
    model = make(server)
    seen: list[tuple[str, str]] = []  # (calling thread, thread that got the token)
    lock = threading.Lock()
    results: list[str] = []

    def call() -> None:
        caller = threading.current_thread().name

        def on_token(text: str) -> None:
            with lock:
                seen.append((caller, threading.current_thread().name))

        content = model.complete(USER, on_token=on_token).content
        with lock:
            results.append(content)

    threads = [threading.Thread(target=call, name=f"turn-{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results) == [f"answer number {i}" for i in range(4)]
    assert len(seen) == 12
    assert {thread for _, thread in seen} == {"vt-llm-loop"}
    assert {caller for caller, _ in seen} == {f"turn-{i}" for i in range(4)}


def test_a_lost_lease_ends_the_call_at_the_next_token(server: FakeOpenAiServer) -> None:
    server.script(Text("one two three four", chunks=4), Text("next"))
    lost = threading.Event()
    tokens: list[str] = []

    def on_token(text: str) -> None:
        tokens.append(text)
        lost.set()  # the lease is lost while the first token is handled

    model = FencedModel(make(server), lost, lambda error, messages: None)
    with pytest.raises(Fenced):
        model.complete(USER, on_token=on_token)
    assert len(tokens) == 1  # the second token found the lease lost
    wait_until_idle()
    assert make(server).complete(USER).content == "next"  # the loop goes on


def test_an_exception_of_on_token_closes_the_stream_at_once(server: FakeOpenAiServer) -> None:
    server.script(Text("first then a long silence", chunks=3, stall=60))

    def on_token(text: str) -> None:
        raise KeyError(text)

    started = time.monotonic()
    with pytest.raises(KeyError, match="first"):
        make(server).complete(USER, on_token=on_token)
    assert time.monotonic() - started < 20  # not the 60 s stall
    wait_until_idle()


class Interrupted(Exception):
    pass


def test_an_interrupted_wait_cancels_the_call(server: FakeOpenAiServer) -> None:
    server.script(Stall(60))

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        started = time.monotonic()
        with pytest.raises(Interrupted):
            make(server).complete(USER)
        assert time.monotonic() - started < 20  # not the 60 s stall
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    wait_until_idle()


def test_interrupt_cuts_only_its_owners_call_and_keeps_what_was_said(
        server: FakeOpenAiServer) -> None:
    """``aio.interrupt(owner)`` (the worker's interrupt listener) closes the stream of that
    owner's running call at once; its caller gets ``Interrupted`` (``Cut`` here) with the text streamed so
    far; another owner's call, running beside it, goes on."""
    words = " ".join(f"w{i}" for i in range(100))
    server.script(Text(words, chunks=100, pace=0.02), Text(words, chunks=100, pace=0.02))
    model = make(server)
    streamed: dict[str, list[str]] = {"a": [], "b": []}
    outcome: dict[str, object] = {}

    def call(owner: str) -> None:
        with aio.owned(owner):
            try:
                outcome[owner] = model.complete(USER, on_token=streamed[owner].append).content
            except Cut as e:
                outcome[owner] = e

    threads = [threading.Thread(target=call, args=(o,)) for o in ("a", "b")]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while len(streamed["a"]) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert aio.interrupt("a") == 1
    cut_at = time.monotonic()
    threads[0].join(timeout=2)
    assert time.monotonic() - cut_at < 0.3
    cut = outcome["a"]
    assert isinstance(cut, Cut) and cut.said == "".join(streamed["a"])
    assert 5 <= len(streamed["a"]) < 100 and words.startswith(cut.said)
    threads[1].join(timeout=10)
    assert outcome["b"] == words  # the other owner's call was not touched
    assert aio.interrupt("a") == 0 and not aio.is_cut("a")  # nothing of it is left
    wait_until_idle()


def test_a_forked_child_streams_on_a_loop_of_its_own(server: FakeOpenAiServer) -> None:
    server.script(Text("before the fork"), Text("in the child"), Text("after the fork"))
    model = make(server)
    assert model.complete(USER).content == "before the fork"
    read, write = os.pipe()
    with warnings.catch_warnings():  # "use of fork() may lead to deadlocks": not here
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        status = 1
        try:
            tokens: list[str] = []
            content = model.complete(USER, on_token=tokens.append).content
            os.write(write, f"{content}|{''.join(tokens)}".encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert said == "in the child|in the child"
    assert model.complete(USER).content == "after the fork"


def test_not_from_the_loop_thread(server: FakeOpenAiServer) -> None:
    server.script(Text("answer"))

    def on_token(text: str) -> None:
        make(server).complete(USER)  # a sink that calls a model would wait on itself

    with pytest.raises(RuntimeError, match="own thread"):
        make(server).complete(USER, on_token=on_token)


def test_the_loop_streams_over_aiohttp_where_the_sdk_has_it(
        server: FakeOpenAiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's clients use the SDK's aiohttp transport (``openai.DefaultAioHttpClient``);
    an SDK without it, or one whose aiohttp extra is not installed (it raises RuntimeError
    when built), gives the SDK's default transport, and the call streams the same."""
    assert isinstance(openai_provider._aiohttp_client(), openai.DefaultAioHttpClient)
    server.script(Text("over aiohttp", chunks=2), Text("without the extra", chunks=2),
                  Text("an older SDK", chunks=2))
    model = make(server)
    transports: list[str] = []
    real = openai.AsyncOpenAI

    def spy(**kw: object) -> openai.AsyncOpenAI:
        client = real(**kw)  # type: ignore[arg-type]
        transports.append(type(client._client).__name__)
        return client

    monkeypatch.setattr(openai, "AsyncOpenAI", spy)
    assert model.complete(USER).content == "over aiohttp"

    def missing_extra() -> None:
        raise RuntimeError("To use the aiohttp client you must have installed the package "
                           "with the `aiohttp` extra")

    monkeypatch.setattr(openai, "DefaultAioHttpClient", missing_extra)
    tokens: list[str] = []
    other = OpenAiChatModel("fake-model", base_url=server.base_url, timeout=2.5)  # other options: a client of its own on the loop
    assert other.complete(USER, on_token=tokens.append).content == "without the extra"
    assert "".join(tokens) == "without the extra"
    monkeypatch.delattr(openai, "DefaultAioHttpClient")
    assert OpenAiChatModel("fake-model", base_url=server.base_url, timeout=2.0).complete(USER).content == "an older SDK"
    assert transports[0] == "_InstalledAioHttpClient"
    assert transports[1:] == ["AsyncHttpxClientWrapper"] * 2


def test_only_a_timeout_over_aiohttp_is_described_as_one() -> None:
    """The SDK's aiohttp transport raises every aiohttp connection error as httpx's
    ConnectTimeout (an ``APITimeoutError`` to the SDK): a refused connection or a server that
    hung up is described by its cause (``test_unreachable_endpoint_is_llm_error``)."""
    import aiohttp

    with openai.DefaultHttpxClient() as http:  # the SDK's HTTP library's request
        request = http.build_request("POST", "http://127.0.0.1/v1/chat/completions")

    def timeout_caused_by(cause: BaseException) -> openai.APITimeoutError:
        mapped = Exception(f"ConnectTimeout: {cause}")  # the transport's httpx error
        mapped.__cause__ = cause
        error = openai.APITimeoutError(request=request)
        error.__cause__ = mapped
        return error

    hung_up = aiohttp.ServerDisconnectedError()
    assert not openai_provider._timed_out(timeout_caused_by(hung_up))
    assert openai_provider._timed_out(timeout_caused_by(aiohttp.SocketTimeoutError()))
    assert openai_provider._timed_out(timeout_caused_by(TimeoutError()))
    model = OpenAiChatModel("m", base_url="http://127.0.0.1:1/v1", max_retries=0)
    said = model._describe(timeout_caused_by(hung_up), mid_stream=True)
    assert "broke off the stream: Server disconnected" in said, said
