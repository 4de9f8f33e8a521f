"""The store a benchmark run writes to: a SQLite file, or a PostgreSQL database of its own.

    p = argparse.ArgumentParser()
    _store.add_arguments(p)                        # --store sqlite|postgres, --postgres-url
    with _store.BenchStore.create(args, tmp) as store:
        env["VANCETOPE_STORE_URL"] = store.url
        store.turn_count()                         # SELECT COUNT(*) FROM turns
        store.cpu_seconds()                        # the server's CPU for this store (PostgreSQL)

**SQLite**: ``tmp/bench.db`` (``--store-from FILE``: a copy of FILE).

**PostgreSQL**: a database of the run's own, ``vt_bench_<pid>_<hex>``, created on the server
of ``--postgres-url`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``; any
database of the server, used only to create and drop ours) and dropped at the end
(``DROP DATABASE … WITH (FORCE)``; ``--keep`` keeps it). ``--store-from NAME``: the new
database is ``CREATE DATABASE … TEMPLATE NAME STRATEGY FILE_COPY`` (a seeded store of
``history.py``). The product's connections carry ``application_name=vt-bench`` in the store
URL (libpq passes it through), which is how the benchmark's backends are told apart.

**The server's CPU** (PostgreSQL only; SQLite's runs inside the workers and the gateway):
``cpu_seconds`` samples ``pg_stat_activity`` for the backends connected to the run's
database (the product's pooled connections and any autovacuum worker on it, not the
benchmark's own monitoring connection) and reads each one's CPU from ``/proc`` as for
``redis-server``. Backends come and go (the pool opens connections lazily and closes idle
ones after 10 minutes), so every pid ever seen is remembered with the last CPU read from
it; ``sample`` is called every second by the benchmark loop, so a backend that exits
between samples loses at most its last second. The server's shared processes (WAL writer,
checkpointer, background writer) serve every database on the server: reported
separately as ``postgres aux`` and not counted as ours. A server on another host: no
``/proc`` to read; the figure is then 0 and the report says so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
from _proc import cpu_seconds as proc_cpu  # noqa: E402

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
APP_NAME = "vt-bench"
AUX_TYPES = ("walwriter", "checkpointer", "background writer")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("store")
    g.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite",
                   help="the product's store: a SQLite file in the temp dir (default) or a "
                        "PostgreSQL database of the run's own")
    g.add_argument("--postgres-url", default=os.environ.get("BENCH_POSTGRES_URL", DEFAULT_PG),
                   help="a database of the PostgreSQL server the run creates its own database "
                        f"on (default {DEFAULT_PG}, or $BENCH_POSTGRES_URL)")


def db_url(server_url: str, name: str, app: str | None = APP_NAME) -> str:
    """``server_url`` pointing at database ``name`` (with our ``application_name``)."""
    parts = urlsplit(server_url)
    query = parts.query
    if app:
        query = "&".join(filter(None, [query, f"application_name={app}"]))
    return urlunsplit(parts._replace(path=f"/{name}", query=query))


def pg_admin(server_url: str) -> Any:
    import psycopg

    return psycopg.connect(server_url, autocommit=True, connect_timeout=10)


def create_database(server_url: str, name: str, template: str | None = None) -> None:
    from psycopg import sql

    with pg_admin(server_url) as admin:
        stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            stmt = sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(name), sql.Identifier(template))
        admin.execute(stmt)


def drop_database(server_url: str, name: str) -> None:
    from psycopg import sql

    with pg_admin(server_url) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


def database_exists(server_url: str, name: str) -> bool:
    with pg_admin(server_url) as admin:
        return admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                             (name,)).fetchone() is not None


class BenchStore:
    """One run's store (see the module docstring)."""

    def __init__(self, kind: str, url: str, *, path: Path | None = None,
                 server_url: str = "", name: str = "") -> None:
        self.kind, self.url, self.path = kind, url, path
        self.server_url, self.name = server_url, name
        self._mon: Any = None
        self._seen: dict[int, float] = {}     # backend pid → CPU seconds last read
        self._aux: dict[int, float] = {}
        self.remote = False

    @classmethod
    def create(cls, args: argparse.Namespace, tmp: Path) -> BenchStore:
        if args.store == "sqlite":
            path = tmp / "bench.db"
            if args.store_from:
                shutil.copyfile(args.store_from, path)
            return cls("sqlite", f"sqlite:///{path}", path=path)
        name = f"vt_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        create_database(args.postgres_url, name, args.store_from)
        return cls("postgres", db_url(args.postgres_url, name), server_url=args.postgres_url,
                   name=name)

    def describe(self) -> str:
        if self.kind == "sqlite":
            return "SQLite in a temp dir"
        host = urlsplit(self.server_url).hostname or "local socket"
        return f"PostgreSQL database {self.name} on {host}"

    # ── measurements ──────────────────────────────────────────────────────
    def _monitor(self) -> Any:
        if self._mon is None or self._mon.closed:
            self._mon = pg_admin(db_url(self.server_url, self.name, app="vt-bench-monitor"))
        return self._mon

    def turn_count(self) -> int:
        if self.kind == "sqlite":
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
            try:
                return conn.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
            finally:
                conn.close()
        return self._monitor().execute("SELECT COUNT(*) FROM turns").fetchone()[0]

    def sample(self) -> None:
        """Read the CPU of the run's backends (and the server's shared processes) now."""
        if self.kind != "postgres":
            return
        rows = self._monitor().execute(
            "SELECT pid, datname = current_database(), backend_type FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND (datname = current_database() "
            "OR backend_type = ANY(%s))", (list(AUX_TYPES),)).fetchall()
        for pid, ours, _ in rows:
            if not Path(f"/proc/{pid}").exists():
                self.remote = True
                continue
            cpu = proc_cpu([pid])
            book = self._seen if ours else self._aux
            book[pid] = max(book.get(pid, 0.0), cpu)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds so far: ``postgres`` (the run's backends), ``postgres aux`` (the
        server's shared processes); empty for SQLite."""
        if self.kind != "postgres":
            return {}
        self.sample()
        return {"postgres": sum(self._seen.values()), "postgres aux": sum(self._aux.values())}

    def backends(self) -> int:
        return len(self._seen)

    def close(self, keep: bool = False) -> None:
        if self._mon is not None:
            self._mon.close()
            self._mon = None
        if self.kind == "postgres" and not keep:
            drop_database(self.server_url, self.name)
