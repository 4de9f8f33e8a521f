"""The test doubles, the demo model, network blocking and the factory."""

from __future__ import annotations

import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from vancetope_brain.config import Config
from vancetope_brain.errors import LlmError
from vancetope_brain.llm.base import LlmMessage, LlmResponse, ToolCall, ToolSpec
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.llm.factory import build_chat_model, describe
from vancetope_brain.llm.openai_provider import OpenAiChatModel
from vancetope_brain.llm.testing import (
    FunctionModel,
    NetworkBlockedError,
    ScriptedModel,
    ScriptExhausted,
    block_network,
    is_loopback,
)

# Captured at import, before any test's autouse fixture patches them.
REAL_CONNECT = socket.socket.connect
REAL_CREATE_CONNECTION = socket.create_connection

USER = [LlmMessage(role="user", content="What is a lane?")]
TOOLS = [ToolSpec("search", "Search the web.")]


# --- ScriptedModel ---------------------------------------------------------------


def test_scripted_model_returns_responses_in_order_and_streams() -> None:
    call = ToolCall("c1", "search", '{"q": "x"}')
    model = ScriptedModel(
        [
            "first answer with a few words",
            LlmResponse("", tool_calls=(call,), finish_reason="tool_calls"),
        ]
    )
    tokens: list[str] = []
    first = model.complete(USER, tools=TOOLS, on_token=tokens.append)
    assert first == LlmResponse(content="first answer with a few words", model="scripted")
    assert len(tokens) > 1 and "".join(tokens) == first.content
    second = model.complete(USER)
    assert second.tool_calls == (call,) and second.finish_reason == "tool_calls"
    assert [c.tools for c in model.calls] == [tuple(TOOLS), ()]
    assert model.calls[0].messages == tuple(USER)
    assert model.calls[0].last_user_text == "What is a lane?"
    assert model.remaining == 0


def test_scripted_model_raises_scripted_exceptions() -> None:
    model = ScriptedModel([LlmError("endpoint down"), "recovered"])
    with pytest.raises(LlmError, match="endpoint down"):
        model.complete(USER)
    assert model.complete(USER).content == "recovered"


def test_scripted_model_says_when_the_script_ran_out() -> None:
    model = ScriptedModel(["only one"])
    model.complete(USER)
    with pytest.raises(ScriptExhausted, match=r"call #2 .* only 1 response.*What is a lane"):
        model.complete(USER)
    assert isinstance(ScriptExhausted(), AssertionError)


def test_scripted_model_is_thread_safe() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(40)])
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: model.complete(USER).content, range(40)))
    assert sorted(results) == sorted(f"answer {i}" for i in range(40))
    assert len(model.calls) == 40 and model.remaining == 0


# --- FunctionModel ---------------------------------------------------------------


def test_function_model_computes_each_answer() -> None:
    def echo(messages: list[LlmMessage], tools: list[ToolSpec]) -> str:
        return f"{messages[-1].content} / tools: {[t.name for t in tools]}"

    model = FunctionModel(echo)
    tokens: list[str] = []
    response = model.complete(USER, tools=TOOLS, on_token=tokens.append)
    assert response.content == "What is a lane? / tools: ['search']"
    assert "".join(tokens) == response.content
    assert model.name == "function:echo" and response.model == "function:echo"
    assert len(model.calls) == 1


def test_function_model_passes_responses_through() -> None:
    answer = LlmResponse(
        "", tool_calls=(ToolCall("c", "f", "{}"),), finish_reason="tool_calls", model="x"
    )
    model = FunctionModel(lambda messages, tools: answer, name="fn")
    assert model.complete(USER) is answer


def test_function_model_records_concurrent_calls() -> None:
    model = FunctionModel(lambda messages, tools: messages[-1].content)
    threads = [
        threading.Thread(target=model.complete, args=([LlmMessage("user", str(i))],))
        for i in range(20)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(int(c.last_user_text) for c in model.calls) == list(range(20))


# --- DemoModel -------------------------------------------------------------------


def test_demo_model_says_what_it_is_and_how_to_configure() -> None:
    tokens: list[str] = []
    response = DemoModel().complete(USER, tools=TOOLS, on_token=tokens.append)
    text = response.content
    assert "offline demo model" in text
    assert "OPENAI_API_KEY" in text and "OPENAI_BASE_URL" in text
    assert "What is a lane?" in text
    assert len(tokens) > 10 and "".join(tokens) == text
    assert response.tool_calls == () and response.finish_reason == "stop"
    assert DemoModel().complete(USER) == response  # deterministic


def test_demo_model_without_user_message_and_with_long_one() -> None:
    assert "offline demo model" in DemoModel().complete([]).content
    long = [LlmMessage("user", "word " * 100)]
    assert len(DemoModel(token_delay=0.0001).complete(long).content) < 400


LONG_GOAL = ("Research the history of the bicycle from the draisine of 1817 through the velocipede "
             "and the safety bicycle to today's electric cargo bikes")


def _quoted(text: str) -> str:
    return text.split("“", 1)[1].split("”", 1)[0]


def test_demo_model_cuts_what_it_quotes_after_a_whole_word() -> None:
    """The goals the demo gives marvin's workers, its workers' results and its echo of the
    user end in a whole word and an ellipsis, never in half a word."""
    plan = DemoModel().complete([LlmMessage("user", f"Plan this goal:\n{LONG_GOAL}")],
                                tools=[ToolSpec("marvin_plan", "")]).tool_calls[0]
    goals = [step["goal"] for step in json.loads(plan.arguments)["steps"]]
    assert goals == ["Gather the facts about: Research the history of the bicycle from the "
                     "draisine of 1817 through the…",
                     "Weigh the options and risks of: Research the history of the bicycle "
                     "from the draisine of 1817 through the…"]
    worker = DemoModel().complete([LlmMessage("system", "You work."),
                                   LlmMessage("user", LONG_GOAL)],
                                  tools=[ToolSpec("respond", "")]).tool_calls[0]
    echo = DemoModel().complete([LlmMessage("user", LONG_GOAL)]).content
    for text in (json.loads(worker.arguments)["message"], echo):
        shown = _quoted(text)
        assert shown.endswith("…") and len(shown) <= 80
        assert LONG_GOAL.startswith(shown[:-1]) and LONG_GOAL[len(shown) - 1] == " "
    assert _quoted(DemoModel().complete([LlmMessage("user", "x" * 100)]).content) == \
        "x" * 79 + "…"  # one word longer than the limit: cut inside it


# --- block_network ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        (("127.0.0.1", 80), True),
        (("127.8.9.10", 80), True),
        (("::1", 80, 0, 0), True),
        (("::ffff:127.0.0.1", 80, 0, 0), True),
        (("localhost", 80), True),
        ("/tmp/some.sock", True),
        (("10.0.0.1", 80), False),
        (("8.8.8.8", 53), False),
        (("2001:db8::1", 443, 0, 0), False),
        (("api.openai.com", 443), False),
    ],
)
def test_is_loopback(address: object, expected: bool) -> None:
    assert is_loopback(address) is expected


def test_non_loopback_connections_are_refused() -> None:
    with block_network(), socket.socket() as s:
        with pytest.raises(NetworkBlockedError, match="blocked in tests"):
            s.connect(("10.255.255.1", 80))
        with pytest.raises(NetworkBlockedError):
            s.connect_ex(("10.255.255.1", 80))
    with block_network(), pytest.raises(NetworkBlockedError, match="api.openai.com"):
        socket.create_connection(("api.openai.com", 443), timeout=1)


def test_loopback_connections_are_allowed() -> None:
    with block_network(), socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname(), timeout=1):
            conn, _ = listener.accept()
            conn.close()


def test_block_network_restores_what_was_there() -> None:
    before = (socket.socket.connect, socket.create_connection)
    with block_network():
        assert socket.socket.connect is not before[0]
    assert (socket.socket.connect, socket.create_connection) == before


def test_plugin_blocks_every_test_by_default() -> None:
    # No explicit block_network(): the autouse fixture of the plugin is active.
    assert socket.socket.connect is not REAL_CONNECT
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("192.0.2.1", 80), timeout=1)


@pytest.mark.allow_network
def test_allow_network_marker_opts_out() -> None:
    assert socket.socket.connect is REAL_CONNECT
    assert socket.create_connection is REAL_CREATE_CONNECTION


# --- factory ---------------------------------------------------------------------


def test_factory_without_endpoint_builds_the_demo_model() -> None:
    config = Config.from_env({})
    assert isinstance(build_chat_model(config), DemoModel)
    assert describe(config).startswith(
        "LLM: offline demo model (set OPENAI_API_KEY or OPENAI_BASE_URL"
    )


def test_factory_with_key_builds_the_openai_model_and_hides_the_key() -> None:
    key = "sk-very-secret-0000"
    config = Config.from_env(
        {"OPENAI_API_KEY": key, "VANCETOPE_LLM_MODEL": "gpt-x", "VANCETOPE_LLM_TIMEOUT": "7"}
    )
    model = build_chat_model(config)
    assert isinstance(model, OpenAiChatModel)
    assert (model.name, model.timeout, model.base_url) == (
        "gpt-x",
        7.0,
        "https://api.openai.com/v1",
    )
    assert describe(config) == "LLM: gpt-x at https://api.openai.com/v1"
    assert key not in repr(model)


def test_factory_with_base_url_only() -> None:
    config = Config.from_env({"OPENAI_BASE_URL": "http://u:secret@127.0.0.1:11434/v1"})
    assert isinstance(build_chat_model(config), OpenAiChatModel)
    assert describe(config) == "LLM: gpt-4o-mini at http://127.0.0.1:11434/v1"
