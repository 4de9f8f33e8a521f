"""The ``marvin-flow`` test model (``VT_TEST_MODEL=marvin-flow``), for
tests/integration/test_marvin_flow.py: Arthur starts marvin, marvin plans alpha, beta and
gamma, beta asks for more planning (delta), and every process's model calls are scripted.

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


def _kill_point(point: str) -> None:
    marker = _shared(f"reached-{point}")
    if marker.exists():
        return
    marker.write_text(str(os.getpid()))
    _wait(f"never-{point}")  # the test kills this process first


def _call(tool: str, **args: object) -> LlmResponse:
    return LlmResponse("", (ToolCall(f"c_{tool}", tool, json.dumps(args)),))


def marvin_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    names = {t.name for t in tools}
    last = messages[-1].content
    if "process_create" in names:
        return _arthur(messages)
    if "marvin_plan" in names:
        if "Findings so far" in last:
            _log("start", "marvin plan-sub")
            _kill_point("plan")
            _log("end", "marvin plan-sub")
            return _call("marvin_plan", steps=[{"goal": "delta"}], aggregate="Go deeper.")
        return _call("marvin_plan", steps=[{"goal": g} for g in ("alpha", "beta", "gamma")],
                     aggregate="Combine.")
    if "marvin_aggregate" in names:
        point = "subaggregate" if "Findings so far" in last else "aggregate"
        _log("start", f"marvin {point}")
        _kill_point(point)
        _log("end", f"marvin {point}")
        ids = re.findall(r'"id": "(n\d+)"', last)
        return _call("marvin_aggregate", summary=f"Synthesis of {', '.join(ids)}.",
                     result={"steps": ids})
    return _worker(re.search(r"Your step: (\w+)", messages[0].content).group(1))  # type: ignore[union-attr]


def _worker(step: str) -> LlmResponse:
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
        return _call("respond", message="started", awaiting_user_input=False)
    if last.content == "go":
        return _call("process_create", recipe="marvin", name="deep", goal=GOAL)
    found = re.search(r'type="done">(.*?)(?:<payload>|</process-event>)', last.content,
                      re.DOTALL)
    return _call("respond", awaiting_user_input=False,
                 message=f"Marvin reports: {found.group(1).strip()}" if found else "noted")
