"""``VT_TEST_MODEL=journal-flow``: a worker (recipe ``journaled``) sends a message, then
charges a card; the charge SIGKILLs the worker process the first time it runs — after its
effect, before anything is recorded — so the turn's next attempt, on another worker, finds
the charge in doubt. Importing this module registers the two side-effecting server tools.

Every tool invocation and every model call of the worker is appended as one line to
``VT_TEST_TOOL_LOG`` (``<what> <pid>``); ``VT_TEST_KILL_ONCE`` is the marker file whose
absence makes the charge kill its worker.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.integration.turnlog import append_line
from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec
from vancetope_brain.tools import server_tool

OBJECT = {"type": "object"}


def note(what: str) -> None:
    append_line(os.environ["VT_TEST_TOOL_LOG"], f"{what} {os.getpid()}")


@server_tool(ToolSpec("journal_send", "sends a message", OBJECT))
def journal_send(context: object, to: str) -> dict[str, str]:
    note(f"send:{to}")
    return {"sent": to}


@server_tool(ToolSpec("journal_charge", "charges a card", OBJECT))
def journal_charge(context: object, amount: int) -> dict[str, int]:
    note(f"charge:{amount}")
    marker = Path(os.environ["VT_TEST_KILL_ONCE"])
    if not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return {"charged": amount}


def _call(name: str, **args: object) -> LlmResponse:
    return LlmResponse("", (ToolCall(f"c_{name}", name, json.dumps(args)),))


def _respond(message: str) -> LlmResponse:
    return LlmResponse("", (ToolCall("r", "respond", json.dumps(
        {"message": message, "awaiting_user_input": False})),))


def journal_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse | str:
    if not any(t.name == "journal_send" for t in tools):  # the session's ford chat
        return "ok"
    last = messages[-1]
    if last.role != "tool":
        if last.content.startswith("<inbox-answer"):
            note("model:answer")
            return _call("journal_charge", amount=5)
        note("model:goal")
        return _call("journal_send", to="ada")
    result = json.loads(last.content)
    if "error" in result:
        note("model:held")
        return _respond("held back: " + result["error"].split(":")[0])
    if "sent" in result["result"]:
        note("model:sent")
        return _call("journal_charge", amount=5)
    note("model:charged")
    return _respond("charged")
