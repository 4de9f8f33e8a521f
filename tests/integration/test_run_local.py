"""``deploy/run-local.sh`` (gateway, two workers, beat on one machine) is never left half
running: when one of its processes dies it stops all the others, and Ctrl-C stops
everything within seconds — without gunicorn having to SIGKILL its workers."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import REPO, child_env, tail
from tests.integration.test_plain_install import free_port

STOPPED_WITHIN = 25.0  # seconds; the script's own last resort (SIGKILL) comes after 20


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    living = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            if "zombie" not in Path(f"/proc/{pid}/status").read_text().lower():
                living.add(pid)
    return living


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class RunLocal:
    def __init__(self, tmp: Path, redis_url: str) -> None:
        self.port = free_port()
        self.output_path = tmp / "run-local.txt"
        self._output = open(self.output_path, "wb")  # noqa: SIM115 - closed in stop()
        env = child_env({"VANCETOPE_REDIS_URL": redis_url, "PORT": str(self.port),
                         "VANCETOPE_DATA_DIR": str(tmp / "data")})
        self.popen = subprocess.Popen(["bash", str(REPO / "deploy" / "run-local.sh")], cwd=tmp,
                                      env=env, stdout=self._output, stderr=subprocess.STDOUT,
                                      start_new_session=True)

    def ready(self) -> set[int]:
        """Wait until the gateway is ready (both workers consuming); its process family."""
        def ready() -> bool:
            if self.popen.poll() is not None:
                raise AssertionError(f"run-local.sh exited:\n{tail(self.output_path)}")
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            try:
                conn.request("GET", "/readyz")
                body = conn.getresponse().read().decode()
                return '"ready"' in body and "worker1@" in body and "worker2@" in body
            except OSError:
                return False
            finally:
                conn.close()

        wait_for(ready, timeout=90, interval=0.2, what="run-local.sh's gateway ready")
        return descendants(self.popen.pid)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)
        self._output.close()


@pytest.fixture
def run_local(tmp_path: Path, redis_url: str) -> Iterator[RunLocal]:
    script = RunLocal(tmp_path, redis_url)
    try:
        yield script
    finally:
        family = descendants(script.popen.pid)
        script.stop()
        for pid in alive(family):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        print(f"--- run-local.sh output:\n{tail(script.output_path, 60)}")


def _all_stopped(script: RunLocal, family: set[int]) -> None:
    script.popen.wait(timeout=STOPPED_WITHIN)
    wait_for(lambda: not alive(family), timeout=5, what=f"{alive(family)} to exit")
    output = script.output_path.read_text(errors="replace")
    assert "Perhaps out of memory" not in output  # gunicorn did not SIGKILL its workers


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_one_process_dying_stops_all_the_others(run_local):
    family = run_local.ready()
    # worker1's main process (a child of the script), not one of its pool's children
    worker = next(pid for pid in family
                  if "worker1@" in cmdline(pid) and _parent(pid) == run_local.popen.pid)
    os.kill(worker, signal.SIGKILL)
    _all_stopped(run_local, family)
    assert run_local.popen.returncode == 128 + signal.SIGKILL
    assert "a process ended (exit 137); stopping the others" in \
        run_local.output_path.read_text()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_ctrl_c_stops_everything_within_seconds(run_local):
    family = run_local.ready()
    os.killpg(run_local.popen.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    _all_stopped(run_local, family)
    assert run_local.popen.returncode == 130


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0
