"""The README's promise: `vancetope serve` with nothing configured, `vancetope chat` streams a
Ford reply, and after a restart the same session resumes with its history.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from vancetope_brain.engines.arthur import WELCOME
from vancetope_brain.store import LaneStore, SessionStore, open_store
from vancetope_brain.store.sessions import every_session

CLI = [sys.executable, "-m", "vancetope_gateway.cli"]


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VANCETOPE_", "OPENAI_"))}
    return {**env, "VANCETOPE_DATA_DIR": str(data_dir), "VANCETOPE_PORT": "0",
            "XDG_STATE_HOME": str(data_dir.parent / "state")}


class Server:
    def __init__(self, data_dir: Path) -> None:
        self.proc = subprocess.Popen(CLI + ["serve"], env=_env(data_dir), text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.banner: list[str] = []
        for line in self.proc.stdout:
            self.banner.append(line)
            if line.startswith("Vancetope serving on"):
                self.port = int(re.search(r":(\d+) ", line).group(1))
            if line.startswith("Any WebSocket client"):
                break
        assert hasattr(self, "port"), "".join(self.banner)

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def _chat(data_dir: Path, port: int, text: str) -> str:
    done = subprocess.run(CLI + ["chat", "--url", f"ws://127.0.0.1:{port}/ws"],
                          env=_env(data_dir), input=text, text=True, capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_serve_chat_restart_resume(tmp_path):
    data = tmp_path / "data"
    server = Server(data)
    try:
        banner = "".join(server.banner)
        assert "offline demo model" in banner and "Created the local user's token" in banner
        # The exact command, port included; captured output gets no token in the web URL.
        assert f"Terminal: vancetope chat --url ws://127.0.0.1:{server.port}/ws\n" in banner
        assert (f"Browser:  http://127.0.0.1:{server.port}/  (sign in with the token in "
                f"{data / 'token'})") in banner
        assert (data / "token").stat().st_mode & 0o777 == 0o600
        first = _chat(data, server.port, "hello arthur\n")
        assert "(new session" in first
        assert re.search(r"assistant> .*hello arthur", first), first
    finally:
        out = server.stop()
    assert "Vancetope stopped." in out

    server = Server(data)
    try:
        assert "Using the local user's token" in "".join(server.banner)
        second = _chat(data, server.port, "and again\n")
    finally:
        server.kill()
    lines = second.splitlines()
    assert lines[0] == f"assistant> {WELCOME}"  # Arthur is the default chat engine
    asked = lines.index("you> hello arthur")  # after the welcome's lines (the demo's hints)
    assert all(line.startswith("assistant>") for line in lines[:asked])
    assert lines[asked + 1].startswith("assistant> ")
    assert any(line.startswith("(resumed session") for line in lines)
    assert re.search(r"assistant> .*and again", second), second

    store = open_store(f"sqlite:///{data / 'vancetope.db'}")
    try:
        token = (data / "token").read_text().strip()
        assert token not in "".join(server.banner)
        session_id = (data / "chat-state.json").read_text()
        sessions = list(every_session(store.port(SessionStore), "local", "local"))
        assert len(sessions) == 1 and sessions[0].id in session_id
        history = store.port(LaneStore).chat_history("local", sessions[0].chat_process_id)
        assert [m.content for m in history if m.role.value == "user"] == [
            "hello arthur", "and again"]
        assert [m.role.value for m in history] == [
            "assistant", "user", "assistant", "user", "assistant"]
    finally:
        store.close()
