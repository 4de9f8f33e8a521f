"""PostgreSQL: a page of a user's sessions and their counts read the page (or the cap)
through an index, however many sessions the user closed: no scan of their history, no sort
of it; a version 2 store's index of a user's sessions is made anew in index order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from vancetope_brain.models import SessionStatus
from vancetope_brain.store import SessionStore
from vancetope_brain.store.postgres import PostgresBackend
from vancetope_brain.store.postgres._db import SCHEMA_VERSION

# Each read's acceptable indexes. A page of one status may walk either: the status's own
# index, or — when nearly all of the user's sessions have that status, as CLOSED here — the
# user's index, filtering as it goes (the planner picks by the sampled statistics; both
# read about a page and need no sort).
READS: dict[str, tuple[tuple[str, ...], Callable[[SessionStore], object]]] = {
    "the first page": (("sessions_by_user",), lambda s: s.list_sessions("ten_1", "usr_1",
                                                                         limit=50)),
    "a page after a cursor": (("sessions_by_user",), lambda s: s.list_sessions(
        "ten_1", "usr_1", cursor="1700000001000|2500", limit=50)),
    "a page of one status after a cursor": (
        ("sessions_by_status", "sessions_by_user"), lambda s: s.list_sessions(
            "ten_1", "usr_1", status=SessionStatus.CLOSED, cursor="1700000001000|2500",
            limit=50)),
    "the counts per status": (("sessions_by_status",),
                              lambda s: s.count_sessions("ten_1", "usr_1", cap=1000)),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_page_of_sessions_searches_its_index(postgres_url: str, read: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    indexes, call = READS[read]
    backend = PostgresBackend(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # A user with 3,000 closed sessions and a few open ones, two a millisecond, among
        # 2,000 other users with 25 closed sessions each.
        conn.execute(
            "INSERT INTO sessions (id, tenant_id, user_id, created_ms, doc) "
            "SELECT id, 'ten_1', user_id, 1700000000000 + n / 2, jsonb_build_object("
            "'id', id, 'tenantId', 'ten_1', 'userId', user_id, 'status', status) "
            "FROM generate_series(1, 53000) AS n, LATERAL (SELECT 'ses_' || n AS id, "
            "CASE WHEN n <= 3000 THEN 'usr_1' ELSE 'usr_' || (n % 2000 + 2) END AS user_id, "
            "CASE WHEN n % 150 = 0 THEN 'OPEN' ELSE 'CLOSED' END AS status) AS made")
        conn.execute("ANALYZE sessions")
    ran: list[tuple[str, Any]] = []
    original = backend.read

    def traced(sql: str, params: Any = ()) -> list[Any]:
        ran.append((sql, params))
        return original(sql, params)

    monkeypatch.setattr(backend, "read", traced)
    call(backend.port(SessionStore))
    assert ran, f"{read} made no read"
    for sql, params in ran:
        plan = "\n".join(row[0] for row in original(f"EXPLAIN {sql}", params))
        assert any(index in plan for index in indexes) and "Seq Scan" not in plan, (sql, plan)
        # The index gives the page's order: nothing is sorted, not even incrementally (a
        # sort reads every row of the user when the statistics do not know them yet).
        assert "Sort  (" not in plan, plan
    backend.close()


def test_version_3_makes_a_version_2_stores_index_of_a_users_sessions_anew(
        postgres_url: str) -> None:
    PostgresBackend(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as version 2 left it
        conn.execute("DROP INDEX sessions_by_user")
        conn.execute("CREATE INDEX sessions_by_user ON sessions (tenant_id, user_id, created_ms)")
        conn.execute("UPDATE schema_version SET version = 2")
    backend = PostgresBackend(postgres_url)
    assert backend.schema_version() == SCHEMA_VERSION == 3
    backend.close()
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = "
                           "'sessions_by_user' AND schemaname = current_schema()").fetchone()
    assert row is not None and row[0].endswith("(tenant_id, user_id, created_ms, row_no)")
