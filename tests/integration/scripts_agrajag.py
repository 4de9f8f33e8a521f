"""The scripted model of ``VT_TEST_MODEL=agrajag-flow`` (tests/integration/test_agrajag_flow.py).

- A ford worker calls the tool its goal names (``call echo__fail``: the test MCP server's
  unclassifiable failure; ``call echo__sleep``) once, then responds with the tool names it
  was offered, so the test sees what the manifest held: ``offered: a, b, …``.
- agrajag (offered ``tool_probe``) first waits until ``VT_TEST_RELEASE`` exists (the test
  lets it go once every user turn has failed: they all hit the tool while it runs), tries a
  MUTATING probe (``echo__add``, refused by the dispatcher), probes ``echo__echo``, then
  responds; offered ``tool_health_write`` it gives the verdict DOWN for the failing tool.
"""

from __future__ import annotations

import json
import os
import re
from xml.sax.saxutils import unescape

from tests.integration.worker_main import wait_for_file
from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec


def _call(call_id: str, name: str, **args: object) -> LlmResponse:
    return LlmResponse("", (ToolCall(call_id, name, json.dumps(args)),))


def agrajag_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    names = {t.name for t in tools}
    results = [m for m in messages if m.role == "tool"]
    if "tool_health_write" in names:
        job = json.loads(unescape(re.search(r"<job>(.*?)</job>", messages[1].content).group(1)))
        return _call("v", "tool_health_write", server=job["server"], tool=job["tool"],
                     state="DOWN", reason="echo answers probes; fail fails every call",
                     recheckAfterSec=3600)
    if "tool_probe" in names:
        if not results:
            wait_for_file(os.environ["VT_TEST_RELEASE"])
            return _call("p1", "tool_probe", tool="echo__add", arguments={"a": 1, "b": 2})
        if len(results) == 1:
            return _call("p2", "tool_probe", tool="echo__echo", arguments={"text": "ping"})
        return _call("r", "respond", message="add was refused; echo answers",
                     awaiting_user_input=False)
    goal = next(m.content for m in messages if m.role == "user")
    if not results:
        tool = goal.removeprefix("call ").strip()
        arguments = {"seconds": 0} if tool.endswith("sleep") else {}
        return _call("c", tool, **arguments)
    offered = ", ".join(sorted(names - {"respond"}))
    return _call("r", "respond", message=f"offered: {offered}; got: {results[-1].content}",
                 awaiting_user_input=False)
