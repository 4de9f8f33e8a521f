"""The chaos suite's parts: a Redis of its own (killed and restarted by scenarios), the
distributed shape on it with the default settings, and the report of recovery times.

Short form (one round of each scenario, the default; what ``.ci/run`` runs as part of
``python -m pytest``); full form: ``VANCETOPE_CHAOS=full python -m pytest -m chaos``
(more processes, more rounds).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests import run_report
from tests.helpers import wait_for
from tests.integration.gateways import Stack, running_stack

FULL = os.environ.get("VANCETOPE_CHAOS") == "full"
ROUNDS = 3 if FULL else 1

DEFAULTS = {  # the shipped defaults (vancetope_brain/config.py), not the tests' fast lanes
    "VANCETOPE_LEASE_TTL": "10",
    "VANCETOPE_SWEEP_INTERVAL": "5",
    "VANCETOPE_SWEEP_AGE": "3",
}
LEASE_TTL = float(DEFAULTS["VANCETOPE_LEASE_TTL"])


def report(scenario: str, **figures: Any) -> None:
    """Record a scenario's figures (recovery time in seconds, counts) for the run's
    "chaos: recovery" summary (and ``VANCETOPE_CHAOS_REPORT``, see ``tests/run_report.py``)."""
    shown = ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in figures.items())
    run_report.add("chaos: recovery", f"{scenario}: {shown}", {"scenario": scenario, **figures})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """A ``redis-server`` of this test alone (no other run's data to lose), keeping nothing
    on disk: a restart is a restart empty."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("the chaos suite needs redis-server on PATH (apt-get install redis-server)")
        self._argv = [binary, "--port", str(_free_port()), "--bind", "127.0.0.1",
                      "--save", "", "--appendonly", "no", "--dir", str(directory)]
        self.port = int(self._argv[2])
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._log = open(directory / "redis.log", "wb")  # noqa: SIM115 - closed in close()
        self.popen: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.popen = subprocess.Popen(self._argv, stdout=self._log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        client = redis.Redis(port=self.port)
        try:
            wait_for(lambda: _pings(client), timeout=10, interval=0.02, what="redis-server")
        finally:
            client.close()

    def kill(self) -> None:
        assert self.popen is not None
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def close(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.kill()
        self._log.close()


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def chaos(tmp_path: Path, own_redis: OwnRedis) -> Iterator[Stack]:
    """Gateways, workers and the test's sender on ``own_redis``, with the default lease and
    sweep settings; no beat (the workers schedule the sweeper)."""
    with running_stack(tmp_path, own_redis.url, **DEFAULTS, VT_TEST_DELAY="0.05",
                       VT_TEST_ECHO_ALL="1") as stack:
        yield stack


def since(start: float) -> float:
    return time.monotonic() - start
