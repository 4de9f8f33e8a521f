"""The scripted model of ``VT_TEST_MODEL=vogon-flow``: Arthur starts a vogon on the strategy
in the user's message (``run <json params>``) and repeats what it hears; every phase worker
answers ``out(<its goal>)`` after a short pause, so a test can kill workers mid-phase."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec

WORK_SECONDS = 0.3
HOLD_LIMIT = 120.0  # a forgotten release file must not hang a worker forever


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


def hold_vogon_turns(directory: str) -> None:
    """``VT_TEST_VOGON_HOLD=<dir>``: a vogon steer turn that has evaluated its K-th gate
    (``strategyState.history`` of length K) stops right *before* its commit, touches
    ``<dir>/hK.held`` and waits for ``<dir>/hK.release``, so a test can SIGKILL the worker
    with the turn undone (its drained message still pending). Each K is held once."""
    from vancetope_brain.store import LaneStore
    from vancetope_brain.store.sqlite import SqliteBackend

    lanes = SqliteBackend.adapters[LaneStore]
    commit_turn = lanes.commit_turn
    root = Path(directory)

    def held(self, tenant_id, process_id, epoch, commit):  # type: ignore[no-untyped-def]
        state = (commit.engine_state or {}).get("strategyState")
        if state and commit.drained_ids:
            key = f"h{len(state['history'])}"
            if not (root / f"{key}.held").exists():
                (root / f"{key}.held").touch()
                deadline = time.monotonic() + HOLD_LIMIT
                while not (root / f"{key}.release").exists() and time.monotonic() < deadline:
                    time.sleep(0.005)
        return commit_turn(self, tenant_id, process_id, epoch, commit)

    lanes.commit_turn = held
