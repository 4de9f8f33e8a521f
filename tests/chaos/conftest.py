"""The chaos suite's parts: a Redis of its own (killed and restarted by scenarios), the
distributed shape on it with the default settings (its store a SQLite file, or for the
scenarios parametrised with ``POSTGRESQL`` a PostgreSQL server of the test's own,
``OwnPostgres``, which a scenario crashes and restarts too), and the report of recovery
times.

Short form (one round of each scenario, the default; what ``.ci/run`` runs as part of
``python -m pytest``); full form: ``VANCETOPE_CHAOS=full python -m pytest -m chaos``
(more processes, more rounds).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
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


PG_BIN = Path(os.environ.get("VANCETOPE_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
"""Where ``initdb`` and ``postgres`` are (Debian's PostgreSQL 15 unless set)."""


class OwnPostgres:
    """A PostgreSQL server of this test alone, so that crashing it touches neither the
    machine's shared server nor another run: a data directory made by ``initdb`` in a
    temporary directory, a free port on 127.0.0.1, its unix socket in that directory, trust
    auth, ``fsync=off`` (a process crash loses nothing a commit acknowledged: the WAL was
    written to the kernel; only a machine crash would). Run as ``postgres`` when we are
    root (``initdb`` refuses root). ``url`` is the store URL of the database ``vancetope``
    it creates. ``kill`` crashes it (SIGKILL of the postmaster and every backend at once,
    as when its machine or container dies), ``start`` brings it back (crash recovery);
    ``close`` kills it and removes its files."""

    def __init__(self, log_dir: Path) -> None:
        initdb, self._postgres = PG_BIN / "initdb", PG_BIN / "postgres"
        if not initdb.exists():
            pytest.fail(f"the PostgreSQL chaos scenarios need {initdb} (apt-get install "
                        f"postgresql-15, or VANCETOPE_TEST_PG_BIN)")
        # Not under pytest's tmp_path: that is root's alone (0700), and the server runs as
        # ``postgres``.
        self.dir = Path(tempfile.mkdtemp(prefix="vt-chaos-pg-"))
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self._user = {"user": "postgres", "group": "postgres", "extra_groups": []}
        self.data = self.dir / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/vancetope"
        self._log = open(log_dir / "postgres.log", "ab")  # noqa: SIM115 - closed in close()
        self.popen: subprocess.Popen[bytes] | None = None
        try:
            subprocess.run([str(initdb), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                            "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                           cwd=self.dir, stdout=self._log, stderr=subprocess.STDOUT,
                           check=True, timeout=60, **self._user)
            self.start()
            with psycopg.connect(self._server_url("postgres"), autocommit=True) as admin:
                admin.execute("CREATE DATABASE vancetope")
        except BaseException:
            self.close()
            raise

    def _server_url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Start the server (after a ``kill``: its crash recovery) and wait until it
        accepts connections."""
        assert self.popen is None or self.popen.poll() is not None, "already running"
        self.popen = subprocess.Popen(
            [str(self._postgres), "-D", str(self.data), "-p", str(self.port),
             "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}",
             "-c", "fsync=off", "-c", "max_connections=200", "-c", "log_min_messages=warning"],
            cwd=self.dir, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            **self._user)
        wait_for(self._accepts, timeout=60, interval=0.05, what="the test's PostgreSQL server")

    def _accepts(self) -> bool:
        assert self.popen is not None
        if self.popen.poll() is not None:
            raise AssertionError(f"postgres exited with {self.popen.returncode}")
        try:
            with psycopg.connect(self._server_url("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def kill(self) -> None:
        """Crash the server: the postmaster and all its backends SIGKILLed together (each
        backend is a session of its own, so a process group would miss them; the
        postmaster is stopped first so that it forks no new one meanwhile)."""
        assert self.popen is not None
        postmaster = self.popen.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(postmaster, signal.SIGSTOP)
        backends = _children(postmaster)
        for child in backends:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(postmaster, signal.SIGKILL)
        self.popen.wait(timeout=10)
        # Not our children, so not reaped here: gone once they are zombies or reaped.
        wait_for(lambda: not any(map(alive, backends)), timeout=10, interval=0.01,
                 what="the killed PostgreSQL backends to exit")

    def restart(self, down: float = 0.0) -> None:
        """``kill``, ``down`` seconds without a server, ``start``."""
        self.kill()
        time.sleep(down)
        self.start()

    def close(self) -> None:
        try:
            if self.popen is not None and self.popen.poll() is None:
                self.kill()
        finally:
            self._log.close()
            shutil.rmtree(self.dir, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid …; comm may hold spaces and parentheses
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            found.append(int(entry.name))
    return found


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[OwnPostgres]:
    server = OwnPostgres(tmp_path)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path)
    try:
        yield server
    finally:
        server.close()


SQLITE, POSTGRESQL = "sqlite", "postgresql"


def cases(*, postgresql: bool = False) -> list[Any]:
    """The (``chaos`` store, round) parameters of a scenario: ``ROUNDS`` rounds on SQLite,
    and with ``postgresql`` one round more on PostgreSQL (``indirect=["chaos"]``)."""
    found = [pytest.param(SQLITE, r, id=f"{SQLITE}-{r}") for r in range(ROUNDS)]
    if postgresql:
        found.append(pytest.param(POSTGRESQL, 0, id=f"{POSTGRESQL}-0"))
    return found


@pytest.fixture
def chaos(request: pytest.FixtureRequest, tmp_path: Path, own_redis: OwnRedis) -> Iterator[Stack]:
    """Gateways, workers and the test's sender on ``own_redis``, with the default lease and
    sweep settings; no beat (the workers schedule the sweeper). The store is a SQLite file,
    or ``own_postgres`` when the test parametrises this fixture with ``POSTGRESQL``."""
    store = {}
    if getattr(request, "param", SQLITE) == POSTGRESQL:
        store["VANCETOPE_STORE_URL"] = request.getfixturevalue("own_postgres").url
    with running_stack(tmp_path, own_redis.url, **DEFAULTS, VT_TEST_DELAY="0.05",
                       VT_TEST_ECHO_ALL="1", **store) as stack:
        yield stack


def on(stack: Stack) -> str:
    """How a report names the store a scenario ran on: nothing for SQLite, the default."""
    url = stack.cluster.config.store_url
    return " [PostgreSQL]" if url.startswith(("postgresql:", "postgres:")) else ""


def since(start: float) -> float:
    return time.monotonic() - start
