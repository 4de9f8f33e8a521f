"""PostgreSQL search indexes: the conversation index cuts words as the port does, keys them by
tenant and takes any chat line; the memory index keys its lexemes by scope, and a scope's cap
holds under concurrent records."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from tests.store_contract.conftest import World
from tests.store_contract.memory._entries import entry, project
from tests.store_contract.session_search.test_search import Conversations
from vancetope_brain.errors import MemoryFull
from vancetope_brain.models.memory import MemoryScope, ScopeRef
from vancetope_brain.store import MemoryStore, SessionSearch
from vancetope_brain.store.documents import index_terms
from vancetope_brain.store.postgres import PostgresBackend
from vancetope_brain.store.postgres.memory import scope_key
from vancetope_brain.store.postgres.session_search import (
    _LINES,
    _TABLES,
    MAX_INDEXED_CHARS,
    _tsquery,
    tenant_key,
    word_key,
)

TEXTS = ["Meet at the Café Müller", "don’t stop — now…", "İstanbul STRASSE Straße",
         "ΟΔΟΣ σοφός Ελληνικά", "Tiếng Việt có dấu", "東京タワー と नमस्ते", "snake_case x² ½ Ⅻ",
         "naïve coöperate ǅemal ﬁne Ａｂｃ", "a" * 300 + " " + "é" * 200 + " b",
         "\"budget\" OR friday* NEAR(x, 2) -- ; DROP TABLE chat"]


@pytest.fixture
def backend(postgres_url: str) -> Iterator[PostgresBackend]:
    opened = PostgresBackend(postgres_url)
    yield opened
    opened.close()


def _lexemes(url: str, tenant_id: str, text: str) -> list[str]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT tsvector_to_array(conversation_lexemes(%s, %s))",
                           (tenant_id, text)).fetchone()
    assert row is not None
    return sorted(row[0])


def test_the_index_cuts_and_folds_words_as_the_port_does(backend: PostgresBackend,
                                                        postgres_url: str) -> None:
    for text in TEXTS:
        assert _lexemes(postgres_url, "ten_1", text) == sorted(
            {tenant_key("ten_1") + word_key(word) for word in index_terms(text)}), text
    assert not set(_lexemes(postgres_url, "ten_1", "budget")) & \
        set(_lexemes(postgres_url, "ten_2", "budget"))


def test_a_search_looks_its_tenants_words_up_in_the_index(backend: PostgresBackend,
                                                          postgres_url: str) -> None:
    talk = Conversations(World(backend))
    mine = talk.session("the budget line")
    talk.session("the budget line", tenant="ten_2")
    query = _LINES.format(tsquery=_tsquery("ten_1", ["budget"]))
    params = ("ten_1", [mine.chat_process_id], 10, 0)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # A user with some history: computing the words of each of their lines costs more.
        conn.execute("INSERT INTO chat (id, tenant_id, process_id, seq, role, doc) "
                     "SELECT 'chat_' || n, 'ten_1', %s, n + 10, 'user', "
                     "jsonb_build_object('content', 'an ordinary line number ' || n) "
                     "FROM generate_series(1, 3000) AS n", (mine.chat_process_id,))
        conn.execute("ANALYZE chat")
        plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {query}", params))
        assert "chat_words" in plan, plan
        # The lexemes asked are the tenant's: the other tenant's line is not even a candidate.
        assert conn.execute(
            "SELECT tenant_id FROM chat WHERE conversation_lexemes(tenant_id, doc->>'content') "
            f"@@ {_tsquery('ten_1', ['budget'])}::tsquery").fetchall() == [("ten_1",)]


def test_chat_written_before_the_index_existed_is_indexed_at_open(postgres_url: str) -> None:
    first = PostgresBackend(postgres_url)
    session = Conversations(World(first)).session("an old budget line", "another old line")
    first.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP FUNCTION conversation_lexemes CASCADE")  # and chat_words
    again = PostgresBackend(postgres_url)
    search = again.port(SessionSearch)
    assert [(h.session_id, h.seq) for h in search.search_sessions("ten_1", "usr_1", "old")] == \
        [(session.id, 2), (session.id, 1)]
    again.close()


def _as_sql_functions(tables: str) -> str:
    """The index functions of ``tables`` as the version before the PL/pgSQL ones made them:
    the same expressions as ``LANGUAGE sql`` bodies (``SELECT expr``)."""
    functions = tables[tables.index("CREATE OR REPLACE"):tables.index("CREATE INDEX")]
    return functions.replace("LANGUAGE plpgsql", "LANGUAGE sql").replace(
        "BEGIN\n    RETURN ", "    SELECT ").replace(";\nEND\n$fn$", "\n$fn$")


def test_chat_indexed_by_the_sql_functions_is_found_through_the_plpgsql_ones(
        postgres_url: str) -> None:
    first = PostgresBackend(postgres_url)
    talk = Conversations(World(first))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # The previous version's functions, and chat_words built by them.
        conn.execute(_as_sql_functions(_TABLES))
        conn.execute("REINDEX INDEX chat_words")
        assert _languages(conn) == {"sql"}
    old = talk.session("an old budget line", *TEXTS[:-1])
    before = {text: _lexemes(postgres_url, "ten_1", text) for text in TEXTS}
    first.close()
    again = PostgresBackend(postgres_url)
    new = Conversations(World(again)).session("a new budget line")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert _languages(conn) == {"plpgsql"}
        assert {text: _lexemes(postgres_url, "ten_1", text) for text in TEXTS} == before
        conn.execute("SET enable_seqscan = off")
        query = ("SELECT doc->>'sessionId', seq FROM chat WHERE conversation_lexemes(tenant_id, "
                 f"doc->>'content') @@ {_tsquery('ten_1', ['budget'])}::tsquery "
                 f"AND role IN ('user', 'assistant') ORDER BY 1, 2")
        plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {query}"))
        assert "chat_words" in plan, plan
        sessions = {row[0] for row in conn.execute(query)}
    assert sessions == {old.id, new.id}
    search = again.port(SessionSearch)
    assert {h.session_id for h in search.search_sessions("ten_1", "usr_1", "budget")} == \
        {old.id, new.id}
    again.close()


def _languages(conn: psycopg.Connection) -> set[str]:
    return {row[0] for row in conn.execute(
        "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
        "WHERE p.proname IN ('conversation_fold', 'conversation_text', 'conversation_keyed', "
        "'conversation_lexemes')")}


def test_a_line_longer_than_the_index_takes_commits(backend: PostgresBackend) -> None:
    # 2.6 MB of distinct words: as one tsvector, past its 1 MB limit.
    tail = " ".join(f"w{i}x" for i in range(MAX_INDEXED_CHARS // 4, 400_000))
    session = Conversations(World(backend)).session("early words " + tail)
    search = backend.port(SessionSearch)
    assert [h.session_id for h in search.search_sessions("ten_1", "usr_1", "early")] == \
        [session.id]
    assert search.search_sessions("ten_1", "usr_1", "w399999x") == []  # past the bound


def test_memory_lexemes_are_keyed_by_tenant_and_scope(backend: PostgresBackend,
                                                      postgres_url: str) -> None:
    memory = backend.port(MemoryStore)
    memory.record(entry("launch Friday"))
    memory.record(entry("launch Friday", tenant="ten_b"))
    memory.record(entry("launch Friday", scope=MemoryScope.SESSION))
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT tenant_id, scope, tsvector_to_array(terms) "
                            "FROM memory_entries").fetchall()
    assert sorted(tuple(lexemes) for _, _, lexemes in rows) == sorted(
        tuple(sorted(scope_key(tenant, ScopeRef(MemoryScope(scope), scope_id)) + term
                     for term in ("friday", "launch")))
        for tenant, scope, scope_id in [("ten_a", "project", "default"),
                                        ("ten_b", "project", "default"),
                                        ("ten_a", "session", "ses_1")])


def test_concurrent_records_never_pass_a_scopes_cap(backend: PostgresBackend) -> None:
    memory = backend.port(MemoryStore)
    start = threading.Barrier(8)

    def record(i: int) -> bool:
        start.wait()
        try:
            return memory.record(entry(f"note {i}", minute=i), limit=5)[1]
        except MemoryFull:
            return False

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(record, range(8))) == 5
    stored = memory.list_memory("ten_a", [project()])
    assert len(stored) == 5
    # The counter is the entries' own count: N of the score is right, and a slot frees.
    assert {hit.entry.id for hit in memory.search_memory("ten_a", [project()], "note")} == \
        {note.id for note in stored}
    memory.delete_memory("ten_a", stored[0].id)
    assert memory.record(entry("one more"), limit=5)[1]


def test_concurrent_records_of_one_key_store_one_entry(backend: PostgresBackend) -> None:
    memory = backend.port(MemoryStore)
    scopes = [MemoryScope.PROCESS, MemoryScope.SESSION, MemoryScope.PROJECT, MemoryScope.TENANT]
    start = threading.Barrier(len(scopes))

    def record(scope: MemoryScope) -> str:
        start.wait()
        return memory.record(entry("turn noted", scope=scope, idempotency_key="turn-1"))[0].id

    with ThreadPoolExecutor(len(scopes)) as pool:
        ids = set(pool.map(record, scopes))
    assert len(ids) == 1
    stored = memory.list_memory("ten_a", [ScopeRef(MemoryScope.PROCESS, "proc_1"),
                                          ScopeRef(MemoryScope.SESSION, "ses_1"), project(),
                                          ScopeRef(MemoryScope.TENANT, "ten_a")])
    assert [note.id for note in stored] == list(ids)
