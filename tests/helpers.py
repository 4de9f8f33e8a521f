"""Small helpers for tests: waiting on conditions without sleeping blindly."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.01,
             what: str = "condition") -> T:
    """Poll until ``condition()`` is truthy and return it; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


FAST_LANES = {
    "VANCETOPE_LEASE_TTL": "2",
    "VANCETOPE_SWEEP_INTERVAL": "0.3",
    "VANCETOPE_SWEEP_AGE": "0.5",
}


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """Environment of a test server or worker: its own data dir, short lease and sweep times."""
    return {"VANCETOPE_DATA_DIR": str(data_dir), **FAST_LANES, **extra}
