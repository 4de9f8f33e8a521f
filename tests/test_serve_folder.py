"""``vancetope serve`` in a folder, as a newcomer starts it (issue 27 items 5 and 6).

- With the default relative data directory the Inbox's attachments are served (Flask's
  ``send_file`` read the relative path against the package's folder: HTTP 500).
- One server per data directory: a second ``serve`` is refused, naming the running one,
  and changes nothing of it; the lock goes with the process, however it ends.
- A ``serve`` that cannot bind its port makes nothing (no data directory for ``chat`` to
  prefer to the running server's), and ``server.json`` names only a port a server
  listens on.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from vancetope_brain.llm.demo_inbox import demo_png
from vancetope_gateway.chat_client import ChatClient

CLI = [sys.executable, "-m", "vancetope_gateway.cli", "serve"]


def _env(port: int = 0) -> dict[str, str]:
    """No data directory set: ``serve`` uses ``./.vancetope`` of the folder it starts in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VANCETOPE_", "OPENAI_"))}
    return {**env, "VANCETOPE_PORT": str(port), "VANCETOPE_DEMO_TOKEN_DELAY": "0"}


class Serve:
    """``vancetope serve`` started in ``folder``, once its banner is out."""

    def __init__(self, folder: Path) -> None:
        self.proc = subprocess.Popen(CLI, env=_env(), cwd=folder, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        banner = []
        for line in self.proc.stdout:
            banner.append(line)
            if line.startswith("Any WebSocket client"):
                break
        found = re.search(r"Vancetope serving on http://127\.0\.0\.1:(\d+) ", "".join(banner))
        assert found, "".join(banner)
        self.port = int(found.group(1))
        self.url = f"ws://127.0.0.1:{self.port}/ws"

    def healthy(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as r:
            return r.status == 200

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.communicate(timeout=30)[0]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=30)


def _refused(folder: Path, port: int = 0) -> str:
    """``serve`` that must not start: its exit code is 2; its error output."""
    done = subprocess.run(CLI, env=_env(port), cwd=folder, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Vancetope serving" not in done.stdout, done.stdout
    return done.stderr


def _server_json(folder: Path) -> dict[str, Any]:
    return json.loads((folder / ".vancetope" / "server.json").read_text())


def _event(client: ChatClient, kind: str, match: dict[str, Any]) -> dict[str, Any]:
    """The first pushed frame of type ``kind`` whose item has every field of ``match``."""
    deadline = time.monotonic() + 30
    while (left := deadline - time.monotonic()) > 0:
        try:
            frame = client.events.get(timeout=left)
        except queue.Empty:
            break
        item = frame.get("data", {}).get("item", {})
        if frame["type"] == kind and all(item.get(k) == v for k, v in match.items()):
            return item
    raise AssertionError(f"no {kind} {match} within 30 s")


def test_the_default_data_dir_serves_an_inbox_image(tmp_path):
    server = Serve(tmp_path)
    try:
        token = (tmp_path / ".vancetope" / "token").read_text().strip()
        client = ChatClient(server.url, token)
        try:
            chat = client.request("session-create", title="files",
                                  onDisconnect="KEEP_OPEN")["chatProcessId"]
            client.request("process-steer", targetThinkProcessId=chat,
                           content="show me every kind of inbox item")
            image = _event(client, "inbox-item-added", {"type": "OUTPUT_IMAGE"})
        finally:
            client.close()
        url = urlsplit(image["payload"]["url"])
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{url.path}?{url.query}",
                                    timeout=10) as got:
            assert (got.status, got.headers["Content-Type"]) == (200, "image/png")
            assert got.read() == demo_png()
    finally:
        out = server.stop()
    assert "Traceback" not in out, out


def test_a_second_serve_of_a_data_dir_is_refused_and_names_the_first(tmp_path):
    first = Serve(tmp_path)
    try:
        recorded = _server_json(tmp_path)
        assert recorded["url"] == first.url
        for port in (0, first.port):  # its own port, or the first one's
            error = _refused(tmp_path, port)
            assert "already serves the data directory" in error, error
            assert f"{first.url}, pid {first.proc.pid}" in error, error
        assert _server_json(tmp_path) == recorded == {"url": first.url, "pid": first.proc.pid}
        assert first.healthy()
    finally:
        out = first.stop()
    assert "Vancetope stopped." in out
    # A clean stop takes the record of its port away and frees the data directory.
    assert not (tmp_path / ".vancetope" / "server.json").exists()
    second = Serve(tmp_path)
    try:
        assert _server_json(tmp_path)["url"] == second.url
    finally:
        second.kill()
    # A killed server's lock goes with it: the next one starts.
    third = Serve(tmp_path)
    try:
        assert _server_json(tmp_path) == {"url": third.url, "pid": third.proc.pid}
    finally:
        third.kill()


@pytest.fixture
def busy_port():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        yield taken.getsockname()[1]


def test_a_serve_that_cannot_bind_its_port_makes_nothing(tmp_path, busy_port):
    error = _refused(tmp_path, busy_port)
    assert f"cannot listen on 127.0.0.1:{busy_port}" in error and "VANCETOPE_PORT" in error, \
        error
    assert list(tmp_path.iterdir()) == []
