"""Small local models (issue 27 item 18): a tool call written as text is read as a call when it
names an offered tool and its arguments validate; a model without tool calling is offered
no tools (a profile's ``tools: false``, or found out when its endpoint refuses them). Through
the real ``openai`` client against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from vancetope_brain.config import Config
from vancetope_brain.errors import LlmError
from vancetope_brain.llm.base import LlmMessage, ToolCall, ToolSpec
from vancetope_brain.llm.openai_provider import OpenAiChatModel
from vancetope_brain.llm.profiles import load_profiles
from vancetope_brain.llm.text_calls import text_tool_calls

from .fake_openai_server import FakeOpenAiServer, HttpError, Text

WEATHER = ToolSpec("get_weather", "Current weather of a city.", {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
RESPOND = ToolSpec("respond", "Reply.", {
    "type": "object", "properties": {"message": {"type": "string"},
                                     "awaiting_user_input": {"type": "boolean"}},
    "required": ["message"]}, stream="message")
TOOLS = [WEATHER, RESPOND]
USER = [LlmMessage("user", "What is the weather in Paris?")]
# What Qwen2.5-Coder-1.5B under llama.cpp --jinja answered, offered get_weather.
QWEN = '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n```'
PARIS = ToolCall("text_call_0", "get_weather", '{"city": "Paris"}')


@pytest.mark.parametrize(("content", "calls", "rest"), [
    (QWEN, (PARIS,), ""),
    ('{"name": "get_weather", "arguments": {"city": "Paris"}}', (PARIS,), ""),
    ('```\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n```', (PARIS,), ""),
    ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}', (PARIS,), ""),
    ('{{"name": "get_weather", "arguments": {"city": "Paris"}}}', (PARIS,), ""),  # Qwen's
    ('Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
     '</tool_call>', (PARIS,), "Let me look."),
    ('[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "respond", '
     '"arguments": {"message": "Looking."}}]',
     (PARIS, ToolCall("text_call_1", "respond", '{"message": "Looking."}')), ""),
])
def test_a_call_written_as_text_is_read_as_a_call(content, calls, rest) -> None:
    assert text_tool_calls(content, TOOLS) == (calls, rest)


@pytest.mark.parametrize("content", [
    "2 + 2 equals 4.",
    '{"name": "get_time", "arguments": {}}',  # no such tool was offered
    '{"name": "get_weather", "arguments": {}}',  # city is required
    '{"name": "get_weather", "arguments": {"city": 7}}',  # not a string
    '{"city": "Paris"}',  # no name
    'Call it like this:\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}</tool_call>',  # broken
])
def test_anything_else_stays_text(content) -> None:
    assert text_tool_calls(content, TOOLS) == ((), content)
    assert text_tool_calls(QWEN, []) == ((), QWEN)  # nothing offered, nothing to call


@pytest.fixture
def server() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as s:
        yield s


def _model(server: FakeOpenAiServer, **options) -> OpenAiChatModel:
    return OpenAiChatModel("qwen", base_url=server.base_url, max_retries=0, timeout=5,
                           **{"text_tool_calls": True, **options})


def test_the_provider_turns_a_written_call_into_a_call_and_streams_no_raw_json(server):
    server.script(Text(QWEN, chunks=6), Text('```json\n{"name": "respond", "arguments": '
                                             '{"message": "It is sunny."}}\n```', chunks=5))
    tokens: list[str] = []
    response = _model(server).complete(USER, tools=TOOLS, on_token=tokens.append)
    assert (response.tool_calls, response.content, response.finish_reason) == (
        (PARIS,), "", "tool_calls")
    assert tokens == []  # held back, then dropped: it was a call
    reply = _model(server).complete(USER, tools=TOOLS, on_token=tokens.append)
    assert json.loads(reply.tool_calls[0].arguments) == {"message": "It is sunny."}
    assert tokens == ["It is sunny."]  # respond's message streams, as a native call's does


def test_text_that_only_looks_like_a_call_reaches_on_token_whole(server):
    almost = '{"name": "get_weather", "arguments": {}}'
    server.script(Text(almost, chunks=4), Text("Sunny, 21 °C.", chunks=3))
    tokens: list[str] = []
    assert _model(server).complete(USER, tools=TOOLS, on_token=tokens.append).content == almost
    assert tokens == [almost]
    assert _model(server).complete(USER, tools=TOOLS, on_token=tokens.append).tool_calls == ()
    assert tokens[1:] == ["Sunny", ", 21 ", "°C."]  # plain text streams as it comes


def test_without_text_tool_calls_a_written_call_stays_text(server):
    server.script(Text(QWEN))
    response = _model(server, text_tool_calls=False).complete(USER, tools=TOOLS)
    assert (response.content, response.tool_calls) == (QWEN, ())


def test_a_model_without_tool_calling_is_offered_no_tools(server):
    server.script(Text("It is sunny in Paris."))
    response = _model(server, tool_calling=False).complete(USER, tools=TOOLS)
    assert (response.content, response.tools_offered) == ("It is sunny in Paris.", False)
    assert "tools" not in server.requests[0].body


@pytest.mark.parametrize(("status", "message"), [
    (400, "registry.ollama.ai/library/gemma:2b does not support tools"),  # Ollama
    (500, "tools param requires --jinja flag"),  # llama.cpp without --jinja
    (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to '
          "be set"),  # vLLM
])
def test_an_endpoint_that_refuses_tools_is_asked_without_them_from_then_on(
        server, status, message, caplog):
    server.script(HttpError(status, message), Text("Sunny."), Text("Still sunny."))
    model = _model(server)
    first = model.complete(USER, tools=TOOLS)
    assert (first.content, first.tools_offered) == ("Sunny.", False)
    again = _model(server).complete(USER, tools=TOOLS)  # a new instance: the next turn's
    assert (again.content, again.tools_offered) == ("Still sunny.", False)
    assert ["tools" in r.body for r in server.requests] == [True, False, False]
    assert any("its processes answer in plain text from now on" in r.getMessage()
               for r in caplog.records)


def test_other_client_errors_are_not_taken_for_a_refusal_of_tools(server):
    server.script(HttpError(400, "Invalid schema for function 'respond'"))
    with pytest.raises(LlmError, match="Invalid schema"):
        _model(server).complete(USER, tools=TOOLS)
    assert len(server.requests) == 1


def test_profiles_say_tools_and_text_tool_calls_with_their_defaults(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text("""
profiles:
  tiny: {baseUrl: 'http://127.0.0.1:18400/v1', model: qwen, tools: false}
  local: {baseUrl: 'http://127.0.0.1:11434/v1', model: llama}
  hosted: {baseUrl: 'https://api.openai.com/v1', model: gpt-4o}
  azure: {baseUrl: 'https://acme.openai.azure.com/openai/v1', model: gpt-4o}
  strict: {baseUrl: 'http://127.0.0.1:11434/v1', model: llama, textToolCalls: false}
""")
    profiles = load_profiles(Config.from_env({"VANCETOPE_LLM_PROFILES": str(path),
                                              "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}))
    built = {name: profile.build(None) for name, profile in profiles.items()}
    assert {name: (m.tool_calling, m.text_tool_calls) for name, m in built.items()
            if isinstance(m, OpenAiChatModel)} == {
        "default": (True, True), "tiny": (False, True), "local": (True, True),
        "hosted": (True, False), "azure": (True, False), "strict": (True, False)}
    env = Config.from_env({"OPENAI_API_KEY": "sk-x", "VANCETOPE_LLM_TOOLS": "false",
                           "VANCETOPE_LLM_TEXT_TOOL_CALLS": "true"})
    default = load_profiles(env)["default"].build(None)
    assert isinstance(default, OpenAiChatModel)
    assert (default.tool_calling, default.text_tool_calls) == (False, True)
