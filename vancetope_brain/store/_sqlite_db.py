"""The SQLite adapter's connections and schema (DDL and its version check).

Each document is kept whole as camelCase JSON in ``doc``; the other columns
exist for indexes or because they change often. Columns that change after
insert (``lanes.*``, ``messages.drained_*``, ``api_tokens.revoked``) are
authoritative and the adapter merges them over ``doc`` on load, so a hot
counter update never rewrites a large document.

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
``notification_deliveries`` (the delivery log). Opening an older file
migrates it in place (``_MIGRATIONS``); a newer one is refused.

Times in ``*_ms`` columns are milliseconds since the Unix epoch (``to_ms``),
so they order and compare as integers.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from vancetope_brain.errors import NotFound, StoreError
from vancetope_brain.models import Document

T = TypeVar("T")
D = TypeVar("D", bound=Document)

SCHEMA_VERSION = 5

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
)
"""

_PROJECTS_TABLE = """
CREATE TABLE IF NOT EXISTS projects (
    tenant_id TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (tenant_id, id)
)
"""

_RECIPES_TABLE = """
CREATE TABLE IF NOT EXISTS recipes (
    tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, name TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant_id, project_id, name)
)
"""

_SETTINGS_TABLE = """
CREATE TABLE IF NOT EXISTS settings (
    tenant_id TEXT NOT NULL, level TEXT NOT NULL, scope_id TEXT NOT NULL, key TEXT NOT NULL,
    doc TEXT NOT NULL, PRIMARY KEY (tenant_id, level, scope_id, key)
)
"""

# The columns are copies of document fields for the indexes, rewritten with ``doc``
# on every save; the other filters (tags, requiresAction) read ``doc``.
_INBOX_ITEMS_TABLE = """
CREATE TABLE IF NOT EXISTS inbox_items (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, assigned_to TEXT NOT NULL,
    status TEXT NOT NULL, criticality TEXT NOT NULL, origin_process_id TEXT,
    origin_session_id TEXT, idempotency_key TEXT, created_ms INTEGER NOT NULL,
    resolved_ms INTEGER, revision INTEGER NOT NULL, doc TEXT NOT NULL
)
"""

_DELIVERIES_TABLE = """
CREATE TABLE IF NOT EXISTS notification_deliveries (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, item_id TEXT NOT NULL, user_id TEXT NOT NULL,
    channel TEXT NOT NULL, status TEXT NOT NULL, created_ms INTEGER NOT NULL, doc TEXT NOT NULL
)
"""

_DDL = f"""
CREATE TABLE IF NOT EXISTS tenants (id TEXT PRIMARY KEY, doc TEXT NOT NULL);
{_PROJECTS_TABLE};
{_RECIPES_TABLE};
{_SETTINGS_TABLE};
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS users_by_tenant ON users (tenant_id);
-- (Columns added by a migration must be added in _MIGRATIONS too.)
CREATE TABLE IF NOT EXISTS api_tokens (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
    revoked INTEGER NOT NULL, doc TEXT NOT NULL, user_id TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tokens_by_user ON api_tokens (tenant_id, user_id);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, user_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions (tenant_id, user_id, created_ms);
CREATE TABLE IF NOT EXISTS processes (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, session_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS processes_by_session ON processes (tenant_id, session_id, created_ms);
-- The per-turn hot fields of a process, in a narrow row of their own.
-- (Columns added by a migration must be added in _MIGRATIONS too.)
CREATE TABLE IF NOT EXISTS lanes (
    process_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, status TEXT NOT NULL,
    epoch INTEGER NOT NULL, next_seq INTEGER NOT NULL, next_chat_seq INTEGER NOT NULL,
    pending_control TEXT, control_requested_ms INTEGER
);
-- The sweeper's lifecycle calls left waiting: only lanes with a pending call.
CREATE INDEX IF NOT EXISTS lanes_control
    ON lanes (control_requested_ms) WHERE pending_control IS NOT NULL;
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, target_process_id TEXT NOT NULL,
    seq INTEGER NOT NULL, idempotency_key TEXT, created_ms INTEGER NOT NULL,
    drained_at TEXT, drained_epoch INTEGER, doc TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_seq ON messages (tenant_id, target_process_id, seq);
CREATE UNIQUE INDEX IF NOT EXISTS messages_idempotency
    ON messages (tenant_id, target_process_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Partial indexes hold only pending rows, so a turn's inbox read and the
-- sweeper never walk drained history.
CREATE INDEX IF NOT EXISTS messages_pending
    ON messages (tenant_id, target_process_id, seq) WHERE drained_at IS NULL;
CREATE INDEX IF NOT EXISTS messages_stale ON messages (created_ms) WHERE drained_at IS NULL;
CREATE TABLE IF NOT EXISTS chat (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    seq INTEGER NOT NULL, role TEXT NOT NULL, source_message_id TEXT, doc TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS chat_seq ON chat (tenant_id, process_id, seq);
CREATE UNIQUE INDEX IF NOT EXISTS chat_source
    ON chat (tenant_id, process_id, source_message_id, role)
    WHERE source_message_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    epoch INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_by_process ON turns (tenant_id, process_id, epoch);
-- The user Inbox and its notification delivery log.
{_INBOX_ITEMS_TABLE};
CREATE INDEX IF NOT EXISTS inbox_by_assignee
    ON inbox_items (tenant_id, assigned_to, status, criticality);
CREATE INDEX IF NOT EXISTS inbox_by_session ON inbox_items (tenant_id, origin_session_id, status);
CREATE INDEX IF NOT EXISTS inbox_by_process ON inbox_items (tenant_id, origin_process_id, status);
CREATE UNIQUE INDEX IF NOT EXISTS inbox_idempotency
    ON inbox_items (tenant_id, origin_process_id, idempotency_key)
    WHERE origin_process_id IS NOT NULL AND idempotency_key IS NOT NULL;
{_DELIVERIES_TABLE};
CREATE INDEX IF NOT EXISTS deliveries_by_item
    ON notification_deliveries (tenant_id, item_id, created_ms);
CREATE INDEX IF NOT EXISTS deliveries_by_user
    ON notification_deliveries (tenant_id, user_id, created_ms);
CREATE INDEX IF NOT EXISTS deliveries_queued
    ON notification_deliveries (channel, status, created_ms);
"""


# version → the statements that bring a file of the version before it up to it.
# They run before ``_DDL``, whose new indexes may need the new columns.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("ALTER TABLE lanes ADD COLUMN pending_control TEXT",
        "ALTER TABLE lanes ADD COLUMN control_requested_ms INTEGER"),
    3: ("ALTER TABLE api_tokens ADD COLUMN user_id TEXT NOT NULL DEFAULT ''",
        "UPDATE api_tokens SET user_id = json_extract(doc, '$.userId')",
        _PROJECTS_TABLE,
        # The document IdentityService.create_tenant writes, dated like its tenant.
        "INSERT OR IGNORE INTO projects (tenant_id, id, doc) SELECT id, 'default', "
        "json_object('schemaVersion', 1, 'id', 'default', 'tenantId', id, 'name', 'default', "
        "'groupId', NULL, 'createdAt', json_extract(doc, '$.createdAt')) FROM tenants"),
    4: (_RECIPES_TABLE, _SETTINGS_TABLE),
    5: (_INBOX_ITEMS_TABLE, _DELIVERIES_TABLE),
}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_ms(moment: datetime) -> int:
    """Milliseconds since the Unix epoch; naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int | None) -> datetime | None:
    """The aware UTC datetime of a ``*_ms`` column (None stays None)."""
    return None if ms is None else _EPOCH + timedelta(milliseconds=ms)


def create_schema(conn: sqlite3.Connection) -> None:
    """Create or migrate the schema in one write transaction.

    Safe to run concurrently from several processes (the first one migrates,
    the others then find the current version). Raises ``StoreError``, having
    changed nothing, if the file was written by a newer schema than this code
    knows.
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
        if row is not None:  # a new file has nothing to migrate: _DDL creates it current
            for version in range(row[0] + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS.get(version, ()):
                    conn.execute(statement)
        for statement in _DDL.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_version (id, version) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET version = excluded.version", (SCHEMA_VERSION,)
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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

    ``check_same_thread=False`` only so that ``close`` may run from any
    thread; each connection is used by the thread that opened it.
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
    """One thread's connection, closed when the thread ends and its thread-local drops this.

    Threads that serve one request each would otherwise leak a connection (and
    its file descriptors) apiece. In a forked child the inherited holders are
    dropped too; their connections stay referenced in the registry and are
    never closed there, since SQLite forbids touching a connection across fork.
    """

    __slots__ = ("conn", "pid", "registry")

    def __init__(self, conn: sqlite3.Connection, registry: dict[sqlite3.Connection, int]) -> None:
        self.conn, self.pid, self.registry = conn, os.getpid(), registry
        registry[conn] = self.pid

    def __del__(self) -> None:
        if self.pid == os.getpid() and self.registry.pop(self.conn, None) is not None:
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()


def load_one(cls: type[D], rows: list[Any], missing: str) -> D:
    """The document in the ``doc`` column of the first of ``rows`` (a point read);
    ``NotFound(missing)`` when there is none."""
    if not rows:
        raise NotFound(missing)
    return cls.load(json.loads(rows[0][0]))
