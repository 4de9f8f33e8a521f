"""A pytest plugin: how many pytest-xdist workers run this suite, and how they get its
tests under ``--dist loadfile`` (``pyproject.toml`` sets ``-n auto --dist loadfile``).

``-n auto`` means ``WORKERS`` workers (``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides it),
or none — the tests run in the pytest process itself — when ``VANCETOPE_TEST_REDIS_URL``
pins the one database a run may use, or when every path on the command line is a file
or a test (``tests/test_config.py``, ``tests/x.py::test_y``): starting
workers (each imports the project) costs more than such a run saves. A directory, or no
path (``testpaths``), gets the workers. ``-n N`` chooses; ``-n0`` never starts any;
``--pdb`` runs in-process too. Most tests wait on subprocesses, hence more workers than the
two cores the suite is sized for.

``loadfile`` keeps the tests of a file on one worker, so a module-scoped fixture (the
embedded worker, a served gateway) starts once per file, not once per worker. Three
refinements:

- ``tests/web/`` is one unit: its tests share one ``vancetope serve`` and one Chromium
  (session fixtures), which a worker would otherwise start for each file it takes.
- ``tests/chaos/`` is one unit too: its scenarios run one after another on one worker,
  as in a run without xdist, so no two of them (each with its own Redis, gateways and
  workers, and bounds on recovery times) compete for the cores.
- The tests under ``SPREAD`` are units of their own: each starts its own processes
  (function-scoped fixtures; nothing there is module-scoped), and together they are a
  large part of the run's wall time, so one worker must not get a whole file of them.

Units are handed out longest first (by ``TIERS``, then by the number of tests), so the
last units to start are short and no worker is left running a long one alone at the end.
Without xdist (``-n0``, ``-p no:xdist``) this plugin does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

WORKERS = 3
CHAOS = "tests/chaos/"
WEB = "tests/web/"
SPREAD = ("tests/integration/",)
TIERS = (CHAOS, WEB, "tests/integration/", "tests/test_chat_terminal.py", "tests/test_cli.py")
"""Path prefixes in the order their units start: the long ones (each takes minutes of wall
time, or, the last two, a terminal session of tens of seconds); every other unit after
these."""


def _tier(scope: str) -> int:
    return next((i for i, prefix in enumerate(TIERS) if scope.startswith(prefix)), len(TIERS))


def _scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadFileScheduling

    class SuiteScheduling(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path.startswith(SPREAD):
                return nodeid
            for unit in (CHAOS, WEB):
                if path.startswith(unit):
                    return unit
            return path

        def _assign_work_unit(self, node: Any) -> None:
            first = min(self.workqueue, key=lambda scope: (_tier(scope),
                                                           -len(self.workqueue[scope])))
            self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    return SuiteScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    if chosen := os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(chosen)
    if os.environ.get("VANCETOPE_TEST_REDIS_URL"):  # one database: one process can hold it
        return 0
    paths = [arg.split("::", 1)[0] for arg in config.args]
    if paths and all(Path(config.invocation_params.dir, path).is_file() for path in paths):
        return 0
    return WORKERS


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") == "loadfile":
        return _scheduler(config, log)
    return None
