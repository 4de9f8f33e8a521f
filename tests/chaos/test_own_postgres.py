"""``OwnPostgres``, the chaos suite's PostgreSQL server: a crash keeps every acknowledged
commit, a connection of the crashed server fails, and ``close`` leaves nothing behind; and
the PostgreSQL store reconnects promptly when a crashed server is back."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from tests.chaos.conftest import OwnPostgres, _children, alive
from vancetope_brain.errors import StoreError
from vancetope_brain.store import postgres
from vancetope_brain.store.postgres import RECONNECT_MAX_DELAY, PostgresBackend

pytestmark = [pytest.mark.chaos]


def test_a_crash_keeps_what_was_committed_and_close_leaves_nothing(tmp_path: Path) -> None:
    server = OwnPostgres(tmp_path)
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (n INT)")
            conn.execute("INSERT INTO t VALUES (1)")
            backends = _children(server.popen.pid)  # type: ignore[union-attr]
            server.kill()
            assert backends and not any(map(alive, backends)), "a backend outlived it"
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
        server.start()
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SELECT n FROM t").fetchall() == [(1,)]
        postmaster = server.popen.pid  # type: ignore[union-attr]
    finally:
        server.close()
    assert server.popen is not None and server.popen.poll() is not None
    assert not _children(postmaster)
    assert not server.dir.exists()


def test_the_store_answers_within_a_second_of_the_servers_return(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After an 8 s outage the pool's own back-off (1, 2, 4, 8 s) would have tried again
    only 15 s after the crash; capped (``_Pool``), it finds the server within
    ``RECONNECT_MAX_DELAY`` of its return."""
    monkeypatch.setattr(postgres, "IDLE_CHECK", 3600.0)  # the stale connection is used
    # The call during the outage fails either at once on the stale connection or, when the
    # pool has already dropped it, after waiting this long for a new one (30 s as shipped).
    monkeypatch.setattr(postgres, "POOL_WAIT", 5.0)
    server = OwnPostgres(tmp_path)
    try:
        db = PostgresBackend(server.url)
        try:
            db.ping()
            server.kill()
            crashed = time.monotonic()
            with pytest.raises(StoreError):
                db.ping()  # its connection was the crashed server's
            time.sleep(max(0.0, 8 - (time.monotonic() - crashed)))
            server.start()
            back = time.monotonic()
            db.ping()  # waits for the pool's next connection
            assert time.monotonic() - back < RECONNECT_MAX_DELAY + 1.0
        finally:
            db.close()
    finally:
        server.close()


def test_a_call_after_a_restart_while_the_store_was_idle_succeeds(tmp_path: Path) -> None:
    """A connection idle past ``IDLE_CHECK`` is checked before use: after the server was
    restarted while nobody called (a user typing), the next call reconnects instead of
    failing with the stale connection's error."""
    server = OwnPostgres(tmp_path)
    try:
        db = PostgresBackend(server.url)
        try:
            db.ping()
            server.kill()
            server.start()
            time.sleep(postgres.IDLE_CHECK + 0.2)
            db.ping()
            assert db.read("SELECT 41 + 1") == [(42,)]
        finally:
            db.close()
    finally:
        server.close()
