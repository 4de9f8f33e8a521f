"""The ``marvin-flow`` test model (``VT_TEST_MODEL=marvin-flow``), for
tests/integration/test_marvin_flow.py. Told "go", Arthur starts marvin, marvin plans alpha,
beta and gamma, beta asks for more planning (delta). Told "go ask", "go bad" or "go wide",
Arthur starts marvin on the goal of that case: a plan with a question for the user (which
Arthur relays, and whose answer "answer: …" it forwards with process_steer), plan output
that stays invalid, or a plan wider and deeper than the limits.

Coordination goes through files in ``VT_TEST_MARVIN_DIR`` shared by all worker processes:

``started-<step>``
    touched when a worker's model call for the step begins. alpha and beta each wait for
    the other's (so they provably overlap), beta also for gamma's (so alpha's report is
    committed, and gamma spawned, before beta reports); gamma waits for ``release-gamma``.
``reached-<point>``
    the first model call at a kill point (``plan``: the plan beta asked for,
    ``subaggregate``: its aggregate, while gamma still runs, ``aggregate``: the root's)
    writes its OS pid here and hangs until the test SIGKILLs it; later calls go on.

Each call is logged to ``VT_TEST_LOG`` as ``start``/``end`` lines (worker_main's format).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec

LIMIT = 60.0  # a barrier that is never met must fail the test, not hang a worker forever
GOAL = "Research the widget market"
CASES = {"ask": "Pick a region", "bad": "Plan the impossible", "wide": "Survey everything"}


def _log(kind: str, detail: str) -> None:
    fd = os.open(os.environ["VT_TEST_LOG"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{kind} {os.getpid()} {time.time():.6f} {detail}".encode() + b"\n")
    finally:
        os.close(fd)


def _shared(name: str) -> Path:
    return Path(os.environ["VT_TEST_MARVIN_DIR"]) / name


def _wait(name: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not _shared(name).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} did not appear within {LIMIT}s")
        time.sleep(0.01)


def _kill_point(point: str, active: bool) -> None:
    marker = _shared(f"reached-{point}")
    if not active:
        return
    if marker.exists():  # a later turn at this point: held while the test reads the tree
        deadline = time.monotonic() + LIMIT
        while _shared(f"hold-{point}").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return
    marker.write_text(str(os.getpid()))
    _wait(f"never-{point}")  # the test kills this process first


def _call(tool: str, **args: object) -> LlmResponse:
    return LlmResponse("", (ToolCall(f"c_{tool}", tool, json.dumps(args)),))


def marvin_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    names = {t.name for t in tools}
    # The first user message says what to do; a repair request comes after it.
    last = next((m.content for m in messages if m.role == "user"), "")
    main = GOAL in messages[0].content  # only the main flow has kill points
    if "process_create" in names:
        return _arthur(messages)
    if "marvin_plan" in names:
        if CASES["bad"] in last:
            return LlmResponse("this is not a plan")
        if CASES["ask"] in last:
            return _call("marvin_plan", aggregate="Combine.", steps=[
                {"goal": "one"}, {"kind": "USER_INPUT", "goal": "Which region matters?"},
                {"goal": "two"}])
        if CASES["wide"] in last:
            return _call("marvin_plan", aggregate="Combine.",
                         steps=[{"goal": f"wide{i}"} for i in range(6)])
        if "Findings so far" in last:
            _log("start", "marvin plan-sub")
            _kill_point("plan", main)
            _log("end", "marvin plan-sub")
            return _call("marvin_plan", steps=[{"goal": "delta"}], aggregate="Go deeper.")
        return _call("marvin_plan", steps=[{"goal": g} for g in ("alpha", "beta", "gamma")],
                     aggregate="Combine.")
    if "marvin_aggregate" in names:
        point = "subaggregate" if "Findings so far" in last else "aggregate"
        _log("start", f"marvin {point}")
        _kill_point(point, main)
        _log("end", f"marvin {point}")
        ids = re.findall(r'"id": "(n\d+)"', last)
        return _call("marvin_aggregate", summary=f"Synthesis of {', '.join(ids)}.",
                     result={"steps": ids})
    step = re.search(r"Your step: (\w+)", messages[0].content)
    assert step is not None, "not a marvin-worker prompt"
    return _worker(step.group(1), messages[0].content)


def _worker(step: str, goal: str) -> LlmResponse:
    if step in ("one", "two") or step.startswith("wide"):
        return _call("respond", awaiting_user_input=False, message=json.dumps({
            "summary": f"{step} found" + (" for EMEA" if "→ EMEA" in goal else ""),
            "needsPlanning": step.startswith("wide"), "followUps": ["deeper"]}))
    _log("start", f"worker {step}")
    _shared(f"started-{step}").touch()
    if step == "alpha":
        _wait("started-beta")
    elif step == "beta":
        _wait("started-alpha")
        _wait("started-gamma")
    elif step == "gamma":
        _wait("release-gamma")
    _log("end", f"worker {step}")
    return _call("respond", awaiting_user_input=False, message=json.dumps({
        "summary": f"{step} found", "result": {"step": step},
        "needsPlanning": step == "beta", "followUps": ["delta"] if step == "beta" else []}))


def _arthur(messages: list[LlmMessage]) -> LlmResponse:
    last = messages[-1]
    if last.role == "tool":
        return _call("respond", awaiting_user_input=False,
                     message="forwarded" if '"ok": true' in last.content else "started")
    if last.content == "go":
        return _call("process_create", recipe="marvin", name="deep", goal=GOAL)
    if last.content.startswith("go "):
        return _call("process_create", recipe="marvin", name="deep",
                     goal=CASES[last.content.removeprefix("go ")])
    if last.content.startswith("answer: "):
        asked = re.findall(r'sourceProcessId="([^"]+)"[^>]* type="blocked"',
                           "".join(m.content for m in messages))
        return _call("process_steer", processId=asked[-1],
                     message=last.content.removeprefix("answer: "))
    found = re.search(r'type="(done|failed|blocked)">(.*?)(?:<payload>|</process-event>)',
                      last.content, re.DOTALL)
    if found is None:
        return _call("respond", awaiting_user_input=False, message="noted")
    kind, summary = found.group(1), found.group(2).strip()
    text = {"done": "Marvin reports", "failed": "Marvin failed", "blocked": "Marvin asks"}[kind]
    return _call("respond", awaiting_user_input=kind == "blocked", message=f"{text}: {summary}")
