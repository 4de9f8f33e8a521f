"""The offline demo model's part in agrajag (``vancetope_brain.engines.agrajag``), so a
server without an LLM endpoint diagnoses an ambiguous tool failure end to end.

Probe phase (offered ``tool_probe``): the first time, it probes the first tool the brief's
``<probes>`` lists (the failing server's SAFE_PROBE tools come first) with sample
arguments built from its schema; once the probe's result is in, it responds with what it
saw. Verdict phase (offered ``tool_health_write``): the server answered the probe → the
failing tool is DEGRADED (the server works, the tool failed in a way no rule explains); it
did not → the server is DOWN; nothing to probe → DEGRADED, with that reason.

To let a demo user meet a failing tool at all, a worker (offered ``respond``, not
``process_create``) whose goal says ``call <tool>`` of a tool it is offered calls it once
with sample arguments and then reports the outcome (``named_tool_call``).
"""

from __future__ import annotations

import json
import re
from typing import Any
from xml.sax.saxutils import unescape

from vancetope_brain.llm.base import LlmMessage, ToolCall, ToolSpec

PROBE = "tool_probe"
VERDICT = "tool_health_write"
_CALL = re.compile(r"\bcall ([A-Za-z0-9_-]+)")
_JOB = re.compile(r"<job>(.*?)</job>", re.DOTALL)
_PROBES = re.compile(r"<probes>(.*?)</probes>", re.DOTALL)
NOTHING = "there was nothing to probe"
ANSWERS = "the server answers"
_SAMPLES: dict[str, Any] = {"string": "ping", "integer": 1, "number": 1, "boolean": True,
                            "array": [], "object": {}}


def agrajag_call(messages: list[LlmMessage], tools: set[str]) -> ToolCall | None:
    """The demo's probe or verdict call, or None when agrajag is not asking."""
    if VERDICT in tools:
        return _verdict(messages)
    if PROBE not in tools:
        return None
    results = [m for m in messages if m.role == "tool"]
    probes = _listed(messages, _PROBES) or []
    if not results and probes:
        first = probes[0]
        return ToolCall("demo_probe", PROBE, json.dumps(
            {"tool": first["name"], "arguments": sample_arguments(first.get("parameters"))}))
    seen = _probe_seen(results[-1].content) if results else NOTHING
    return ToolCall("demo_respond", "respond", json.dumps(
        {"message": f"Offline demo model: {seen}.", "awaiting_user_input": False}))


def named_tool_call(messages: list[LlmMessage], tools: list[ToolSpec]) -> ToolCall | None:
    """A demo worker's call of the tool its goal names, or its report once the call is done."""
    names = {t.name for t in tools}
    if "respond" not in names or "process_create" in names:
        return None
    goal = next((m.content for m in messages if m.role == "user"), "")
    wanted = _CALL.search(goal)
    spec = next((t for t in tools if wanted and t.name == wanted.group(1)), None)
    if spec is None:
        return None
    results = [m for m in messages if m.role == "tool"]
    if not results:
        return ToolCall("demo_call", spec.name, json.dumps(sample_arguments(spec.parameters)))
    return ToolCall("demo_respond", "respond", json.dumps(
        {"message": f"Offline demo model: {spec.name} answered {results[-1].content[:300]}",
         "awaiting_user_input": False}))


def sample_arguments(schema: Any) -> dict[str, Any]:
    """Arguments for a probe: a sample value for each required property."""
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties") or {}
    return {name: _SAMPLES.get(str((properties.get(name) or {}).get("type")), "ping")
            for name in schema.get("required") or []}


def _verdict(messages: list[LlmMessage]) -> ToolCall:
    job = _listed(messages, _JOB) or {}
    server = str(job.get("server") or "unknown")
    tool = job.get("tool")
    # The verdict call sees the probe phase's reply (what the probes showed), not its steps.
    seen = next((m.content for m in reversed(messages) if m.role == "assistant"), "")
    if NOTHING in seen or not seen:
        state, reason, subject = "DEGRADED", "no SAFE_PROBE tool to probe it with", tool
    elif ANSWERS in seen:
        state, subject = "DEGRADED", tool
        reason = ("its server answers probes, but the tool failed in a way no rule explains "
                  f"({str(job.get('error') or '')[:200]})")
    else:
        state, reason, subject = "DOWN", "its server did not answer a probe", None
    return ToolCall("demo_verdict", VERDICT, json.dumps(
        {"server": server, "tool": subject, "state": state,
         "reason": f"{reason} (offline demo model's verdict)"}))


def _listed(messages: list[LlmMessage], pattern: re.Pattern[str]) -> Any:
    for message in messages:
        if message.role == "user" and (found := pattern.search(message.content)):
            try:
                return json.loads(unescape(found.group(1)))  # as ``tagged`` escaped it
            except ValueError:
                return None
    return None


def _probe_seen(content: str) -> str:
    try:
        body = json.loads(content)
    except ValueError:
        return f"the probe answered {content[:200]}"
    result = body.get("result") if isinstance(body, dict) else None
    if isinstance(result, dict) and str(result.get("status")).upper() == "SUCCESS":
        return f"the probe {result.get('tool')} succeeded, so {ANSWERS}"
    error = (result or {}).get("error") if isinstance(result, dict) else body.get("error")
    return f"the probe failed ({str(error)[:200]}), so the server does not answer"
