"""The scripted model of ``VT_TEST_MODEL=nest-flow`` (tests/integration/test_nesting_flow.py):
four levels, Arthur → vogon → marvin → ford. Told "plan <goal>", Arthur starts a vogon whose
inline strategy has one phase on the recipe ``marvin``; marvin plans a USER_INPUT step (the
question travels up: marvin and vogon BLOCKED, Arthur asks the user) and then one WORKER
step (recipe ``marvin-worker``, a ford). Told "answer: <text>", Arthur forwards the text to
the vogon that relayed the question (``process_steer``; vogon relays it to marvin, which
starts the ford). The ford touches ``VT_TEST_STARTED`` and thinks until ``VT_TEST_RELEASE``
exists, so the whole chain stays open while the test acts; then it asks a question of its
own (BLOCKED), so a stop that waited for its turn still finds it open. Told "stop it",
Arthur lists the processes and calls ``process_stop`` on the vogon; any other
``<process-event>`` it repeats as ``heard <type>: <summary>``. Vogon calls no model; every
other model call is logged to ``VT_TEST_LOG`` as ``call <pid> <time> <role>``."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from tests.integration.turnlog import log
from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec

LIMIT = 120.0  # a forgotten release file must not hang a worker forever
STRATEGY = {"name": "nested", "phases": [
    {"name": "think", "recipe": "marvin", "goal": "Think through {{ input }}"}]}
QUESTION = "Which market do you mean?"


def _call(tool: str, **args: object) -> LlmResponse:
    return LlmResponse("", (ToolCall(f"c_{tool}", tool, json.dumps(args)),))


def _respond(message: str, awaiting: bool = False) -> LlmResponse:
    return _call("respond", message=message, awaiting_user_input=awaiting)


def nest_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    names = {t.name for t in tools}
    if "process_create" in names:
        log("call", "arthur")
        return _arthur(messages)
    if "marvin_plan" in names:
        log("call", "marvin")
        return _call("marvin_plan", aggregate="Combine the findings.", steps=[
            {"kind": "USER_INPUT", "goal": QUESTION},
            {"kind": "WORKER", "goal": "Gather the facts"}])
    log("call", "ford")
    Path(os.environ["VT_TEST_STARTED"]).touch()
    deadline = time.monotonic() + LIMIT
    while not os.path.exists(os.environ["VT_TEST_RELEASE"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    return _respond("Which sources may I use?", awaiting=True)


def _arthur(messages: list[LlmMessage]) -> LlmResponse:
    last = messages[-1]
    if last.role == "tool":
        listed = json.loads(last.content).get("result")
        if isinstance(listed, list):  # the processes, asked for to stop the vogon
            return _call("process_stop", processId=next(
                p["processId"] for p in listed if p["name"] == "v"))
        return _respond("Done that.")
    if last.content.startswith("plan "):
        return _call("process_create", recipe="vogon", name="v",
                     goal=last.content.removeprefix("plan "), params={"strategy": STRATEGY})
    if last.content.startswith("answer: "):  # forwarded to the vogon that relayed the question
        asked = [re.search(r'sourceProcessId="([^"]+)"[^>]* type="blocked"', m.content)
                 for m in messages]
        return _call("process_steer", processId=[m.group(1) for m in asked if m][-1],
                     message=last.content.removeprefix("answer: "))
    if last.content == "stop it":
        return _call("process_list")
    if 'type="blocked"' in last.content:
        return _respond(QUESTION, awaiting=True)
    event = re.search(r'type="(\w+)">(.*?)(<payload>|</process-event>)', last.content, re.DOTALL)
    return _respond(f"heard {event.group(1)}: {event.group(2).strip()}" if event else "?")
