"""How ``vancetope chat`` finds the server ``vancetope serve`` started, from any folder, and
how ``serve`` keeps to one server per data directory.

``serve`` holds ``ServerLock`` — an exclusive ``flock`` on ``DATA_DIR/serve.lock`` — for its
whole life: a second ``serve`` of the same data directory is refused (two would share the
SQLite file with an in-memory Redis each, and split every session between them). The OS
drops the lock with the process, however it ends, so a crash leaves no stale lock.

``serve`` records its WebSocket URL and pid in ``DATA_DIR/server.json`` once it listens,
and removes it when it stops; so that a chat started in another folder finds it too, it
records ``{url, dataDir}`` in the user's state file (``$XDG_STATE_HOME/vancetope/server.json``,
by default ``~/.local/state/vancetope/``); both mode 0600 — they name no secret, but say
where the token lies. ``chat`` then takes:

- the data directory: ``VANCETOPE_DATA_DIR`` if set, else ``./.vancetope`` if it exists,
  else the ``dataDir`` of the user's state file (the server started last);
- the URL: ``--url``, else ``VANCETOPE_URL``, else the data directory's ``server.json``,
  else ``ws://VANCETOPE_HOST:VANCETOPE_PORT/ws``;
- the token: ``--token``, else ``VANCETOPE_TOKEN``, else ``DATA_DIR/token`` (``chat_token``:
  a refused one is said so with where it came from).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from vancetope_brain.config import PRIVATE_DIR, Config, write_private
from vancetope_brain.errors import ConfigError, Conflict, Unauthorized

SERVER_FILE = "server.json"
LOCK_FILE = "serve.lock"


class ServerLock:
    """The one ``serve`` of a data directory (see the module docstring)."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._fd: int | None = None

    def take(self, *, create: bool) -> None:
        """Hold the lock, or raise ``Conflict`` naming the server that does. Without
        ``create`` nothing is made: a data directory without a lock file is left for a
        later ``take(create=True)`` (``serve`` makes nothing before its port is bound)."""
        if self._fd is not None:
            return
        path = self._data_dir / LOCK_FILE
        if create:
            self._data_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
        except FileNotFoundError:
            if create:
                raise
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise Conflict(_running(self._data_dir, holder)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for the refusal above
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def _running(data_dir: Path, pid: str) -> str:
    record = _read(data_dir / SERVER_FILE)  # a crashed server's may be left: match the pid
    where = f"at {record['url']}, pid {pid}" if record.get("url") and \
        str(record.get("pid")) == pid else f"pid {pid or '?'}, still starting"
    return (f"a Vancetope server already serves the data directory {data_dir} ({where}); "
            f"connect to it with `vancetope chat`, stop it first, or start this one with "
            f"another data directory (--data-dir or VANCETOPE_DATA_DIR)")


def user_state_file(env: Mapping[str, str]) -> Path:
    """The user's record of the server started last."""
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "vancetope" / SERVER_FILE


def record_server(config: Config, url: str, env: Mapping[str, str]) -> None:
    """Write where this server listens, for ``chat`` (see the module docstring). A state
    file that cannot be written (a read-only home) only costs the lookup from elsewhere."""
    write_private(config.data_dir / SERVER_FILE, json.dumps({"url": url, "pid": os.getpid()}))
    with contextlib.suppress(OSError):
        write_private(user_state_file(env),
                      json.dumps({"url": url, "dataDir": str(config.data_dir)}))


def forget_server(config: Config) -> None:
    """This server stopped: ``DATA_DIR/server.json`` no longer names a port it listens on."""
    (config.data_dir / SERVER_FILE).unlink(missing_ok=True)


def chat_config(config: Config, env: Mapping[str, str]) -> Config:
    """``config`` with the data directory ``chat`` uses."""
    if env.get("VANCETOPE_DATA_DIR") or config.data_dir.exists():
        return config
    recorded = _read(user_state_file(env)).get("dataDir")
    return replace(config, data_dir=Path(recorded)) if recorded else config


def server_url(config: Config, env: Mapping[str, str], url: str | None) -> str:
    """The WebSocket URL ``chat`` connects to."""
    given = url or env.get("VANCETOPE_URL")
    if given:
        return websocket_url(given)
    return _read(config.data_dir / SERVER_FILE).get("url") or f"ws://{config.host}:{config.port}/ws"


def websocket_url(url: str) -> str:
    """``url`` as the gateway's WebSocket URL: the address a browser opens
    (``http(s)://HOST:PORT``) becomes ``ws(s)://…``, and one without a path gets ``/ws``."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme.lower(), parts.scheme.lower())
    if scheme not in ("ws", "wss") or not parts.hostname:
        raise ConfigError(f"{url!r} is not a server address: give http://HOST:PORT (or "
                          "ws://HOST:PORT/ws), as `vancetope serve` prints it")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") or "/ws", parts.query, ""))


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
