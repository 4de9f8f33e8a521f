"""One PostgreSQL database per test run, so two runs on one machine never meet.

A run (each pytest-xdist worker) creates the database ``vt_test_<pid>_<random>`` on
the server at ``VANCETOPE_TEST_POSTGRES_URL`` (default: 127.0.0.1:5432 as
``postgres``, trust auth) the first time a test asks for PostgreSQL, and drops it at
exit. Each test that opens a store gets a schema of its own in it (``schema``), dropped
when the test ends, so tests see only their own tables. A database left by a killed
run (its pid is gone and nobody is connected to it) is dropped by the next run.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql

SERVER = os.environ.get("VANCETOPE_TEST_POSTGRES_URL",
                        "postgresql://postgres@127.0.0.1:5432/postgres")
_NAME = re.compile(r"vt_test_(\d+)_[0-9a-f]{8}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunDatabase:
    """This run's database on the test server."""

    def __init__(self) -> None:
        self.name = f"vt_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(SERVER, autocommit=True, connect_timeout=5) as admin:
            self._drop_stale(admin)
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        self.url = urlunsplit(urlsplit(SERVER)._replace(path=f"/{self.name}"))

    @staticmethod
    def _drop_stale(admin: psycopg.Connection) -> None:
        rows = admin.execute(
            "SELECT datname FROM pg_database d WHERE datname LIKE 'vt\\_test\\_%' AND NOT "
            "EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)").fetchall()
        for (name,) in rows:
            match = _NAME.fullmatch(name)
            if match and not _pid_alive(int(match.group(1))):
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))

    @contextmanager
    def schema(self) -> Iterator[str]:
        """A new empty schema of this run's database, dropped afterwards: the store URL
        whose connections use it (``search_path``)."""
        name = f"s_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        try:
            yield f"{self.url}?options={quote(f'-csearch_path={name}')}"
        finally:
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))

    def drop(self) -> None:
        with psycopg.connect(SERVER, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(self.name)))
