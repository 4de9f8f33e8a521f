"""The Procfile's gunicorn config (``vancetope_gateway.gunicorn_hooks``): in multiprocess
mode, a gunicorn worker that ended leaves ``vancetope_open_websockets`` (``child_exit``; each
step runs in a process of its own, as prometheus-client reads ``PROMETHEUS_MULTIPROC_DIR``
once, at import); two gateways on one host keep control sockets of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

OPEN_TWO = "from vancetope_brain.observability import metrics; metrics.OPEN_SOCKETS.inc(2)"
SCRAPE = """
from vancetope_brain.observability import metrics
print(metrics.registry().get_sample_value("vancetope_open_websockets"))
"""
EXIT = """
import sys
from types import SimpleNamespace
from vancetope_gateway.gunicorn_hooks import child_exit
child_exit(None, SimpleNamespace(pid=int(sys.argv[1])))
"""


def _run(code: str, directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory),
           "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=REPO,
                          capture_output=True, text=True, check=True, timeout=60)


def test_an_ended_worker_takes_its_sockets_out_of_the_gauge(tmp_path: Path) -> None:
    worker = subprocess.Popen([sys.executable, "-c", OPEN_TWO], cwd=REPO, env={
        **os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(REPO)})
    assert worker.wait(timeout=60) == 0
    assert float(_run(SCRAPE, tmp_path).stdout) == 2.0  # gone, but still counted
    _run(EXIT, tmp_path, str(worker.pid))
    assert float(_run(SCRAPE, tmp_path).stdout) == 0.0


def test_two_gateways_on_one_host_have_control_sockets_of_their_own(tmp_path: Path) -> None:
    # As gunicorn itself resolves the config (honcho gives each web process its own PORT).
    def control_socket(port: str) -> str:
        printed = subprocess.run(
            [sys.executable, "-m", "gunicorn", "--config",
             "python:vancetope_gateway.gunicorn_hooks", "--print-config",
             "vancetope_gateway.wsgi:app"],
            env={**os.environ, "PORT": port, "HOME": str(tmp_path), "PYTHONPATH": str(REPO)},
            cwd=REPO, capture_output=True, text=True, timeout=60, check=True).stdout
        return next(line.split("=", 1)[1].strip() for line in printed.splitlines()
                    if line.split("=")[0].strip() == "control_socket")

    first, second = control_socket("8001"), control_socket("8002")
    assert first != second
    assert first.startswith(str(tmp_path / ".gunicorn"))
