"""How ``vancetope chat`` finds the server ``vancetope serve`` started, from any folder.

``serve`` records its WebSocket URL in ``DATA_DIR/server.json`` and, so that a chat started
in another folder finds it too, ``{url, dataDir}`` in the user's state file
(``$XDG_STATE_HOME/vancetope/server.json``, by default ``~/.local/state/vancetope/``); both
mode 0600 — they name no secret, but say where the token lies. ``chat`` then takes:

- the data directory: ``VANCETOPE_DATA_DIR`` if set, else ``./.vancetope`` if it exists,
  else the ``dataDir`` of the user's state file (the server started last);
- the URL: ``--url``, else ``VANCETOPE_URL``, else the data directory's ``server.json``,
  else ``ws://VANCETOPE_HOST:VANCETOPE_PORT/ws``;
- the token: ``--token``, else ``VANCETOPE_TOKEN``, else ``DATA_DIR/token`` (``chat_token``:
  a refused one is said so with where it came from).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from vancetope_brain.config import Config, write_private
from vancetope_brain.errors import Unauthorized

SERVER_FILE = "server.json"


def user_state_file(env: Mapping[str, str]) -> Path:
    """The user's record of the server started last."""
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "vancetope" / SERVER_FILE


def record_server(config: Config, url: str, env: Mapping[str, str]) -> None:
    """Write where this server listens, for ``chat`` (see the module docstring). A state
    file that cannot be written (a read-only home) only costs the lookup from elsewhere."""
    write_private(config.data_dir / SERVER_FILE, json.dumps({"url": url}))
    with contextlib.suppress(OSError):
        write_private(user_state_file(env),
                      json.dumps({"url": url, "dataDir": str(config.data_dir.resolve())}))


def chat_config(config: Config, env: Mapping[str, str]) -> Config:
    """``config`` with the data directory ``chat`` uses."""
    if env.get("VANCETOPE_DATA_DIR") or config.data_dir.exists():
        return config
    recorded = _read(user_state_file(env)).get("dataDir")
    return replace(config, data_dir=Path(recorded)) if recorded else config


def server_url(config: Config, env: Mapping[str, str], url: str | None) -> str:
    """The WebSocket URL ``chat`` connects to."""
    return (url or env.get("VANCETOPE_URL") or _read(config.data_dir / SERVER_FILE).get("url")
            or f"ws://{config.host}:{config.port}/ws")


@dataclass(frozen=True)
class Token:
    """The token ``chat`` signs in with, and where it came from (``--token``,
    ``VANCETOPE_TOKEN`` or ``file``: the local user's token that ``serve`` writes into
    ``file``), so that a refusal says what to check."""

    secret: str
    source: str
    file: Path | None = None

    def advice(self, *, revoked: bool = False) -> str:
        """What to do about a token the server refused (``revoked``: one it took before)."""
        if self.source == "VANCETOPE_TOKEN":
            unset = f", or unset it to use the local user's token in {self.file}" \
                if self.file else ""
            return (f"the token comes from the VANCETOPE_TOKEN variable: "
                    f"{'replace' if revoked else 'check or replace'} it{unset}")
        if self.source == "file":
            if revoked:
                return f"`vancetope serve` writes a new one into {self.file} when it starts"
            return (f"the token comes from {self.file}, which `vancetope serve` writes when "
                    f"it starts (restart it if that token was revoked; is this the server that "
                    f"wrote it?), or pass --token or set VANCETOPE_TOKEN")
        return "pass a new one with --token" if revoked else \
            "check the token passed with --token"


def chat_token(config: Config, env: Mapping[str, str], token: str | None) -> Token:
    """The token ``chat`` signs in with (``token``: ``--token``'s)."""
    path = config.data_dir / "token"
    if token:
        return Token(token, "--token")
    if env.get("VANCETOPE_TOKEN"):
        return Token(env["VANCETOPE_TOKEN"], "VANCETOPE_TOKEN", path)
    if path.exists():
        return Token(path.read_text().strip(), "file", path)
    raise Unauthorized(f"no token: pass --token, set VANCETOPE_TOKEN, or run `vancetope serve` "
                       f"once so {path} exists")


def _read(path: Path) -> dict[str, str]:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}
