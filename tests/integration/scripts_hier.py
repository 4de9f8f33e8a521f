"""The scripted model of ``VT_TEST_MODEL=hier-flow`` (tests/integration/test_hierarchy_flow.py):
Arthur delegates to a sub-Arthur (``process_create(engine="arthur")`` → recipe
``arthur-sub``), which starts two ford workers at once and, once both reported, combines
their results. When the sub-Arthur combines it touches ``VT_TEST_STARTED`` and takes
``VT_TEST_DELAY`` seconds, so the test can SIGKILL the worker in that turn."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec


def _respond(message: str) -> LlmResponse:
    return LlmResponse("", (ToolCall("r", "respond", json.dumps(
        {"message": message, "awaiting_user_input": False})),))


def _create(call_id: str, **args: str) -> ToolCall:
    return ToolCall(call_id, "process_create", json.dumps(args))


def hier_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    last = messages[-1]
    if not any(t.name == "process_create" for t in tools):  # a ford part: its goal, done
        goal = next(m.content for m in messages if m.role == "user")
        return _respond(f"{goal}: done")
    done = [m.content for m in messages if m.role == "user" and 'type="done"' in m.content]
    if "You are a Sub-Arthur" in messages[0].content:
        if last.role == "tool":
            return _respond("Started part-a and part-b.")
        if len(done) >= 2:
            Path(os.environ["VT_TEST_STARTED"]).touch()
            time.sleep(float(os.environ.get("VT_TEST_DELAY", "0")))
            return _respond("Combined: " + " + ".join(sorted(
                "part A" if "part A" in d else "part B" for d in done)))
        if done:
            return _respond("Waiting for the other part.")
        return LlmResponse("", (_create("a", recipe="ford", name="part-a", goal="part A"),
                                _create("b", recipe="ford", name="part-b", goal="part B")))
    if last.role == "tool":
        return _respond("Started the sub-coordinator.")
    if done:
        summary = done[-1].split(">", 1)[1].split("</process-event>", 1)[0]
        return _respond(f"The report: {summary}")
    return LlmResponse("", (_create("s", engine="arthur", name="sub",
                                    goal="Write the report in two parts"),))
