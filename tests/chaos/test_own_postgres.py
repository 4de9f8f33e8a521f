"""``OwnPostgres``, the chaos suite's PostgreSQL server: a crash keeps every acknowledged
commit, a connection of the crashed server fails, and ``close`` leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.chaos.conftest import OwnPostgres, _children

pytestmark = [pytest.mark.chaos]


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is no zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_a_crash_keeps_what_was_committed_and_close_leaves_nothing(tmp_path: Path) -> None:
    server = OwnPostgres(tmp_path)
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (n INT)")
            conn.execute("INSERT INTO t VALUES (1)")
            backends = _children(server.popen.pid)  # type: ignore[union-attr]
            server.kill()
            assert backends and not any(map(_running, backends)), "a backend outlived it"
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
