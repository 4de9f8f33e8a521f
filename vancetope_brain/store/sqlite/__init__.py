"""The SQLite backend: one file, WAL, safe across threads and OS processes on one host
(the reference implementation of every port).

Rule: only this package opens the file; its adapters reach it through
``SqliteBackend.write`` / ``read`` / ``execute`` and never hold a connection
past one call. Each module below is the adapter of one port (``sessions.py``
implements ``SessionStore``, and so on); ``_db.py`` is the plumbing.

Each document is kept whole as camelCase JSON in ``doc``; the other columns
exist for indexes or because they change often. Columns that change after
insert (``lanes.*``, ``messages.drained_*``, ``api_tokens.revoked``) are
authoritative and the adapter merges them over ``doc`` on load, so a hot
counter update never rewrites a large document.

Schema: each adapter owns its tables. Its ``tables`` class attribute is the
``CREATE TABLE/INDEX IF NOT EXISTS`` script of the tables it owns, run at every
open, so a new port's adapter brings its own tables with no version bump. Its
``migrations`` attribute maps a schema version to the statements that bring a
table it owns up to that version (``ALTER TABLE`` and data fixes: what
``IF NOT EXISTS`` cannot do); only those bump ``_db.SCHEMA_VERSION``, whose
docstring is the history. Atomic writes that span ports (``commit_turn``
inserting processes, appending messages and clearing the turn journal,
``save_inbox_item`` appending a message) call the owning adapter's module-level
``…_in(conn, …)`` function inside their one transaction.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from vancetope_brain.config import PRIVATE_DIR
from vancetope_brain.errors import Conflict, StoreError
from vancetope_brain.store.backend import Adapter, Backend, Port, import_adapters
from vancetope_brain.store.sqlite._db import ThreadConnection, connect, create_schema, retry_busy


class SqliteAdapter(Adapter):
    """Base of the SQLite adapters: each keeps its backend and declares its schema."""

    registry: ClassVar[dict[type[Port], type[Any]]] = {}
    tables: ClassVar[str] = ""
    """``CREATE … IF NOT EXISTS`` statements (``;``-separated) of the tables it owns."""
    migrations: ClassVar[Mapping[int, Sequence[str]]] = {}
    """Schema version → the statements that bring its tables of the version before up."""

    def __init__(self, db: SqliteBackend) -> None:
        self.db = db


class SqliteBackend(Backend):
    """The ports on one SQLite file.

    One connection per thread at a time (re-opened after ``fork``; a thread that ends hands
    its connection to the next, see ``ThreadConnection``), WAL journal; a
    statement that meets another writer's lock retries every 50 µs–2 ms for up
    to 10 s (``retry_busy``). Every write runs in a ``BEGIN IMMEDIATE``
    transaction, which takes the file's single write lock up front, so each
    writing method of every adapter is atomic across threads and processes.
    ``synchronous=NORMAL``: a returned write survives a crash of any process,
    but the last commits may be lost on power failure or an OS crash (WAL then
    skips an fsync per commit).
    """

    adapters = SqliteAdapter.registry

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._local = threading.local()
        # Every connection opened, with the pid that opened it: close() must
        # not touch what a forked child inherited.
        self._connections: dict[sqlite3.Connection, int] = {}
        # Connections of threads that ended, for the next thread (``ThreadConnection``).
        self._idle: list[sqlite3.Connection] = []
        # One writer per OS process at a time: threads of this process queue on a lock
        # (no CPU) instead of all spinning on SQLite's file lock; only other processes
        # are waited for with retry_busy.
        self._writer = threading.Lock()
        owners = list(self.adapters.values())
        try:
            self.path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            # Readable by its owner only; SQLite gives its -wal and -shm files the same mode.
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            create_schema(self._conn(), [owner.tables for owner in owners],
                          [owner.migrations for owner in owners])
        except (OSError, sqlite3.Error) as e:
            self.close()
            raise StoreError(f"cannot open SQLite store {self.path}: {e}") from e
        except StoreError:
            self.close()
            raise
        super().__init__()

    def _conn(self) -> sqlite3.Connection:
        owned: ThreadConnection | None = getattr(self._local, "owned", None)
        # A connection inherited through fork must not be used by the child.
        if owned is None or owned.pid != os.getpid():
            conn = self._reuse() or connect(self.path)
            owned = self._local.owned = ThreadConnection(conn, self._connections, self._idle)
        return owned.conn

    def _reuse(self) -> sqlite3.Connection | None:
        """An idle connection this process opened, if any (one inherited through fork is
        the parent's)."""
        while self._idle:
            try:
                conn = self._idle.pop()
            except IndexError:  # another thread took the last one
                return None
            if self._connections.get(conn) == os.getpid():
                return conn
        return None

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.IntegrityError as e:
            raise Conflict(f"duplicate record: {e}") from e
        except sqlite3.Error as e:
            raise StoreError(f"SQLite store {self.path}: {e}") from e

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction, rolled back on any exception."""
        with self._errors(), self._writer:
            conn = self._conn()
            retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def read(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """The rows of one query, outside any transaction."""
        with self._errors():
            conn = self._conn()
            return retry_busy(lambda: conn.execute(sql, params).fetchall())

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> sqlite3.Cursor:
        """One writing statement in its own transaction."""
        with self.write() as conn:
            return conn.execute(sql, params)

    def schema_version(self) -> int:
        return int(self.read("SELECT version FROM schema_version WHERE id = 1", ())[0][0])

    def ping(self) -> None:
        self.read("SELECT 1", ())

    def close(self) -> None:
        """Close every connection this process opened (other threads' too)."""
        pid = os.getpid()
        for conn, opener in list(self._connections.items()):
            if opener == pid:
                self._connections.pop(conn, None)
                conn.close()
        self._idle.clear()
        self._local = threading.local()


import_adapters(__name__, __path__)
