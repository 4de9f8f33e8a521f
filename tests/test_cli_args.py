"""The CLI refuses what it cannot do before doing any of it: a port outside 1–65535 (0 asks
for any free one), and ``vancetope schemas`` outside the repository root (``--out`` writes
the JSON Schemas anywhere); ``vancetope health`` answers for a liveness file."""

from __future__ import annotations

import json
import os
import time

import pytest

from vancetope_brain.config import Config
from vancetope_brain.errors import ConfigError
from vancetope_gateway.cli import main
from vancetope_gateway.discovery import websocket_url
from vancetope_gateway.schemas import frame_schemas


@pytest.mark.parametrize("port", ["99999", "65536", "-1", "http"])
def test_serve_refuses_a_port_that_is_none(port, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--port", port])
    assert exited.value.code == 2
    assert "argument --port" in capsys.readouterr().err


def test_the_port_variable_is_bounded_too():
    assert Config.from_env({"VANCETOPE_PORT": "65535"}).port == 65535
    assert Config.from_env({"VANCETOPE_PORT": "0"}).port == 0  # any free port
    with pytest.raises(ConfigError, match="VANCETOPE_PORT='99999' must be at most 65535"):
        Config.from_env({"VANCETOPE_PORT": "99999"})


def test_schemas_outside_the_repository_root_refuses_and_writes_nothing(tmp_path, monkeypatch,
                                                                        capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["schemas"]) == 2
    err = capsys.readouterr().err
    assert "docs/protocol.md does not exist" in err and "--out" in err
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "protocol.md").write_text("no markers here\n")
    assert main(["schemas"]) == 2
    assert "lacks the generated-frames markers" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == ["protocol.md"]


def test_schemas_out_writes_the_json_schemas_into_any_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["schemas", "--out", "somewhere/else"]) == 0
    written = sorted((tmp_path / "somewhere" / "else").iterdir())
    assert [p.name for p in written] == sorted(frame_schemas())
    assert json.loads((tmp_path / "somewhere" / "else" / "envelope.json").read_text()) == \
        frame_schemas()["envelope.json"]
    assert len(capsys.readouterr().out.splitlines()) == len(written)


def test_health_answers_for_a_liveness_file(tmp_path, capsys):
    alive = tmp_path / "alive"
    assert main(["health", str(alive)]) == 1
    assert "does not exist" in capsys.readouterr().err
    alive.touch()
    assert main(["health", str(alive), "--max-age", "30"]) == 0
    old = time.time() - 120
    os.utime(alive, (old, old))
    assert main(["health", str(alive), "--max-age", "30"]) == 1
    assert "last touched 120 s ago" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "url"), [
    ("http://127.0.0.1:8765", "ws://127.0.0.1:8765/ws"),
    ("http://127.0.0.1:8765/", "ws://127.0.0.1:8765/ws"),
    ("HTTPS://chat.example.com", "wss://chat.example.com/ws"),
    ("ws://127.0.0.1:8765/ws", "ws://127.0.0.1:8765/ws"),
    ("wss://lb.example.com/vancetope/ws", "wss://lb.example.com/vancetope/ws"),
])
def test_chat_takes_the_address_a_browser_opens(given: str, url: str) -> None:
    assert websocket_url(given) == url


@pytest.mark.parametrize("given", ["127.0.0.1:8765", "ftp://host/ws", "http://"])
def test_chat_says_what_a_server_address_looks_like(given: str) -> None:
    with pytest.raises(ConfigError, match="give http://HOST:PORT"):
        websocket_url(given)
