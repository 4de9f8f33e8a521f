"""Fixtures of the multi-process tests: real Redis (the run's own database, see
``tests/redis_claim.py``), real Celery worker OS processes
(``worker_main``, solo pool), one SQLite file shared by every process.

The test process plays sender (``brain.sessions.steer``) and, when a test asks
for it, the sweeper: a thread that runs a worker's ``sweep()`` every
``sweep_interval``. Workers schedule no sweeps of their own (``SweepSchedule``)
unless a test starts them ``sweeping``: a test of what happens without the
sweeper must not be rescued by one.
Every child process is started in its own session and killed at teardown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.helpers import server_env, wait_for
from vancetope_brain.config import Config
from vancetope_brain.identity import Principal
from vancetope_brain.models import ChatMessage, ChatRole, InboxMessage, ProcessStatus
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore
from vancetope_gateway.parts import Gateway, build_gateway
from workers.celery_app import create_celery, enqueue_index_on, enqueue_on

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 60.0
NEVER = 3600  # seconds: a sweep interval no test lives to see


def child_env(base: dict[str, str]) -> dict[str, str]:
    """The parent's environment minus any Vancetope/OpenAI/test-hook settings, plus ``base``."""
    inherited = {k: v for k, v in os.environ.items()
                 if not k.startswith(("VANCETOPE_", "OPENAI_", "VT_TEST_"))}
    return {**inherited, "PYTHONUNBUFFERED": "1", **base}


def stop_process(popen: subprocess.Popen[bytes], *, graceful: bool = False) -> None:
    """End a child we started (and anything in its process group): SIGTERM first if
    ``graceful``, SIGKILL after a short grace or at once."""
    if popen.poll() is None:
        try:
            os.killpg(popen.pid, signal.SIGCONT)  # a SIGSTOPped child cannot act on SIGTERM
            if graceful:
                os.killpg(popen.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(timeout=10)
            if popen.poll() is None:
                os.killpg(popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    popen.wait(timeout=30)


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(none)"


class Worker:
    """One ``worker_main`` OS process and its marker files."""

    def __init__(self, name: str, directory: Path, env: dict[str, str], model: str,
                 hold_commit: bool, sweeping: bool, pool: str = "solo") -> None:
        self.name = name
        self.dir = directory
        directory.mkdir(parents=True)
        self.log = directory / "turns.log"
        self.started = directory / "started"
        self.release_file = directory / "release"
        self.hold_release = directory / "hold-release"
        self.output_path = directory / "output.txt"
        worker_env = {**env, "VT_TEST_MODEL": model, "VT_TEST_LOG": str(self.log),
                      "VT_TEST_STARTED": str(self.started),
                      "VT_TEST_RELEASE": str(self.release_file)}
        if hold_commit:
            worker_env["VT_TEST_HOLD_COMMIT"] = str(self.hold_release)
        if not sweeping:
            worker_env["VANCETOPE_SWEEP_INTERVAL"] = str(NEVER)
        worker_env["VT_TEST_POOL"] = pool
        self._output: IO[bytes] = open(self.output_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.worker_main", name], cwd=REPO,
            env=worker_env, stdout=self._output, stderr=subprocess.STDOUT,
            start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def worker_id(self) -> str:
        """What ``LaneRunner`` writes into ``TurnRecord.worker`` for this process."""
        return f"{socket.gethostname()}:{self.pid}"

    def entries(self, kind: str | None = None) -> list[tuple[str, float, str]]:
        """Lines of the turn log as (kind, unix time, detail)."""
        try:
            text = self.log.read_text()
        except FileNotFoundError:
            return []
        result = []
        for line in text.splitlines():
            parts = line.split(" ", 3)
            entry = (parts[0], float(parts[2]), parts[3] if len(parts) > 3 else "")
            if kind is None or entry[0] == kind:
                result.append(entry)
        return result

    def outcomes(self) -> list[str]:
        return [detail for _, _, detail in self.entries("postrun")]

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        def ready() -> bool:
            if self.popen.poll() is not None:
                raise AssertionError(f"worker {self.name} exited with {self.popen.returncode}:\n"
                                     f"{tail(self.output_path)}")
            return bool(self.entries("ready"))

        wait_for(ready, timeout=timeout, interval=0.05, what=f"worker {self.name} ready")

    def release(self) -> None:
        """Let the ``block`` model answer (now and on every later call)."""
        self.release_file.touch()

    def release_commits(self) -> None:
        self.hold_release.touch()

    def signal(self, sig: signal.Signals) -> None:
        os.kill(self.pid, sig)

    def kill_group(self) -> None:
        """SIGKILL the worker and its pool children at once (a pod dying), and reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)

    def stop(self) -> None:
        self.release()
        self.release_commits()
        try:
            stop_process(self.popen)
        finally:
            self._output.close()


class Cluster:
    """Workers, a test process with a gateway's parts (``brain``) on the same Redis and SQLite
    file (or the store ``VANCETOPE_STORE_URL`` in ``extra`` names), and an optional sweeper
    (a worker's parts, built when it starts)."""

    def __init__(self, tmp_path: Path, redis_url: str, **extra: str) -> None:
        self.tmp = tmp_path
        # The SQLite file unless ``extra`` names another store (the chaos suite's PostgreSQL).
        extra = {"VANCETOPE_STORE_URL": f"sqlite:///{tmp_path / 'v.db'}", **extra}
        self.env = child_env(server_env(tmp_path / "data", VANCETOPE_REDIS_URL=redis_url,
                                        **extra))
        self.config = Config.from_env(self.env)
        self.app = create_celery(self.config)
        self.brain: Gateway = build_gateway(self.config, enqueue_on(self.app),
                                               enqueue_index=enqueue_index_on(self.app))
        self.brain.identity.create_tenant("acme", "acme")
        self.brain.identity.create_user("acme", "ada", "ada")
        # The lane, scale-out and fault tests count chat lines of a one-line-per-message
        # engine; the Arthur and Inbox flows unset it (the default: arthur).
        self.brain.settings.set("acme", SettingScope.tenant(),
                                              "session.defaultChatEngine", "ford")
        self.who = Principal("acme", "ada")
        self.workers: list[Worker] = []
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self.sweeps = 0

    # ── processes ───────────────────────────────────────────────────────
    def start_workers(self, *models: str, hold_commit: bool = False, sweeping: bool = False,
                      pool: str = "solo") -> list[Worker]:
        """Start one worker per model name and wait until all consume; ``sweeping`` ones
        schedule the sweeper as a worker pod does; ``pool`` is their Celery pool."""
        started = []
        for model in models:
            name = f"w{len(self.workers) + 1}"
            worker = Worker(name, self.tmp / name, self.env, model, hold_commit, sweeping,
                            pool)
            self.workers.append(worker)
            started.append(worker)
        for worker in started:
            worker.wait_ready()
        return started

    def start_sweeper(self) -> None:
        """Play beat: the worker's ``sweep()`` every ``VANCETOPE_SWEEP_INTERVAL`` seconds."""
        beat = self.app.vancetope_worker()

        def loop() -> None:
            while not self._stop.wait(self.config.sweep_interval):
                try:
                    self.sweeps += beat.sweep()
                except Exception as e:  # keep sweeping; a test will time out loudly
                    print(f"sweep failed: {e!r}", file=sys.stderr)

        self._sweeper = threading.Thread(target=loop, name="test-beat", daemon=True)
        self._sweeper.start()

    def close(self) -> None:
        self._stop.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout=10)
        try:
            for worker in self.workers:
                worker.stop()
        finally:
            for worker in self.workers:  # shown by pytest only when the test failed
                print(f"--- {worker.name} (pid {worker.pid}, exit {worker.popen.returncode}) "
                      f"output:\n{tail(worker.output_path)}\n--- {worker.name} turn log:\n"
                      f"{tail(worker.log)}")
            self.app.close()
            self.brain.redis.close()
            self.brain.close()

    # ── the process under test ──────────────────────────────────────────
    def new_chat(self) -> str:
        """A session's chat process whose start turn has committed (IDLE)."""
        pid = self.brain.sessions.create_interactive(self.who).chat_process_id
        assert pid is not None
        wait_for(lambda: self.brain.store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE,
                 timeout=30, what="the start turn")
        return pid

    def steer(self, pid: str, content: str) -> InboxMessage:
        message, created = self.brain.sessions.steer(self.who, pid, content)
        assert created
        return message

    def chat(self, pid: str) -> list[ChatMessage]:
        return self.brain.store.port(LaneStore).chat_history("acme", pid, limit=100_000)

    def roles_and_contents(self, pid: str) -> list[tuple[str, str]]:
        return [(line.role.value, line.content) for line in self.chat(pid)]

    def wait_reply(self, pid: str, content: str, timeout: float = 15.0) -> ChatMessage:
        """The assistant line answering the user message ``content``."""
        expected = f"echo: {content}"
        return wait_for(lambda: next((line for line in self.chat(pid)
                                      if line.role is ChatRole.ASSISTANT
                                      and line.content == expected), None),
                        timeout=timeout, interval=0.02, what=f"the reply {expected!r}")


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str) -> Iterator[Cluster]:
    c = Cluster(tmp_path, redis_url)
    try:
        yield c
    finally:
        c.close()
