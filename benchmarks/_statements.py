"""Statements and connection checkouts per part of a turn, counted in-process.

    counter = StatementCounter.install(store)      # the product's open store
    counter.phase = "turn"                         # what the next statements count towards
    … run the parts …
    counter.report(iterations)                     # per part, per store call, per iteration

What is counted, on the store the benchmark opened (no product code is changed; the
backend's methods and the driver's cursor are wrapped in this process only):

- **PostgreSQL**: every statement psycopg sends (``Cursor.execute`` / ``executemany``, and
  the backend's ``_db.Statements.run`` for ``read``/``execute`` outside a transaction: an
  ``executemany`` of n rows counts n, as the server runs n; ``BEGIN``/``COMMIT`` of a
  ``write`` block count 2; the pool's idle check, an empty query, is counted apart), every
  connection taken from the pool (``ConnectionPool.getconn``), and the server backend's
  CPU time during each statement (``/proc/PID/schedstat`` of the connection's backend, in
  ns, read before and after: the server's work for a statement is done when its result
  is back; the server must run on this host).
- **SQLite**: every statement the connection runs (``set_trace_callback``: ``BEGIN
  IMMEDIATE`` and ``COMMIT`` included); a SQLite store has no pool, so no checkouts.

Each statement is attributed to the store call it ran under: the outermost frame in
``vancetope_brain/store/`` (e.g. ``PostgresLanes.commit_turn``), so a port method that
runs several statements shows them together.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from typing import Any

_STORE_DIR = "/vancetope_brain/store/"


def _store_call() -> str:
    """The outermost store frame of the calling thread's stack, as ``Class.method``."""
    frame = sys._getframe(2)
    found = "?"
    while frame is not None:
        if _STORE_DIR in frame.f_code.co_filename:
            owner = frame.f_locals.get("self")
            name = frame.f_code.co_name
            found = f"{type(owner).__name__}.{name}" if owner is not None else name
        frame = frame.f_back  # type: ignore[assignment]
    return found


class StatementCounter:
    """Counts per ``phase`` (set by the caller) and per store call; thread-safe."""

    def __init__(self) -> None:
        self.phase = "setup"
        self.enabled = False
        self.statements: Counter[tuple[str, str]] = Counter()
        self.checkouts: Counter[tuple[str, str]] = Counter()
        self.idle_checks: Counter[str] = Counter()
        self.server_ns: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def _count(self, what: Counter[tuple[str, str]], n: int = 1) -> None:
        if self.enabled:
            with self._lock:
                what[(self.phase, _store_call())] += n

    @classmethod
    def install(cls, store: Any) -> StatementCounter:
        counter = cls()
        backend = store
        kind = type(backend).__name__
        if kind == "PostgresBackend":
            counter._install_postgres(backend)
        elif kind == "SqliteBackend":
            counter._install_sqlite(backend)
        else:
            raise ValueError(f"cannot count statements on {kind}")
        return counter

    def _install_postgres(self, backend: Any) -> None:
        import psycopg

        execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
        counter = self

        def server_ns(cur: Any) -> int:
            pid = cur._pgconn.backend_pid  # a cursor's or a ``Statements``' libpq connection
            try:
                with open(f"/proc/{pid}/schedstat") as f:
                    return int(f.read().split()[0])
            except OSError:
                return 0

        def timed(cur: Any, run: Any) -> Any:
            if not counter.enabled:
                return run()
            start = server_ns(cur)
            try:
                return run()
            finally:
                with counter._lock:
                    counter.server_ns[(counter.phase, _store_call())] += server_ns(cur) - start

        def counted_execute(cur: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if query == "":
                if counter.enabled:
                    counter.idle_checks[counter.phase] += 1
            else:
                counter._count(counter.statements)
            return timed(cur, lambda: execute(cur, query, *args, **kwargs))

        def counted_executemany(cur: Any, query: Any, params_seq: Any, *args: Any,
                                **kwargs: Any) -> Any:
            params_seq = list(params_seq)
            counter._count(counter.statements, len(params_seq))
            return timed(cur, lambda: executemany(cur, query, params_seq, *args, **kwargs))

        psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = counted_executemany  # type: ignore[method-assign]
        # The backend's own path for a statement outside a transaction (not in older code).
        statements = getattr(sys.modules[f"{type(backend).__module__}._db"], "Statements", None)
        if statements is not None:
            run = statements.run

            def counted_run(kept: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
                result = timed(kept, lambda: run(kept, sql, *args, **kwargs))
                if result is not None:  # None: psycopg's cursor runs it, counted there
                    counter._count(counter.statements)
                return result

            statements.run = counted_run
        pool = backend.pool
        getconn = pool.getconn

        def counted_getconn(*args: Any, **kwargs: Any) -> Any:
            counter._count(counter.checkouts)
            return getconn(*args, **kwargs)

        pool.getconn = counted_getconn
        transaction = psycopg.Connection.transaction
        from contextlib import contextmanager

        @contextmanager
        def counted_transaction(conn: Any, *args: Any, **kwargs: Any) -> Any:
            counter._count(counter.statements, 2)  # BEGIN and COMMIT (or ROLLBACK)
            cur = conn.cursor()
            # BEGIN, then COMMIT on leaving (its WAL flush is the server's work then)
            manager = transaction(conn, *args, **kwargs)
            tx = timed(cur, manager.__enter__)
            try:
                yield tx
            except BaseException:
                failure = sys.exc_info()
                if not timed(cur, lambda: manager.__exit__(*failure)):
                    raise
            else:
                timed(cur, lambda: manager.__exit__(None, None, None))

        psycopg.Connection.transaction = counted_transaction  # type: ignore[assignment]

    def _install_sqlite(self, backend: Any) -> None:
        conn_of = backend._conn
        traced: set[int] = set()
        counter = self

        def trace(sql: str) -> None:
            counter._count(counter.statements)

        def traced_conn() -> Any:
            conn = conn_of()
            if id(conn) not in traced:
                traced.add(id(conn))
                conn.set_trace_callback(trace)
            return conn

        backend._conn = traced_conn

    def report(self, iterations: int) -> str:
        """Statements (and checkouts) per iteration, by part and store call."""
        phases = sorted({phase for phase, _ in self.statements | self.checkouts})
        lines = [f"\nstatements per iteration (checkouts of a pooled connection) [server "
                 f"backend CPU µs, PostgreSQL], {iterations} iterations:"]
        total_s = sum(self.statements.values()) / iterations
        total_c = sum(self.checkouts.values()) / iterations
        for phase in phases:
            calls = sorted({call for p, call in self.statements | self.checkouts if p == phase},
                           key=lambda c: -self.statements[(phase, c)])
            s = sum(self.statements[(phase, c)] for c in calls) / iterations
            c = sum(self.checkouts[(phase, c)] for c in calls) / iterations
            idle = self.idle_checks[phase] / iterations
            us = sum(self.server_ns[(phase, c)] for c in calls) / iterations / 1000
            lines.append(f"  {phase:<58} {s:7.2f} ({c:.2f}; idle checks {idle:.2f}) "
                         f"[{us:.0f}]")
            for call in calls:
                lines.append(f"    {call:<56} {self.statements[(phase, call)] / iterations:7.2f}"
                             f" ({self.checkouts[(phase, call)] / iterations:.2f}) "
                             f"[{self.server_ns[(phase, call)] / iterations / 1000:.0f}]")
        total_us = sum(self.server_ns.values()) / iterations / 1000
        lines.append(f"  {'total':<58} {total_s:7.2f} ({total_c:.2f}) [{total_us:.0f}]")
        return "\n".join(lines)
