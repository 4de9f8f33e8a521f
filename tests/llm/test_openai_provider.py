"""OpenAiChatModel through the real ``openai`` client against the fake server on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import openai
import pytest

from vancetope_brain.errors import LlmError, LlmRejected
from vancetope_brain.llm import aio, openai_provider
from vancetope_brain.llm.base import LlmMessage, ToolCall, ToolSpec
from vancetope_brain.llm.endpoint import safe_url
from vancetope_brain.llm.openai_provider import OpenAiChatModel

from .fake_openai_server import Call, FakeOpenAiServer, HttpError, Raw, Stall, Text, ToolCalls

KEY = "sk-test-secret-key-0123456789"
USER = [LlmMessage(role="user", content="hi")]


@pytest.fixture(autouse=True, params=["loop", "loop-httpx", "gevent"])
def shape(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test on every path: the calls streamed on the process's model loop over the
    SDK's aiohttp transport; the same over its default httpx transport (an SDK without the
    aiohttp one, or an install without aiohttp); and each call on its own thread with a
    client of its own, as in a gevent process (no loop thread)."""
    if request.param == "loop-httpx":
        monkeypatch.setattr(openai_provider, "_aiohttp_client", lambda: None)
    if request.param == "gevent":
        monkeypatch.setattr(aio, "available", lambda: False)
    return str(request.param)


@pytest.fixture
def server() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as s:
        yield s


def make(server: FakeOpenAiServer, **kw: object) -> OpenAiChatModel:
    options: dict = {"api_key": KEY, "base_url": server.base_url, "timeout": 3.0, "max_retries": 0}
    options.update(kw)
    return OpenAiChatModel("fake-model", **options)


def test_streamed_text_reaches_on_token_in_order(server: FakeOpenAiServer) -> None:
    text = "Hello there, this answer arrives in several pieces."
    server.script(Text(text, chunks=4))
    tokens: list[str] = []
    response = make(server).complete(USER, on_token=tokens.append)
    assert len(tokens) == 4
    assert "".join(tokens) == response.content == text
    assert response.finish_reason == "stop"
    assert response.model == "fake-model"
    assert response.tool_calls == ()
    assert response.usage == {}  # this server ignored stream_options


def test_usage_and_finish_reason_when_sent(server: FakeOpenAiServer) -> None:
    usage = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    server.script(Text("cut sh", finish_reason="length", usage=usage))
    response = make(server).complete(USER)
    assert response.usage == usage
    assert response.finish_reason == "length"
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_include_usage_can_be_turned_off(server: FakeOpenAiServer) -> None:
    server.script(Text("ok", usage={"total_tokens": 1}))
    assert make(server, include_usage=False).complete(USER).usage == {}
    assert "stream_options" not in server.requests[0].body


def test_parallel_tool_calls_are_assembled_from_interleaved_deltas(
    server: FakeOpenAiServer,
) -> None:
    calls = (
        Call("call_a", "search", '{"query": "weather in Lisbon", "limit": 3}'),
        Call("call_b", "read_file", '{"path": "/tmp/notes.txt"}'),
    )
    server.script(ToolCalls(calls, fragments=4))
    tokens: list[str] = []
    response = make(server).complete(USER, on_token=tokens.append)
    assert response.tool_calls == (
        ToolCall("call_a", "search", '{"query": "weather in Lisbon", "limit": 3}'),
        ToolCall("call_b", "read_file", '{"path": "/tmp/notes.txt"}'),
    )
    assert response.finish_reason == "tool_calls"
    assert response.content == "" and tokens == []


def test_tool_call_without_index_or_id_is_still_assembled(server: FakeOpenAiServer) -> None:
    # Some local servers send a whole call in one delta, with no index and no id.
    chunk = (
        '{"id":"x","object":"chat.completion.chunk","created":0,"model":"local",'
        '"choices":[{"index":0,"delta":{"tool_calls":[{"type":"function",'
        '"function":{"name":"ping","arguments":"{}"}}]},"finish_reason":null}]}'
    )
    server.script(Raw(f"data: {chunk}\n\ndata: [DONE]\n\n"))
    response = make(server).complete(USER)
    assert response.tool_calls == (ToolCall("call_0", "ping", "{}"),)
    assert response.finish_reason == "tool_calls"  # inferred: the server sent none
    assert response.model == "local"


def test_a_sdk_without_its_event_reader_streams_the_same(
        server: FakeOpenAiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_iter_events`` is the SDK's private reader: a release without it streams through
    the public chunk models, to the same tokens, usage and tool calls."""
    asked: list[object] = []
    monkeypatch.setattr(openai_provider, "_event_reader", lambda stream: asked.append(stream))
    usage = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    server.script(Text("one two three", chunks=3, usage=usage))
    tokens: list[str] = []
    response = make(server).complete(USER, on_token=tokens.append)
    assert len(tokens) == 3 and "".join(tokens) == response.content == "one two three"
    assert (response.usage, response.finish_reason) == (usage, "stop")
    call = Call("call_a", "search", '{"query": "weather"}')
    server.script(ToolCalls((call,), fragments=3))
    assert make(server).complete(USER).tool_calls == (
        ToolCall("call_a", "search", '{"query": "weather"}'),)
    assert len(asked) == 2  # both calls read the public way


def test_request_body_maps_messages_and_tools(server: FakeOpenAiServer) -> None:
    server.script(Text("done"))
    messages = [
        LlmMessage(role="system", content="Be brief."),
        LlmMessage(role="user", content="Weather?"),
        LlmMessage(role="assistant", tool_calls=(ToolCall("c1", "weather", '{"city":"Oslo"}'),)),
        LlmMessage(role="tool", content="rain", tool_call_id="c1"),
        LlmMessage(role="assistant", content="It rains."),
    ]
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [ToolSpec("weather", "Current weather of a city.", schema)]
    make(server).complete(messages, tools=tools)

    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "fake-model"
    assert request.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "assistant", "content": "It rains."},
    ]
    assert request.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current weather of a city.",
                "parameters": schema,
            },
        }
    ]


def test_no_tools_sends_no_tools_field(server: FakeOpenAiServer) -> None:
    server.script(Text("ok"))
    make(server).complete(USER, tools=[])
    assert "tools" not in server.requests[0].body


def test_tool_message_without_call_id_is_rejected(server: FakeOpenAiServer) -> None:
    with pytest.raises(ValueError, match="tool_call_id"):
        make(server).complete([LlmMessage(role="tool", content="x")])
    assert server.requests == []


def test_base_url_without_key_sends_a_placeholder(server: FakeOpenAiServer) -> None:
    server.script(Text("local"))
    assert make(server, api_key=None).complete(USER).content == "local"
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_retries_500_then_succeeds(server: FakeOpenAiServer) -> None:
    server.script(HttpError(500), Text("second time lucky"))
    response = make(server, max_retries=2).complete(USER)
    assert response.content == "second time lucky"
    assert len(server.requests) == 2


def test_5xx_after_retries_is_llm_error(server: FakeOpenAiServer) -> None:
    server.script(HttpError(503, "overloaded"), HttpError(503, "overloaded"))
    with pytest.raises(LlmError, match=r"HTTP 503: overloaded.*after 1 retries") as info:
        make(server, max_retries=1).complete(USER)
    assert len(server.requests) == 2
    assert isinstance(info.value.__cause__, openai.InternalServerError)


def test_401_is_not_retried_and_hides_the_key(server: FakeOpenAiServer) -> None:
    server.script(HttpError(401, f"Incorrect API key provided: {KEY}."), Text("never"))
    with pytest.raises(LlmError) as info:
        make(server, max_retries=2).complete(USER)
    message = str(info.value)
    assert "HTTP 401" in message and "OPENAI_API_KEY" in message
    assert KEY not in message and KEY[:12] not in message
    assert info.value.code == "llm_error"
    assert len(server.requests) == 1


@pytest.mark.parametrize(("status", "message", "code"), [
    (400, "The response was filtered due to the prompt triggering Azure OpenAI's content "
          "management policy.", "content_filter"),
    (400, "This model's maximum context length is 8192 tokens.", "context_length_exceeded"),
    (400, "This model's maximum context length is 4096 tokens. However, you requested 5000.",
     None),  # vLLM: no code, only the wording
    (413, "the request exceeds the available context size", None),  # llama.cpp
])
def test_a_refusal_of_the_input_is_llm_rejected(server: FakeOpenAiServer, status: int,
                                                message: str, code: str | None) -> None:
    server.script(HttpError(status, message, code=code))
    with pytest.raises(LlmRejected, match=f"HTTP {status}") as info:
        make(server, max_retries=2).complete(USER)
    assert info.value.code == "llm_rejected" and len(server.requests) == 1


@pytest.mark.parametrize(("status", "message"), [
    (400, "Invalid schema for function 'respond'"),  # our request, not the user's input
    (429, "Rate limit reached for requests (context length 8192)"),  # retried, then an outage
])
def test_other_client_errors_are_plain_llm_errors(server: FakeOpenAiServer, status: int,
                                                  message: str) -> None:
    server.script(HttpError(status, message))
    with pytest.raises(LlmError) as info:
        make(server, max_retries=0).complete(USER)
    assert not isinstance(info.value, LlmRejected)


def test_timeout_before_response_is_llm_error(server: FakeOpenAiServer) -> None:
    server.script(Stall(60))
    started = time.monotonic()
    with pytest.raises(LlmError, match="timed out after 0.3s"):
        make(server, timeout=0.3).complete(USER)
    assert time.monotonic() - started < 20  # not the 60 s stall


def test_timeout_mid_stream_is_llm_error(server: FakeOpenAiServer) -> None:
    server.script(Text("first then silence", chunks=3, stall=60))
    tokens: list[str] = []
    with pytest.raises(LlmError, match="stalled mid-stream for more than 0.3s"):
        make(server, timeout=0.3, max_retries=2).complete(USER, on_token=tokens.append)
    assert tokens == ["first "]
    assert len(server.requests) == 1  # a started stream is never retried


def test_unreachable_endpoint_is_llm_error() -> None:
    with socket.socket() as s:  # a loopback port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAiChatModel("m", api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(LlmError, match="unreachable") as info:
        model.complete(USER)
    assert KEY not in str(info.value)


def test_malformed_stream_is_llm_error(server: FakeOpenAiServer) -> None:
    server.script(Raw("data: {not json\n\n"))
    with pytest.raises(LlmError, match="malformed"):
        make(server).complete(USER)


def test_error_event_in_stream_is_llm_error(server: FakeOpenAiServer) -> None:
    server.script(Raw('data: {"error": {"message": "model crashed"}}\n\n'))
    with pytest.raises(LlmError, match="model crashed"):
        make(server).complete(USER)


def test_concurrent_calls_share_one_instance(server: FakeOpenAiServer) -> None:
    server.script(*(Text(f"answer {i}") for i in range(6)))
    model = make(server)
    results: list[str] = []
    lock = threading.Lock()

    def run() -> None:
        content = model.complete(USER).content
        with lock:
            results.append(content)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results) == sorted(f"answer {i}" for i in range(6))


def test_secrets_in_base_url_are_not_shown() -> None:
    assert (
        safe_url("https://user:pw@example.test:8443/v1?api-key=s") == "https://example.test:8443/v1"
    )
    assert safe_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    model = OpenAiChatModel("m", base_url="https://user:pw@example.test/v1")
    assert "pw" not in repr(model)


def test_fake_server_also_answers_without_streaming(server: FakeOpenAiServer) -> None:
    server.script(Text("plain"), ToolCalls((Call("c", "f", "{}"),)))
    with openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0) as client:
        first = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
        second = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
    assert first.choices[0].message.content == "plain"
    tool_calls = second.choices[0].message.tool_calls or []
    assert tool_calls[0].type == "function" and tool_calls[0].function.name == "f"
    assert second.choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize(("reply", "said"), [
    # A wrong OPENAI_BASE_URL behind a proxy: a web page where the API should be.
    (Raw("<!doctype html><html><body><h1>Welcome</h1></body></html>", "text/html"),
     r"answered HTTP 200 with text/html instead of a completion stream"),
    (Raw("", "text/html"), r"answered HTTP 200 with text/html instead of a completion"),
    (Raw("", "application/json"), r"with application/json instead of a completion"),
    (Raw(""), r"answered HTTP 200 with an empty stream"),
    # A stream whose events carry no text and no tool call.
    (Text(""), r"sent an empty completion \(finish reason stop\)"),
])
def test_a_response_without_a_completion_is_llm_error(server: FakeOpenAiServer,
                                                       reply: Raw | Text, said: str) -> None:
    server.script(reply)
    with pytest.raises(LlmError, match=said) as info:
        make(server).complete(USER, tools=[ToolSpec("ping", "Ping.")])
    assert str(info.value).startswith(f"LLM endpoint {server.base_url} (model fake-model)")
    assert type(info.value) is LlmError

