"""The model of ``VT_TEST_MODEL=poison`` (tests/chaos/test_faults_of_a_turn.py): echoes like
``echo``, but a turn whose input holds a user message that is exactly ``POISON`` SIGKILLs
its own worker process, every time — a message that kills whoever runs it."""

from __future__ import annotations

import os
import signal

from tests.integration.turnlog import log
from vancetope_brain.llm import LlmMessage, ToolSpec

MARKER = "POISON"


def poison_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> str:
    users = [m.content for m in messages if m.role == "user"]
    if MARKER in users:
        log("kill", os.getpid())
        os.kill(os.getpid(), signal.SIGKILL)
    return f"echo: {users[-1]}"
