"""The ``zaphod-flow`` test model of ``worker_main``: Arthur starts a council, three heads
answer at the same time (each waits until all three have started, so they can only finish
when they run in parallel), the skeptic's model fails, and the synthesizer sums up."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from tests.integration.turnlog import log
from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec

QUESTION = "Should we adopt the four-day week?"
CRASH = " (the first synthesizer call hangs until its worker is killed)"
HEADS = 3
BARRIER_LIMIT = 30.0


def _call(tool: str, **args: object) -> LlmResponse:
    return LlmResponse("", (ToolCall(f"c-{tool}", tool, json.dumps(args)),))


def _head(persona: str) -> LlmResponse:
    log("head-start", persona)
    # Every worker's log is <tmp>/<worker>/turns.log: the barrier lives in <tmp>/heads.
    barrier = Path(os.environ["VT_TEST_LOG"]).parent.parent / "heads"
    barrier.mkdir(exist_ok=True)
    (barrier / persona).touch()
    deadline = time.monotonic() + BARRIER_LIMIT
    while len(list(barrier.iterdir())) < HEADS and time.monotonic() < deadline:
        time.sleep(0.01)
    log("head-end", persona)
    if persona == "skeptic":
        raise RuntimeError("the skeptic's model crashed")
    return _call("respond", message=f"The {persona} says: yes, with a pilot.",
                 awaiting_user_input=False)


def zaphod_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    names = {t.name for t in tools}
    last = messages[-1]
    if "council_synthesis" in names:
        marker = Path(os.environ["VT_TEST_LOG"]).parent.parent / "synthesized-once"
        if CRASH in last.content and not marker.exists():
            marker.touch()
            log("synth-hang", "")
            time.sleep(BARRIER_LIMIT * 4)  # the test SIGKILLs this worker meanwhile
        said = re.findall(r'<head name="([^"]+)"', last.content)
        return _call("council_synthesis", consensus=f"{' and '.join(said)} favour a pilot.",
                     differences=[f"{h} stresses its own angle" for h in said],
                     conclusion="Run a three-month pilot.")
    if "process_create" not in names:
        persona = re.search(r"Your persona: (\w+)", messages[0].content)
        return _head(persona.group(1) if persona else "unknown")
    if last.role == "tool":
        return _call("respond", message="The council is meeting.", awaiting_user_input=False)
    if last.content.startswith("Convene the council"):
        crash = CRASH if "crash" in last.content else ""
        return _call("process_create", recipe="zaphod", name="council", goal=QUESTION + crash,
                     params={"heads": [{"name": n, "persona": n}
                                       for n in ("optimist", "skeptic", "pragmatist")]})
    if 'type="done"' in last.content:
        return _call("respond", message="The council has reported.", awaiting_user_input=False)
    return _call("respond", message="?", awaiting_user_input=False)
