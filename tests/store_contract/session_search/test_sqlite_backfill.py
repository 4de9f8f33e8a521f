"""SQLite: chat lines written before the conversation index existed are indexed when the store
opens (once), and the index follows the chat from then on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.store_contract.conftest import World
from tests.store_contract.session_search.test_search import Conversations
from vancetope_brain.store import SessionSearch
from vancetope_brain.store.sqlite import SqliteBackend


def test_an_older_file_has_its_chat_indexed_at_open(tmp_path: Path) -> None:
    path = tmp_path / "vancetope.db"
    backend = SqliteBackend(path)
    talk = Conversations(World(backend))
    session = talk.session("an old budget line", "another old line")
    backend.close()
    with sqlite3.connect(path) as conn:  # the file as it was before this index
        for statement in ("DROP TRIGGER chat_indexed", "DROP TRIGGER chat_unindexed",
                          "DROP TABLE conversation_fts", "DROP VIEW conversation_lines",
                          "DROP TABLE conversation_fts_built"):
            conn.execute(statement)
    conn.close()

    reopened = SqliteBackend(path)
    search = reopened.port(SessionSearch)
    assert [(h.session_id, h.seq) for h in search.search_sessions("ten_1", "usr_1", "old")] == \
        [(session.id, 2), (session.id, 1)]
    newer = Conversations(World(reopened)).session("a new budget line")
    assert [h.session_id for h in search.search_sessions("ten_1", "usr_1", "budget")] == \
        [newer.id, session.id]
    reopened.close()
    again = SqliteBackend(path)  # opening again rebuilds nothing: each line is there once
    assert len(again.port(SessionSearch).search_sessions("ten_1", "usr_1", "line")) == 3
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO conversation_fts (conversation_fts) VALUES ('integrity-check')")
    conn.close()
    again.close()


def test_a_search_reads_the_lines_newest_first_from_the_index(tmp_path: Path,
                                                             monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The lines' read: the FTS5 index's matches in rowid order, each chat row by its key;
    no sort of the matches, no scan of the chat."""
    backend = SqliteBackend(tmp_path / "vancetope.db")
    Conversations(World(backend)).session("the budget line", "another budget line")
    ran: list[tuple[str, tuple[object, ...]]] = []
    original = backend.read
    monkeypatch.setattr(backend, "read", lambda sql, params: ran.append((sql, params))
                        or original(sql, params))
    assert len(backend.port(SessionSearch).search_sessions("ten_1", "usr_1", "budget")) == 2
    sql, params = ran[-1]
    plan = " | ".join(row[3] for row in original(f"EXPLAIN QUERY PLAN {sql}", params))
    assert "VIRTUAL TABLE INDEX" in plan and "USING INTEGER PRIMARY KEY" in plan, plan
    assert "TEMP B-TREE" not in plan and "SCAN c" not in plan, plan
    backend.close()
