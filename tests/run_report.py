"""A pytest plugin: lines that tests add to the run's closing summary (the chaos suite's
recovery figures, the browser tests' screenshots), gathered from every pytest-xdist worker.

A test calls ``add(section, line, data)``. The process that runs it keeps the row; an
xdist worker hands its rows to the controller when it finishes (``workeroutput``), and the
process with the terminal (the controller, or the only process under ``-n0``) prints
each section. A section named in ``JSON_FILES`` is also written, as a JSON list of the
rows' ``data``, to the file that environment variable names.

Loaded by ``tests/conftest.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

WORKEROUTPUT_KEY = "vancetope-run-report"
JSON_FILES = {"chaos: recovery": "VANCETOPE_CHAOS_REPORT"}

_ROWS: dict[str, list[tuple[str, Any]]] = {}


def add(section: str, line: str, data: Any = None) -> None:
    """Add ``line`` (and JSON-able ``data``) to ``section`` of this run's summary."""
    _ROWS.setdefault(section, []).append((line, data))


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller prints
        workeroutput[WORKEROUTPUT_KEY] = {section: [list(row) for row in rows]
                                          for section, rows in _ROWS.items()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller: take a finished worker's rows."""
    for section, rows in getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY, {}).items():
        _ROWS.setdefault(section, []).extend((line, data) for line, data in rows)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if hasattr(terminalreporter.config, "workeroutput"):
        return
    for section, rows in sorted(_ROWS.items()):
        terminalreporter.section(section)
        for line, _ in rows:
            terminalreporter.line(line)
        if (variable := JSON_FILES.get(section)) and (path := os.environ.get(variable)):
            Path(path).write_text(json.dumps([data for _, data in rows], indent=2))
