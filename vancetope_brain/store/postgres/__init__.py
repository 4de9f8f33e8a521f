"""The PostgreSQL backend (psycopg 3 with a connection pool): the store of the distributed
shape, with real transactions across hosts.

Rule: only this package talks to the server; its adapters reach it through
``PostgresBackend.write`` / ``read`` / ``execute`` and never hold a connection
past one call. Each module below is the adapter of one port (``sessions.py``
implements ``SessionStore``, and so on); ``_db.py`` is the plumbing.

The layout follows the SQLite backend's: each document is kept whole as camelCase
``jsonb`` in ``doc``; the other columns exist for indexes or because they change
often, and the columns that change after insert are authoritative and merged over
``doc`` on load. Times in ``*_ms`` columns are milliseconds since the Unix epoch.

Transactions: every write that must be atomic is one transaction at READ COMMITTED.
Where two writers could interleave, the transaction first takes a row lock
(``SELECT … FOR UPDATE`` on the row it decides on: the process's ``lanes`` row for
everything a lane orders, so its sequence numbers are gap-free and become visible
in order) or relies on a unique index and ``ON CONFLICT``; work that several
takers share is taken with ``FOR UPDATE SKIP LOCKED``. Each adapter's docstring
says which. Atomic writes that span ports call the owning adapter's module-level
``…_in(conn, …)`` function inside their one transaction, as on SQLite. The hottest
writes (an ordinary turn's ``commit_turn``, ``record_steps``) are instead one statement
each, a call of a PL/pgSQL function of this package (``*.sql``, ``functions`` below) that
makes the same writes under the same lock in one round trip. ``read`` and ``execute`` (one
statement outside a transaction, with ``%s`` placeholders) run through the connection's
``_db.Statements`` rather than a psycopg cursor: about half the client CPU per statement.

Schema: each adapter owns its tables (its ``tables`` script of ``CREATE … IF NOT
EXISTS``) and its ``migrations`` per schema version; ``_db.create_schema`` runs them
at open under an advisory lock, so pods that start together migrate once.

Faults: a statement running longer than ``STATEMENT_TIMEOUT_MS``, or a transaction left
idle that long (a frozen process holding row locks), is ended by the server; a lost
connection (a server restart) fails the call with ``StoreError``, which every caller
already treats as a runtime failure (the turn is retried, the request answered 503), and
the pool replaces broken connections, trying at least every ``RECONNECT_MAX_DELAY``
seconds while the server is away (a call meanwhile waits up to ``POOL_WAIT`` seconds for
a connection). Nothing accepted is lost: a write committed or raised — and one that
raised because its connection was lost during COMMIT may have committed too, so callers
re-read rather than assume (a retried turn finds its messages drained; a send repeated
with its idempotency key is stored once). tests/chaos crashes the server under load.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from time import monotonic
from typing import Any, ClassVar, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from vancetope_brain.config import redacted_url
from vancetope_brain.errors import ConfigError, Conflict, StoreError
from vancetope_brain.store.backend import Adapter, Backend, Port, import_adapters
from vancetope_brain.store.postgres._db import (
    STATEMENT_TIMEOUT_MS,
    Statements,
    create_schema,
    function,
    register_dumpers,
)

POOL_MAX = 10
"""Connections one OS process opens at most, unless the URL's ``pool_max`` says otherwise;
a call that finds them all busy waits up to ``POOL_WAIT`` seconds, then fails."""
POOL_WAIT = 30.0
IDLE_CHECK = 1.0
"""Seconds a connection may lie idle in the pool before it is checked as it is taken."""
RECONNECT_MAX_DELAY = 1.0
"""Most seconds between two attempts of the pool to replace a lost connection, so that
calls find the server at most about this long after it is back (see ``_Pool``)."""


class PostgresAdapter(Adapter):
    """Base of the PostgreSQL adapters: each keeps its backend and declares its schema."""

    registry: ClassVar[dict[type[Port], type[Any]]] = {}
    tables: ClassVar[str] = ""
    """``CREATE … IF NOT EXISTS`` statements (``;``-separated) of the tables it owns."""
    migrations: ClassVar[Mapping[int, Sequence[str]]] = {}
    """Schema version → the statements that bring its tables of the version before up."""
    functions: ClassVar[tuple[str, ...]] = ()
    """Names of the ``<name>.sql`` files of this package whose functions it calls (each one
    ``CREATE OR REPLACE FUNCTION``, made at every open under its digest name: ``function``)."""

    def __init__(self, db: PostgresBackend) -> None:
        self.db = db

    def release(self) -> None:
        """Close what the adapter holds outside the pool (called when the backend closes)."""


def _split_url(url: str) -> tuple[str, int]:
    """The libpq URL without our own ``pool_max`` parameter, and that parameter."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    pool_max = POOL_MAX
    for name, value in query:
        if name == "pool_max":
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(f"pool_max in VANCETOPE_STORE_URL must be a positive "
                                  f"integer, not {value!r}")
            pool_max = int(value)
    rest = urlencode([(n, v) for n, v in query if n != "pool_max"])
    return urlunsplit(parts._replace(query=rest)), pool_max


class _Connection(psycopg.Connection[Any]):
    """A connection of the pool, with what the backend keeps for it."""

    statements: Statements
    """Its statements outside a transaction (``read``, ``execute``); made by ``_configure``."""
    used = 0.0
    """``monotonic()`` when it was last given back to the pool."""


def _configure(conn: _Connection, timeout_ms: int) -> None:
    register_dumpers(conn)
    conn.statements = Statements(conn)
    conn.execute(f"SET statement_timeout = {timeout_ms}")
    # A process frozen inside a transaction (SIGSTOP, a long GC) must not hold its row locks
    # past its lease: the server ends the transaction, and the frozen turn is fenced anyway.
    conn.execute(f"SET idle_in_transaction_session_timeout = {timeout_ms}")
    conn.execute("SET TIME ZONE 'UTC'")


class _Reconnect(AttemptWithBackoff):
    """psycopg_pool's reconnect attempt with its back-off capped at ``RECONNECT_MAX_DELAY``."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_MAX_DELAY)


class _Pool(ConnectionPool[_Connection]):
    """The connection pool, reconnecting at least every ``RECONNECT_MAX_DELAY`` seconds.

    psycopg_pool replaces a lost connection in the background, doubling the delay between
    attempts without bound (1, 2, 4, 8 … s, for up to ``reconnect_timeout``), while the
    calls that need a connection wait for it (``POOL_WAIT``): after a server restart that
    took D seconds, the store answered again only up to about D seconds after the server
    did (a 20 s outage: 9 s later; tests/chaos/test_own_postgres.py). ``_add_connection``
    (every replacement and growth starts there, and its retries carry the attempt along)
    is psycopg_pool's own, not public; that test fails if it stops being called."""

    def _add_connection(self, attempt: AttemptWithBackoff | None,
                        growing: bool = False) -> None:
        super()._add_connection(attempt or _Reconnect(timeout=self.reconnect_timeout),
                                growing=growing)


class PostgresBackend(Backend):
    """The ports on one PostgreSQL database (or, with ``options=-csearch_path=S`` in the
    URL, one schema of it).

    ``url`` is a libpq URL (``postgresql://user@host:5432/db``), plus an optional
    ``pool_max`` parameter of ours. The pool opens connections lazily (one at first,
    up to ``pool_max``) in autocommit mode: a single statement is its own
    transaction, and ``write`` opens an explicit one.
    """

    adapters = PostgresAdapter.registry

    def __init__(self, url: str) -> None:
        conninfo, pool_max = _split_url(url)
        self.pool: ConnectionPool[_Connection] = _Pool(
            conninfo, connection_class=_Connection, min_size=1, max_size=pool_max,
            timeout=POOL_WAIT, open=False, kwargs={"autocommit": True}, name="vancetope-store",
            # The bound is the backend's, read once here: every connection the pool opens
            # later (growth, replacement after a restart, in a background thread) gets it.
            configure=partial(_configure, timeout_ms=STATEMENT_TIMEOUT_MS))
        owners = list(self.adapters.values())
        try:
            # A connection of its own, so that an unreachable server fails at once with
            # libpq's reason (the pool would retry in the background until its wait ends).
            with psycopg.connect(conninfo, autocommit=True) as conn:
                create_schema(conn, [owner.tables for owner in owners],
                              [owner.migrations for owner in owners],
                              functions=[function(name).create for owner in owners
                                         for name in owner.functions])
        except psycopg.Error as e:
            raise StoreError(f"cannot open PostgreSQL store {redacted_url(url)}: {e}") from e
        self.pool.open()
        super().__init__()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.errors.UniqueViolation as e:
            raise Conflict(f"duplicate record: {e.diag.constraint_name or e}") from e
        except psycopg.OperationalError as e:
            # A lost server leaves every idle connection of the pool broken too: drop them
            # now rather than failing one call per stale connection.
            self.pool.check()
            raise StoreError(f"PostgreSQL store: {e}") from e
        except (psycopg.Error, PoolTimeout) as e:
            raise StoreError(f"PostgreSQL store: {e}") from e

    @contextmanager
    def _connection(self) -> Iterator[_Connection]:
        """A connection of the pool for one call, given back after the block (``getconn`` /
        ``putconn`` rather than ``pool.connection()``, whose ``with conn`` adds a ``commit()``
        that is a no-op on these autocommit connections but costs ~15 µs of CPU per call;
        ``putconn`` still rolls back a connection left in a transaction and replaces a
        broken one). One that lay idle longer
        than ``IDLE_CHECK`` is first checked with an empty query (before any statement of
        ours, so nothing can have run): if the server went away meanwhile (a restart while
        a user was typing), the stale connections are dropped and a fresh one is taken,
        instead of failing the call."""
        conn = self.pool.getconn()
        if monotonic() - conn.used > IDLE_CHECK:
            try:
                conn.execute("")
            except psycopg.OperationalError:
                self.pool.putconn(conn)  # broken: the pool discards it
                self.pool.check()
                conn = self.pool.getconn()
        try:
            yield conn
        finally:
            conn.used = monotonic()
            self.pool.putconn(conn)

    @contextmanager
    def write(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on one connection: committed when the block ends, rolled back
        on any exception."""
        with self._errors(), self._connection() as conn, conn.transaction():
            yield conn

    def read(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """The rows of one statement (a query, or a write ``… RETURNING``), which is its
        own transaction (through ``Statements`` unless its parameters are named)."""
        with self._errors(), self._connection() as conn:
            result = None if isinstance(params, Mapping) else conn.statements.run(sql, params)
            if result is None:
                return conn.execute(sql, params).fetchall()
            return conn.statements.rows(result)

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        """One writing statement in its own transaction; the number of rows it changed."""
        with self._errors(), self._connection() as conn:
            result = None if isinstance(params, Mapping) else conn.statements.run(sql, params)
            if result is None:
                return conn.execute(sql, params).rowcount
            rows = result.command_tuples
            return -1 if rows is None else rows

    def schema_version(self) -> int:
        return int(self.read("SELECT version FROM schema_version WHERE id = 1")[0][0])

    def ping(self) -> None:
        self.read("SELECT 1")

    def close(self) -> None:
        for adapter in self._ports.values():
            cast(PostgresAdapter, adapter).release()
        self.pool.close()


import_adapters(__name__, __path__)
