"""The SQLite backend's plumbing: connections, busy retries, the schema version, and the
column codecs the adapters share.

Schema versions (table ``schema_version``): 1 — the first; 2 — ``lanes`` gains
``pending_control`` and ``control_requested_ms`` (a requested lifecycle call,
kept next to ``status`` so that checking one and setting the other is a single
``BEGIN IMMEDIATE`` write); 3 — table ``projects`` (keyed by tenant and id:
project ids are unique per tenant), ``api_tokens`` gains ``user_id`` (filled
from ``doc``), and every existing tenant gets its ``default`` project, so
sessions created before projects existed keep a valid ``projectId``; 4 — tables
``recipes`` (tenant and project recipes; ``project_id`` is ``''`` for a
tenant-level recipe) and ``settings`` (stored values per tenant, project or
user; ``scope_id`` is ``''`` for the tenant itself); 5 — tables
``inbox_items`` (the user Inbox; a unique partial index on (tenant, origin
process, idempotency key) makes idempotent creates safe under concurrency) and
``notification_deliveries`` (the delivery log); 6 — ``recipes`` gains
``kind`` in its key (recipes, strategies, … share the table; older rows are
recipes); 7 — delivery attempts: ``messages`` gains ``attempts`` (turns begun
with the message, 0 for older rows) and ``dead_ms`` (when it was dead-lettered;
the mark itself is ``doc.deadLetter``), ``lanes`` gains ``turn_attempts`` (turns
begun since the last commit). Opening an older file migrates it in place; a
newer one is refused. The statements of versions 2, 3, 6 and 7 are the
``migrations`` of the adapters owning those tables (sessions, identity,
recipes, lanes); versions 4 and 5 only added tables, which every adapter's
``CREATE … IF NOT EXISTS`` makes at open.

Times in ``*_ms`` columns are milliseconds since the Unix epoch (``store/sql.py``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from pathlib import Path
from typing import Any, TypeVar

from vancetope_brain.errors import NotFound, StoreError
from vancetope_brain.models import Document

T = TypeVar("T")
D = TypeVar("D", bound=Document)
log = logging.getLogger(__name__)

SCHEMA_VERSION = 7
"""Bumped by a migration that changes an existing table (never by a new table)."""

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
)
"""

def create_schema(conn: sqlite3.Connection, tables: Iterable[str],
                  migrations: Sequence[Mapping[int, Sequence[str]]]) -> None:
    """Create or migrate the schema in one write transaction.

    ``tables``: each adapter's ``CREATE … IF NOT EXISTS`` script; ``migrations``:
    each adapter's statements per version. An older file first runs every
    migration above its version, in version order (adapters in registry order
    within one version), then the scripts, whose new indexes may need the new
    columns. Safe to run concurrently from several processes (the first one
    migrates, the others then find the current version). Raises ``StoreError``,
    having changed nothing, if the file was written by a newer schema than this
    code knows.
    """
    retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
    try:
        conn.execute(_VERSION_TABLE)
        row = conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
        if row is not None and row[0] > SCHEMA_VERSION:
            raise StoreError(
                f"SQLite store has schema version {row[0]}, newer than this server's "
                f"{SCHEMA_VERSION}; upgrade the server"
            )
        if row is not None and row[0] < SCHEMA_VERSION:  # a new file: the scripts create it
            log.info("migrating the SQLite store's schema from version %d to %d", row[0],
                     SCHEMA_VERSION)
            for version in range(row[0] + 1, SCHEMA_VERSION + 1):
                for owned in migrations:
                    for statement in owned.get(version, ()):
                        conn.execute(statement)
        for script in tables:
            for statement in statements(script):
                conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_version (id, version) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET version = excluded.version", (SCHEMA_VERSION,)
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def statements(script: str) -> Iterator[str]:
    """The statements of a ``;``-separated script, a trigger's body (``BEGIN … END``, with
    ``;`` inside) kept whole."""
    statement = ""
    for part in script.split(";"):
        statement += part + ";"
        if sqlite3.complete_statement(statement):
            if statement.strip(" \n;"):
                yield statement
            statement = ""


def marks(values: Sized) -> str:
    """``(?, ?, …)``, one parameter mark per value (for ``IN``)."""
    return f"({', '.join('?' * len(values))})"


def fts_query(words: Sequence[str], *, any_word: bool) -> str:
    """An FTS5 query matching text with any (else all) of ``words``, each quoted: nothing a
    user typed is FTS syntax."""
    return (" OR " if any_word else " ").join('"' + w.replace('"', '""') + '"' for w in words)


BUSY_DEADLINE = 10.0
"""Seconds a statement keeps retrying while another connection holds the write lock."""


def retry_busy(run: Callable[[], T]) -> T:
    """Run ``run`` until it stops failing with SQLITE_BUSY, for up to ``BUSY_DEADLINE``.

    SQLite's own busy handler sleeps whole milliseconds (and more the longer it
    waits), which dominates the tail latency of short write transactions from
    several processes; retrying after 50 µs, backing off to 2 ms, keeps waits
    close to the lock holder's actual hold time.
    """
    delay, deadline = 50e-6, time.monotonic() + BUSY_DEADLINE
    while True:
        try:
            return run()
        except sqlite3.OperationalError as e:
            if not _is_busy(e) or time.monotonic() > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.002)


def _is_busy(error: sqlite3.OperationalError) -> bool:
    text = str(error)
    return "locked" in text or "busy" in text


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (we issue BEGIN ourselves), WAL, no busy handler:
    callers retry SQLITE_BUSY themselves (``retry_busy``).

    ``check_same_thread=False`` so that ``close`` may run from any thread and a thread
    that ended may hand the connection to the next (``ThreadConnection``); one thread
    uses it at a time.
    """
    conn = sqlite3.connect(path, timeout=0.0, isolation_level=None, check_same_thread=False,
                           cached_statements=256)
    try:
        retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        # WAL + NORMAL: no fsync per commit; a commit survives a process crash.
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


class ThreadConnection:
    """One thread's connection, handed to the backend's idle list when the thread ends and its
    thread-local drops this, for the next thread to take.

    Opening a connection costs milliseconds (the file, its WAL and shared memory, the
    pragmas, the schema read at first use), which matters where threads are short-lived: a
    request thread, or a gevent worker, whose Celery pool runs every task in a greenlet of
    its own (``threading.local`` is per greenlet there). Reused, the connections of a
    process number at most the threads that used the store at once. One still in a
    transaction (its thread died inside one) is closed instead. In a forked child the
    inherited holders are dropped too; their connections stay referenced in the registry and
    are neither reused nor closed there, since SQLite forbids touching a connection across
    fork.
    """

    __slots__ = ("conn", "idle", "pid", "registry")

    def __init__(self, conn: sqlite3.Connection, registry: dict[sqlite3.Connection, int],
                 idle: list[sqlite3.Connection]) -> None:
        self.conn, self.pid, self.registry, self.idle = conn, os.getpid(), registry, idle
        registry[conn] = self.pid

    def __del__(self) -> None:
        if self.pid != os.getpid() or self.conn not in self.registry:
            return  # forked, or the backend was closed
        if self.conn.in_transaction:
            self.registry.pop(self.conn, None)
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
        else:
            self.idle.append(self.conn)


def load_one(cls: type[D], rows: list[Any], missing: str) -> D:
    """The document in the ``doc`` column of the first of ``rows`` (a point read);
    ``NotFound(missing)`` when there is none."""
    if not rows:
        raise NotFound(missing)
    return cls.load(json.loads(rows[0][0]))


def load_all(cls: type[D], rows: Iterable[Any]) -> list[D]:
    """The documents in the ``doc`` column of ``rows``, in order."""
    return [cls.load(json.loads(row[0])) for row in rows]


def equal_clauses(tenant_id: str, **columns: str | None) -> tuple[list[str], list[Any]]:
    """The clauses ``tenant_id = ?`` and ``column = ?`` for each given value, and their
    parameters."""
    given = {column: value for column, value in columns.items() if value is not None}
    return ["tenant_id = ?", *(f"{column} = ?" for column in given)], [tenant_id, *given.values()]
