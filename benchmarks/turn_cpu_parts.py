"""The lane turn's CPU by part, without a profiler: ``turn_breakdown.py`` with named functions
of the product wrapped in ``time.thread_time``, printed per turn at the end.

    python benchmarks/turn_cpu_parts.py [--part MODULE:ATTR.PATH ...] [turn_breakdown.py's options]
    python benchmarks/turn_cpu_parts.py --iterations 1000 --warmup 200 --processes 50 \\
        --no-extras --no-celery --no-peer [--store postgres] [--source DIR]
    … --part vancetope_brain.store.sqlite.lanes:SqliteLanes.commit_turn   # one more part

cProfile inflates small Python calls about threefold and py-spy's ``--gil`` samples put GC
and allocations at odd call sites; a wrapper costs under 1 µs a call, so these figures add
up to the turn's CPU that ``turn_breakdown.py`` prints beside them. Inclusive: a part's
figure holds the parts it calls (``PARTS`` lists them outermost first). Averaged over every
``LaneRunner.run`` of the run, the warm-up and the INIT turns included.
"""

from __future__ import annotations

import atexit
import importlib
import os
import runpy
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PARTS = [
    "vancetope_brain.lanes.runner:LaneRunner.run",
    "vancetope_brain.lanes.runner:LaneRunner._decide",
    "vancetope_brain.engines.arthur:ArthurEngine._answer",
    "vancetope_brain.engines.prompting:ToolLoop.run",
    "vancetope_brain.engines.journal:TurnJournal.complete",
    "vancetope_brain.engines.journal:TurnJournal._write",
    "vancetope_brain.engines.journal:_request_digest",
    "vancetope_brain.events.tokens:TokenStream.flush",
    "vancetope_brain.events.interrupts:Interrupts.requested",
    "vancetope_brain.tools.dispatcher:ToolDispatcher.specs",
    "vancetope_brain.tools.client:ClientToolBridge._offers",
    "vancetope_brain.engines.history:fitted",
    "vancetope_brain.engines.rag:auto_inject",
    "vancetope_brain.engines.memory_summary:memory_summary",
    "vancetope_brain.engines.prompting:system_prompt",
    "vancetope_brain.engines.contexts:ContextFactory.__call__",
    "vancetope_brain.lanes.quota:QuotaService.over",
    "vancetope_brain.settings:SettingsService.cascade",
    "vancetope_brain.lanes.runner:LaneRunner._awaits_user",
    "vancetope_brain.lanes.runner:LaneRunner._inspect",
    "vancetope_brain.engines.inspector:inspect",
    "vancetope_brain.lanes.runner:LaneRunner._publish_committed",
    "vancetope_brain.events.bus:EventBus.publish_many",
    "vancetope_brain.lanes.lease:LeaseKeeper.try_acquire",
    "vancetope_brain.lanes.lease:LeaseKeeper.release",
]
"""``module:attribute path`` of each part."""

_spent: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])


def _wrapped(label: str, fn: Any) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = _spent[label]
            spent[0] += 1
            spent[1] += time.thread_time() - started
    return timed


def instrument() -> None:
    """Wrap every part; a module-level function is replaced wherever the product imported it
    by name too (``from … import fitted``)."""
    for part in PARTS:
        module_name, _, path = part.partition(":")
        owner: Any = importlib.import_module(module_name)
        *outer, name = path.split(".")
        for attribute in outer:
            owner = getattr(owner, attribute)
        real = getattr(owner, name)
        timed = _wrapped(path, real)
        setattr(owner, name, timed)
        if not outer:
            for module in list(sys.modules.values()):
                if getattr(module, "__name__", "").startswith("vancetope") and \
                        vars(module).get(name) is real:
                    setattr(module, name, timed)


def report() -> None:
    turns = _spent["LaneRunner.run"][0]
    if not turns:
        return
    print(f"\nCPU per turn by part (thread_time, inclusive, {turns} turns):")
    for label, (calls, seconds) in sorted(_spent.items(), key=lambda item: -item[1][1]):
        print(f"{seconds / turns * 1e6:9.0f} µs {calls / turns:6.2f} calls  {label}")


def main() -> None:
    argv = sys.argv[1:]
    while "--part" in argv[:-1]:  # ours; the rest is turn_breakdown.py's
        at = argv.index("--part")
        PARTS.append(argv[at + 1])
        del argv[at:at + 2]
    if "--source" in argv[:-1]:  # the parts are wrapped in the checkout the run imports
        sys.path.insert(0, os.path.abspath(argv[argv.index("--source") + 1]))
    instrument()
    atexit.register(report)
    sys.argv = [str(HERE / "turn_breakdown.py"), *argv]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
