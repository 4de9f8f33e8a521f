"""Building a turn's inspector record (``engines/inspector.py``): the exact model input and
output, tool calls with their outcome, tokens and timings; a tool loop's repeated input kept
once; texts cut visibly to the caps, the newest input and every output kept first; a long
chat's input kept to its system messages and newest messages, whatever its length; secrets
redacted, also where a cut would have split them."""

from __future__ import annotations

import json

from vancetope_brain.engines.inspector import TurnSteps, inspect
from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec
from vancetope_brain.models import ProcessStatus, ThinkProcess, utcnow
from vancetope_brain.models.inspector import (
    MAX_INPUT_MESSAGES,
    MAX_TEXT_CHARS,
    MAX_TURN_CHARS,
    REDACTED,
    ModelStep,
    ToolStep,
)
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.models.usage import CallUsage, UsageSource
from vancetope_brain.tools import ToolOutcome
from vancetope_gateway.admin_inspect import _inspected_lines

KEY = "profile-key-0123456789abcdef"
PROCESS = ThinkProcess(id="proc_1", tenant_id="acme", session_id="ses_1", user_id="ada",
                       name="main", engine="arthur", engine_version="1", epoch=4)
SPAWN = ToolSpec("process_create", "Start a worker",
                 {"type": "object", "properties": {"goal": {"type": "string"}}})


def _record(steps: TurnSteps, secrets: frozenset[str] = frozenset({KEY})):
    now = utcnow()
    return inspect(steps, turn_id="turn_1", process=PROCESS, lifecycle="on_message",
                   profile="strong", started_at=now, ended_at=now,
                   status_after=ProcessStatus.IDLE, chat_ids=["chat_1"], secrets=secrets)


def _usage(tokens_in: int = 10) -> CallUsage:
    return CallUsage("m1", tokens_in, 2, UsageSource.PROVIDER)


def test_a_delegating_tool_loop_is_recorded_step_by_step_its_input_kept_once() -> None:
    steps = TurnSteps()
    first = [LlmMessage("system", "You are Arthur."), LlmMessage("user", "Analyze Q3")]
    call = ToolCall("c1", "process_create", '{"goal": "Analyze Q3"}')
    steps.model(steps.began, first, [SPAWN], LlmResponse("", (call,), "tool_calls", "m1"),
                _usage())
    steps.tool(steps.began, "process_create", {"goal": "Analyze Q3"},
               ToolOutcome(ToolCallStatus.SUCCESS, {"processId": "proc_2"}))
    second = [*first, LlmMessage("assistant", tool_calls=(call,)),
              LlmMessage("tool", '{"processId": "proc_2"}', tool_call_id="c1")]
    steps.model(steps.began, second, [SPAWN], LlmResponse("I started a worker."), _usage(30))
    record = _record(steps)
    model, tool, again = record.steps
    assert isinstance(model, ModelStep) and isinstance(tool, ToolStep)
    assert isinstance(again, ModelStep)
    assert [(m.role, m.content) for m in model.messages] == [
        ("system", "You are Arthur."), ("user", "Analyze Q3")]
    assert model.tools == ["process_create"] and model.output.tool_calls[0].name == \
        "process_create"
    assert (tool.name, tool.outcome, json.loads(tool.arguments), json.loads(tool.result)) == (
        "process_create", "SUCCESS", {"goal": "Analyze Q3"}, {"processId": "proc_2"})
    assert again.shared == 2 and [m.role for m in again.messages] == ["assistant", "tool"]
    assert again.messages[1].tool_call_id == "c1"
    assert again.output.content == "I started a worker."
    assert (record.tokens_in, record.tokens_out, record.model, record.profile) == (
        40, 4, "m1", "strong")
    assert [t.name for t in record.tools] == ["process_create"]
    assert json.loads(record.tools[0].parameters) == SPAWN.parameters
    assert (record.step_count, record.cut_chars, record.chat_ids) == (3, 0, ["chat_1"])
    assert all(s.at_ms >= 0 and s.duration_ms >= 0 for s in record.steps)


def test_an_input_list_the_engine_grows_afterwards_is_recorded_as_it_was_sent() -> None:
    steps = TurnSteps()
    messages = [LlmMessage("system", "You are Arthur."), LlmMessage("user", "Analyze Q3")]
    call = ToolCall("c1", "process_create", "{}")
    steps.model(steps.began, messages, [SPAWN], LlmResponse("", (call,)), _usage())
    messages += [LlmMessage("assistant", tool_calls=(call,)),
                 LlmMessage("tool", "{}", tool_call_id="c1")]  # a tool loop, in place
    steps.model(steps.began, messages, [SPAWN], LlmResponse("Done."), _usage())
    first, second = _record(steps).steps
    assert isinstance(first, ModelStep) and isinstance(second, ModelStep)
    assert [m.role for m in first.messages] == ["system", "user"]
    assert second.shared == 2 and [m.role for m in second.messages] == ["assistant", "tool"]


def test_a_failed_tool_call_shows_its_error() -> None:
    steps = TurnSteps()
    steps.tool(steps.began, "search", {"q": "x"}, ToolOutcome.failed("server DOWN"))
    [tool] = _record(steps).steps
    assert isinstance(tool, ToolStep) and (tool.outcome, tool.result) == ("ERROR", "server DOWN")


def test_secrets_are_redacted_everywhere_even_where_a_cut_falls_inside_one() -> None:
    steps = TurnSteps()
    token = "vt_" + "Q" * 43
    cut_inside = "x" * (MAX_TEXT_CHARS - 5) + KEY  # the cap falls 5 characters into the key
    messages = [LlmMessage("system", f"key {KEY}"), LlmMessage("user", cut_inside),
                LlmMessage("user", f"my token {token} and sk-abcdefghijklmnopqrstuvwx")]
    steps.model(steps.began, messages, [], LlmResponse(f"echo {KEY}"), _usage())
    steps.tool(steps.began, "t", {"key": KEY}, ToolOutcome(ToolCallStatus.SUCCESS, KEY))
    record = _record(steps)
    text = record.model_dump_json()
    assert KEY not in text
    model = record.steps[0]
    assert isinstance(model, ModelStep)
    assert model.messages[1].content.endswith("x[reda…[23 characters cut]")  # not "profi"
    assert token not in text and "sk-abcdefghijklmnopqrstuvwx" not in text
    assert text.count(REDACTED) >= 5


def test_texts_are_cut_visibly_to_the_caps_the_newest_input_and_outputs_kept_first() -> None:
    steps = TurnSteps()
    old = [LlmMessage("user", f"{n}" * MAX_TEXT_CHARS) for n in range(12)]
    history = [LlmMessage("system", "You are Arthur."), *old, LlmMessage("user", "newest")]
    steps.model(steps.began, history, [], LlmResponse("o" * (MAX_TEXT_CHARS + 10)), _usage())
    record = _record(steps, frozenset())
    [step] = record.steps
    assert isinstance(step, ModelStep)
    assert step.output.content.endswith("…[10 characters cut]")
    assert step.messages[0].content == "You are Arthur." and step.messages[-1].content == \
        "newest"
    kept = [len(m.content) for m in step.messages[1:-1]]
    assert kept[-1] > kept[0]  # the oldest lines are the ones cut away
    assert step.messages[1].content.startswith("…[") or "characters cut" in \
        step.messages[1].content
    assert record.cut_chars > 0
    total = sum(len(m.content) for m in step.messages) + len(step.output.content)
    assert total <= MAX_TURN_CHARS + 20 * len(step.messages) + 40


def test_steps_past_the_cap_are_counted_not_kept() -> None:
    steps = TurnSteps()
    for n in range(205):
        steps.tool(steps.began, "t", {"n": n}, ToolOutcome(ToolCallStatus.SUCCESS, n))
    record = _record(steps)
    assert (record.step_count, record.dropped_steps) == (200, 5)


def test_a_long_chats_input_keeps_its_system_messages_and_newest_messages_and_counts_the_rest(
        ) -> None:
    """A record does not grow with the chat: of a 1,000-line chat's input it keeps the
    prompt and the summary (the leading system messages) and the newest
    ``MAX_INPUT_MESSAGES`` lines, and says how many it left out; a tool loop's next call
    still shares the whole input by identity."""
    lead = [LlmMessage("system", "You are Arthur."), LlmMessage("system", "Summary so far.")]
    chat = [LlmMessage("user" if n % 2 else "assistant", f"line {n}") for n in range(1000)]
    call = ToolCall("c1", "process_create", "{}")
    steps = TurnSteps()
    steps.model(steps.began, [*lead, *chat], [SPAWN], LlmResponse("", (call,)), _usage())
    grown = [*lead, *chat, LlmMessage("assistant", tool_calls=(call,)),
             LlmMessage("tool", "{}", tool_call_id="c1")]
    steps.model(steps.began, grown, [SPAWN], LlmResponse("Done."), _usage())
    first, second = _record(steps).steps
    assert isinstance(first, ModelStep) and isinstance(second, ModelStep)
    assert first.omitted == 1000 - MAX_INPUT_MESSAGES
    assert [m.content for m in first.messages] == [
        "You are Arthur.", "Summary so far.",
        *(f"line {n}" for n in range(1000 - MAX_INPUT_MESSAGES, 1000))]
    assert (second.shared, second.omitted) == (1002, 0)
    assert [m.role for m in second.messages] == ["assistant", "tool"]
    shown = _inspected_lines(_record(steps))  # ``vancetope admin inspect`` says where
    gap = shown.index(f"    … {1000 - MAX_INPUT_MESSAGES} earlier messages not kept in the "
                      "record")
    assert shown[gap - 2:gap] == ["    system:", "      Summary so far."]
    assert shown[gap + 1:gap + 3] == ["    assistant:",
                                      f"      line {1000 - MAX_INPUT_MESSAGES}"]


def test_a_short_input_is_kept_whole() -> None:
    steps = TurnSteps()
    messages = [LlmMessage("system", "You are Arthur."),
                *(LlmMessage("user", f"line {n}") for n in range(MAX_INPUT_MESSAGES))]
    steps.model(steps.began, messages, [], LlmResponse("ok"), _usage())
    [step] = _record(steps).steps
    assert isinstance(step, ModelStep) and step.omitted == 0
    assert len(step.messages) == MAX_INPUT_MESSAGES + 1
