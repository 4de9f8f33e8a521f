"""The scripted model of ``VT_TEST_MODEL=vogon-flow``: Arthur starts a vogon on the strategy
in the user's message (``run <json params>``) and repeats what it hears; every phase worker
answers ``out(<its goal>)`` after a short pause, so a test can kill workers mid-phase."""

from __future__ import annotations

import json
import re
import time

from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec

WORK_SECONDS = 0.3


def _respond(message: str) -> LlmResponse:
    return LlmResponse("", (ToolCall("r", "respond", json.dumps(
        {"message": message, "awaiting_user_input": False})),))


def vogon_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    last = messages[-1]
    if not any(t.name == "process_create" for t in tools):  # a phase worker
        time.sleep(WORK_SECONDS)
        goal = next(m.content for m in messages if m.role == "user")
        return _respond(f"out({goal})")
    if last.role == "tool":
        return _respond("started")
    if last.content.startswith("run "):
        return LlmResponse("", (ToolCall("c", "process_create", json.dumps(
            {"recipe": "vogon", "name": "v", "goal": "the launch",
             "params": json.loads(last.content.removeprefix("run "))})),))
    event = re.search(r'type="(\w+)">(.*?)(<payload>|</process-event>)', last.content, re.DOTALL)
    return _respond(f"heard {event.group(1)}: {event.group(2).strip()}" if event else "ok")
