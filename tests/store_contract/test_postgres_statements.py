"""PostgreSQL: ``read`` and ``execute`` outside a transaction go through ``_db.Statements``
(a kept ``Transformer``, the statement prepared from its second run) and answer, fail and
convert as ``Connection.execute`` does."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from vancetope_brain.errors import Conflict, StoreError
from vancetope_brain.store.postgres import PostgresBackend, _db
from vancetope_brain.store.postgres._db import JsonDoc, _numbered

TABLE = ("CREATE TABLE IF NOT EXISTS probe (id TEXT PRIMARY KEY, n BIGINT, note TEXT, "
         "doc JSONB)")
ROW = "INSERT INTO probe (id, n, note, doc) VALUES (%s, %s, %s, %s)"
BY_ID = "SELECT id, n, note, doc FROM probe WHERE id = %s"


@pytest.fixture
def backend(postgres_url: str) -> Iterator[PostgresBackend]:
    opened = PostgresBackend(f"{postgres_url}&pool_max=1")  # every call on one connection
    opened.execute(TABLE)
    yield opened
    opened.close()


def _prepared(backend: PostgresBackend) -> set[str]:
    with backend.pool.connection() as conn:
        return {row[0] for row in conn.execute(
            "SELECT statement FROM pg_prepared_statements WHERE name LIKE 'vt\\_%'")}


def test_placeholders_are_numbered_and_a_named_one_is_left_to_the_driver() -> None:
    assert _numbered("SELECT %s, '100%%', %s", "utf-8") == (b"SELECT $1, '100%', $2", 2)
    assert _numbered("SELECT 1", "utf-8") == (b"SELECT 1", 0)
    assert _numbered("SELECT %(a)s", "utf-8") is None
    assert _numbered("SELECT %b", "utf-8") is None


def test_rows_and_counts_are_the_drivers(backend: PostgresBackend) -> None:
    assert backend.execute(ROW, ("a", 2**40, "x\x00y", JsonDoc('{"k": "v\\u0000"}'))) == 1
    assert backend.execute(ROW, ("b", None, None, None)) == 1
    with backend.pool.connection() as conn:
        expected = [conn.execute(BY_ID, (key,)).fetchall() for key in ("a", "b")]
    for _ in range(3):  # unprepared, then prepared, then prepared again
        assert [backend.read(BY_ID, (key,)) for key in ("a", "b")] == expected
    assert expected[0] == [("a", 2**40, f"x{_db.REPLACEMENT}y", {"k": f"v{_db.REPLACEMENT}"})]
    for _ in range(2):
        assert backend.read("SELECT count(*) FROM probe WHERE note LIKE '%%y' AND id <> %s",
                            ("z",)) == [(1,)]
    assert backend.read("SELECT id FROM probe WHERE id = %(id)s", {"id": "b"}) == [("b",)]
    assert backend.execute("UPDATE probe SET n = n + 1 WHERE id <> %s", ("z",)) == 2
    assert backend.execute("SET TIME ZONE 'UTC'; SET TIME ZONE 'UTC'") == -1  # psycopg's


def test_a_statement_is_prepared_from_its_second_run(backend: PostgresBackend) -> None:
    backend.read(BY_ID, ("a",))
    assert _prepared(backend) == set()
    backend.read(BY_ID, ("a",))
    assert _prepared(backend) == {BY_ID.replace("%s", "$1")}


def test_the_least_recently_run_statement_is_deallocated_past_the_cap(
        backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_db, "PREPARED_MAX", 2)
    texts = [f"SELECT {n} + %s" for n in range(3)]
    for text in texts[:2] * 2:
        backend.read(text, (1,))
    backend.read(texts[0], (1,))  # run last: the second is the oldest now
    assert _prepared(backend) == {texts[0].replace("%s", "$1"), texts[1].replace("%s", "$1")}
    backend.read(texts[2], (1,))  # seen once: it takes the oldest's place
    assert _prepared(backend) == {texts[0].replace("%s", "$1")}
    assert backend.read(texts[1], (1,)) == [(2,)]


def test_reads_go_on_after_psycopg_deallocates_every_statement(
        backend: PostgresBackend) -> None:
    for _ in range(2):
        backend.read(BY_ID, ("a",))
    with pytest.raises(StoreError), backend.write() as conn:
        conn.execute("SELECT 1", prepare=True)  # psycopg's own: it deallocates all on ROLLBACK
        conn.execute("SELECT 1/0")
    assert _prepared(backend) == set()
    assert backend.read(BY_ID, ("a",)) == []
    backend.read(BY_ID, ("a",))
    assert _prepared(backend) == {BY_ID.replace("%s", "$1")}


def test_errors_are_the_drivers_and_leave_the_connection_usable(
        backend: PostgresBackend) -> None:
    backend.execute(ROW, ("a", 1, None, None))
    for _ in range(2):  # unprepared and prepared
        with pytest.raises(Conflict, match="probe_pkey"):
            backend.execute(ROW, ("a", 1, None, None))
    with pytest.raises(StoreError, match="1 placeholders but 2 parameters"):
        backend.read(BY_ID, ("a", "b"))
    with pytest.raises(StoreError, match="no rows"):
        backend.read("UPDATE probe SET n = 2 WHERE id = %s", ("a",))
    with pytest.raises(StoreError, match="division by zero"):
        backend.read("SELECT 1 / %s", (0,))
    assert backend.read("SELECT n FROM probe WHERE id = %s", ("a",)) == [(2,)]


def test_a_lost_connection_is_a_store_error_and_the_next_call_gets_a_new_one(
        backend: PostgresBackend) -> None:
    pid = [backend.read("SELECT pg_backend_pid() + %s", (0,))[0][0] for _ in range(2)][0]
    with psycopg.connect(backend.pool.conninfo, autocommit=True) as admin:  # type: ignore[arg-type]
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StoreError, match="closed the connection"):
        backend.read("SELECT pg_backend_pid() + %s", (0,))  # prepared on the lost one
    assert backend.read("SELECT pg_backend_pid() + %s", (0,))[0][0] != pid


def test_texts_past_the_cap_are_converted_again(backend: PostgresBackend,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_db, "_TEXTS_MAX", 2)
    results = [backend.read(f"SELECT {n} + %s", (1,)) for n in range(5)]
    with backend.pool.connection() as conn:
        kept = len(conn.statements._texts)
    assert results == [[(n + 1,)] for n in range(5)]
    assert kept <= 2
