"""The distributed shape from a plain install (issue 15): a copy of the repository's tracked
files, ``pip install '.[distributed]'`` (the README's command; no dev extra) into a fresh
venv, and the ``Procfile`` run by that venv's honcho from a folder that holds nothing but
it — so nothing is imported from the checkout.
Every process gets this test's Redis database and data directory through the environment.

The venv is built once per test run (``plain_venv``); pip's own cache makes a second build
fast. On this machine the install took about 30 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import http_get, wait_for
from tests.integration.conftest import REPO, tail
from tests.integration.gateways import Client

PIP_TIMEOUT = 900
DEMO = "offline demo model"  # in every answer of the demo model (Arthur's too)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def plain_env(**extra: str) -> dict[str, str]:
    """The test's environment without anything that would reach the checkout or configure
    Vancetope, plus ``extra``."""
    kept = {k: v for k, v in os.environ.items()
            if not k.startswith(("VANCETOPE_", "OPENAI_", "VT_TEST_", "PYTHON", "FLOWER_"))}
    return {**kept, "PYTHONUNBUFFERED": "1", **extra}


@pytest.fixture(scope="session")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh venv holding ``pip install '.[distributed]'`` of the
    tracked files."""
    root = tmp_path_factory.mktemp("plain-install")
    source = root / "source"
    # What a clone of this work tree would hold: tracked files and new ones git does not ignore.
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():  # a tracked file deleted in the work tree is gone
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "venv", str(root / "v")], check=True, timeout=120)
    started = time.monotonic()
    pip = subprocess.run([str(root / "v" / "bin" / "pip"), "install", "--quiet",
                          "--disable-pip-version-check", f"{source}[distributed]"],
                         env=plain_env(), capture_output=True, text=True, timeout=PIP_TIMEOUT)
    assert pip.returncode == 0, f"pip install failed:\n{pip.stdout}\n{pip.stderr}"
    print(f"pip install '.[distributed]' took {time.monotonic() - started:.0f} s")
    return root / "v" / "bin"


class Honcho:
    """``honcho start`` of the Procfile in its own folder, ended (with every process it
    started) at teardown."""

    def __init__(self, bin_dir: Path, tmp: Path, env: dict[str, str]) -> None:
        self.app_root = tmp / "app"
        self.app_root.mkdir()
        shutil.copy2(REPO / "Procfile", self.app_root / "Procfile")
        self.output_path = tmp / "honcho.txt"
        self._output = open(self.output_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            # Two worker pods on one host, as `honcho start -c worker=2` runs them: each
            # serves its metrics on the PORT honcho gives it (one 9540 for both clashed).
            [str(bin_dir / "honcho"), "start", "--no-colour", "-d", str(self.app_root),
             "-f", str(self.app_root / "Procfile"), "-c", "worker=2"],
            cwd=self.app_root, env=env, stdout=self._output, stderr=subprocess.STDOUT,
            start_new_session=True)

    def output(self) -> str:
        return self.output_path.read_text(errors="replace")

    def alive(self) -> bool:
        if self.popen.poll() is not None:
            raise AssertionError(f"honcho exited with {self.popen.returncode}:\n"
                                 f"{tail(self.output_path, 80)}")
        return True

    def stop(self) -> None:
        children = [int(p) for p in re.findall(r"started \(pid=(\d+)\)", self.output())]
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGTERM)  # honcho stops what it started
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=30)
        for pid in [self.popen.pid, *children]:  # whatever outlived that
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self.popen.wait(timeout=30)
        self._output.close()


@pytest.fixture
def procfile(plain_venv: Path, tmp_path: Path, redis_url: str) -> Iterator[tuple[Honcho, dict]]:
    web, flower = free_port(), free_port()
    env = plain_env(
        PATH=f"{plain_venv}{os.pathsep}{os.environ['PATH']}", PORT=str(web),
        VANCETOPE_REDIS_URL=redis_url, VANCETOPE_DATA_DIR=str(tmp_path / "data"),
        VANCETOPE_STORE_URL=f"sqlite:///{tmp_path / 'data' / 'v.db'}",
        VANCETOPE_DEMO_TOKEN_DELAY="0.01", WEB_CONCURRENCY="1", WEB_THREADS="8",
        WORKER_CONCURRENCY="1", FLOWER_PORT=str(flower), FLOWER_BASIC_AUTH="ops:flower-test")
    admin = [str(plain_venv / "vancetope"), "admin"]
    for argv in (["tenant", "create", "local", "--id", "local"],
                 ["user", "create", "--tenant", "local", "local", "--id", "local"]):
        subprocess.run(admin + argv + ["--quiet"], env=env, cwd=tmp_path, check=True,
                       capture_output=True, timeout=120)
    token = subprocess.run(admin + ["token", "create", "--tenant", "local", "--user", "local",
                                    "--quiet"], env=env, cwd=tmp_path, check=True,
                           capture_output=True, text=True, timeout=120).stdout.strip()
    honcho = Honcho(plain_venv, tmp_path, env)
    try:
        yield honcho, {"web": web, "flower": flower, "token": token, "data": tmp_path / "data"}
    finally:
        honcho.stop()
        print(f"--- honcho output:\n{tail(honcho.output_path, 80)}")


@pytest.mark.slow
@pytest.mark.timeout(PIP_TIMEOUT + 240)
def test_the_procfile_of_a_plain_install_streams_a_reply_over_a_websocket(procfile):
    honcho, where = procfile
    # Ready means a worker consumes every lane queue (its heartbeat), not just "listening".
    wait_for(lambda: honcho.alive() and http_get(where["web"], "/readyz")[0] == 200,
             timeout=120, interval=0.2, what="the gateway's /readyz")
    # Both worker pods are up, each serving its metrics on the PORT honcho gave it (web's
    # + 100 for the Procfile's second entry, + 1 for its second instance).
    for port in (where["web"] + 100, where["web"] + 101):
        wait_for(lambda port=port: honcho.alive() and http_get(port, "/metrics")[0] == 200,
                 timeout=60, interval=0.2, what=f"a worker's metrics on {port}")

    client = Client(f"ws://127.0.0.1:{where['web']}/ws", where["token"])
    try:
        created = client.request("session-create", title="plain install")
        pid = created["chatProcessId"]
        client.request("process-steer", targetThinkProcessId=pid, content="hello")

        def lines(events: list[dict], role: str) -> list[dict]:
            return [e for e in events if e["type"] == "chat-message" and e["data"]["role"] == role]

        def answered(events: list[dict]) -> bool:  # the answer to "hello", after the welcome
            said = [e["seq"] for e in lines(events, "user") if e["data"]["content"] == "hello"]
            return bool(said) and any(e["seq"] > said[0] for e in lines(events, "assistant"))

        events = client.until(answered, timeout=60)
    finally:
        client.close()
    welcome, reply = lines(events, "assistant")[0], lines(events, "assistant")[-1]
    answer = reply["data"]["content"]
    tokens = [e["data"]["text"] for e in events if e["type"] == "token"
              and e["processId"] == pid and welcome["seq"] < e["seq"] < reply["seq"]]
    assert len(tokens) > 1 and answer in "".join(tokens)  # streamed word by word, then committed
    assert DEMO in answer
    assert "hello" in answer

    # The web client ships inside the package: the plain install serves it, script and all.
    status, page = http_get(where["web"], "/")
    assert status == 200 and b'<div id="root">' in page, page[:200]
    script = re.search(rb'src="(/assets/index-[^"]+\.js)"', page)
    assert script and http_get(where["web"], script.group(1).decode())[0] == 200

    # Flower: on, behind its basic auth (the HTML UI and the JSON API alike).
    wait_for(lambda: honcho.alive() and http_get(where["flower"], "/")[0] == 401, timeout=60,
             interval=0.2, what="Flower to refuse a request without credentials")
    assert http_get(where["flower"], "/api/workers", basic_auth="ops:wrong")[0] == 401
    # Each worker process is a Celery node of its own (honcho runs both on one host: their
    # names differ by the PORT it gives each), so Flower and /readyz see two, not one.
    def nodes(port: int, path: str, auth: str | None = None) -> int:
        status, body = http_get(port, path, basic_auth=auth)
        found = json.loads(body) if status == 200 else {}
        return len(found.get("workers", found) if path == "/readyz" else found)

    wait_for(lambda: nodes(where["web"], "/readyz") == 2, timeout=30,
             what="two workers in /readyz")
    wait_for(lambda: nodes(where["flower"], "/api/workers?refresh=1", "ops:flower-test") == 2,
             timeout=60, what="two workers in Flower")
    assert http_get(where["flower"], "/", basic_auth="ops:flower-test")[0] == 200
    # Flower's Broker tab sees the lane queues through the workers' own transport.
    status, broker = http_get(where["flower"], "/broker", basic_auth="ops:flower-test")
    assert status == 200 and b'<tr id="lanes.0">' in broker, broker[:300]
    # Beat keeps its schedule in the data directory given to it.
    wait_for(lambda: list(where["data"].glob("celerybeat-schedule*")), timeout=30,
             what="beat's schedule file in the data directory")
    output = honcho.output()
    assert "Traceback" not in output and "ModuleNotFoundError" not in output
