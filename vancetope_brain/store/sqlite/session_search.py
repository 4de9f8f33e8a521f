"""SQLite ``SessionSearch``: the FTS5 index ``conversation_fts`` over the chat, kept by
triggers; titles are read from ``sessions``.

``conversation_fts`` is an external-content FTS5 table (tokenizer ``unicode61
remove_diacritics 2``, as ``knowledge_fts``) whose content is the view
``conversation_lines``: the ``content`` of each ``user`` and ``assistant`` row of ``chat``
(``lanes.py``), by that row's rowid. The triggers ``chat_indexed`` and ``chat_unindexed``
add a line as it is inserted and take it out as it is deleted (a purged process), inside the
writing transaction — ``commit_turn``'s, so a committed line is searchable at once and a
fenced turn indexes nothing —, with no change to the lanes adapter; chat rows are never
updated. The triggers name ``chat``, so this adapter's script runs after the lanes
adapter's (adapters register in module order: ``lanes`` < ``session_search``).

Backfill: a file that had chat before this index existed gets it indexed once at open — the
script rebuilds the index from the view unless ``conversation_fts_built`` holds its row, and
writes that row, in the schema's transaction (no schema version: ``_db``; new files rebuild
an empty index). Rowids of ``chat`` are the index's keys: a ``VACUUM`` may renumber them, so
after one, delete the row of ``conversation_fts_built`` and open the store to rebuild.

Titles are not indexed: a search reads the user's sessions that are not CLOSED (the partial
index ``sessions_open``; ``SessionService`` caps them per user) and matches their titles here,
so a rename or a close counts from the next search. Lines: ``MATCH`` every query word, each
quoted (never syntax), joined to the chat rows of the tenant whose process is one of those
sessions' chat process, newest rowid first (the index yields that order), ``LIMIT``. The
``MATCH`` spans the file; other tenants' and users' lines are only skipped by the join.
"""

from __future__ import annotations

from vancetope_brain.models import ChatMessage, Session
from vancetope_brain.models.conversation import ConversationHit
from vancetope_brain.store.documents import search_terms
from vancetope_brain.store.session_search import (
    SEARCHED_ROLES,
    SessionSearch,
    capped,
    line_hit,
    searched,
    title_hits,
)
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import fts_query, load_all, marks

_ROLES = ", ".join(f"'{role.value}'" for role in SEARCHED_ROLES)

_TABLES = f"""
CREATE VIEW IF NOT EXISTS conversation_lines AS
    SELECT rowid AS rowid, json_extract(doc, '$.content') AS content FROM chat
    WHERE role IN ({_ROLES});
CREATE VIRTUAL TABLE IF NOT EXISTS conversation_fts USING fts5(
    content, content = 'conversation_lines', content_rowid = 'rowid',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chat_indexed AFTER INSERT ON chat
    WHEN new.role IN ({_ROLES}) BEGIN
    INSERT INTO conversation_fts (rowid, content)
        VALUES (new.rowid, json_extract(new.doc, '$.content'));
END;
CREATE TRIGGER IF NOT EXISTS chat_unindexed AFTER DELETE ON chat
    WHEN old.role IN ({_ROLES}) BEGIN
    INSERT INTO conversation_fts (conversation_fts, rowid, content)
        VALUES ('delete', old.rowid, json_extract(old.doc, '$.content'));
END;
CREATE TABLE IF NOT EXISTS conversation_fts_built (id INTEGER PRIMARY KEY CHECK (id = 1));
INSERT INTO conversation_fts (conversation_fts)
    SELECT 'rebuild' WHERE NOT EXISTS (SELECT 1 FROM conversation_fts_built);
INSERT OR IGNORE INTO conversation_fts_built (id) VALUES (1)
"""


class SqliteSessionSearch(SqliteAdapter, SessionSearch):
    tables = _TABLES

    def search_sessions(self, tenant_id: str, user_id: str, query: str, *,
                        limit: int = 20) -> list[ConversationHit]:
        wanted, limit = search_terms(query), capped(limit)
        if not wanted or limit == 0:
            return []
        # The WHERE of the partial index sessions_open, word for word.
        by_chat = searched(load_all(Session, self.db.read(
            "SELECT doc FROM sessions WHERE tenant_id = ? AND user_id = ? "
            "AND json_extract(doc, '$.status') != 'CLOSED'", (tenant_id, user_id))))
        hits = title_hits(by_chat.values(), wanted)[:limit]
        if len(hits) == limit or not by_chat:
            return hits
        rows = self.db.read(
            "SELECT c.doc FROM conversation_fts f CROSS JOIN chat c ON c.rowid = f.rowid "
            "WHERE conversation_fts MATCH ? AND c.tenant_id = ? "
            f"AND c.process_id IN {marks(by_chat)} "
            "ORDER BY f.rowid DESC LIMIT ?",
            (fts_query(wanted, any_word=False), tenant_id, *by_chat, limit - len(hits)))
        return hits + [line_hit(by_chat[line.process_id], line, wanted)
                       for line in load_all(ChatMessage, rows)]
