"""PostgreSQL ``SessionSearch``: the expression GIN index ``chat_words`` on the ``chat`` table
(``lanes.py``); titles are read from ``sessions``.

The index: ``conversation_lexemes(tenant_id, content)``, an ``IMMUTABLE`` PL/pgSQL function
of this script (with its helpers ``conversation_text``, ``conversation_fold`` and
``conversation_keyed``: an ASCII line takes a short path, a line without accented Latin
letters skips the folding; ~100 µs for 500 characters, paid by the writing transaction),
gives a line's words as a ``tsvector`` (``array_to_tsvector``: PostgreSQL's
text-search parser and dictionaries are never applied), each word cut and folded as the
port's ``index_terms`` does — NFC, lowercased, runs of letters and digits, the diacritics
of Latin letters dropped (NFD, combining marks U+0300–U+036F after a letter below U+0250,
NFC) — with the ICU collation ``und-x-icu``, so case and letters are Unicode's whatever the
database's locale (a PostgreSQL built without ICU cannot open the store; every common
build has it). A word longer than ``MAX_WORD_BYTES`` is kept as ``#`` and its SHA-256, as
``documents.term_key`` keys it. Each lexeme is prefixed with the tenant key (12 hex digits
of the MD5 of the tenant id, ``tenant_key``), so **the tenant is inside the index lookup**:
a search asks for its tenant's lexemes only and reads only its own tenant's posting lists,
never another tenant's rows nor their postings (SQLite's FTS5 ``MATCH`` spans the file and skips other tenants'
lines in the join). Within the tenant, other users' lines holding the words are skipped by
the condition on the user's chat processes (``process_id``), as on SQLite; tenant and
process are also checked on the rows, so a key collision could only cost a read.
``chat_words`` is a partial index of the ``user`` and ``assistant`` rows only.

Why an expression index, not a trigger and a table of its own: it needs no change to the
lanes adapter and no second table; PostgreSQL maintains it inside the writing transaction
— ``commit_turn``'s, so a committed line is searchable at once and a fenced turn indexes
nothing — and drops a purged line's entries with its row (chat rows are never updated);
and ``CREATE INDEX IF NOT EXISTS`` at open indexes the chat a database already holds (the
backfill SQLite does by hand). The script runs after the lanes adapter's (adapters register
in module order: ``lanes`` < ``session_search``), inside the schema's transaction; on a
large existing ``chat`` that first build blocks chat writes while it runs. The four
functions' bodies are part of the index: changing one is a migration that also rebuilds
``chat_words`` (the script replaces them at each open, with the same bodies). Each body is
one ``RETURN`` of an expression, in PL/pgSQL rather than SQL: a backend keeps a PL/pgSQL
function's plan from one statement to the next, while these SQL functions (not inlinable:
``STRICT`` with ``CASE`` bodies) were parsed and planned again by every ``INSERT`` into
``chat``: 0.5–0.9 ms of server CPU per ``commit_turn`` of two short lines, measured (the
PL/pgSQL functions cost as little as no index at all there). The expressions are those of the SQL version, so the change kept
every lexeme and needed no rebuild of ``chat_words`` (``test_postgres_search.py``); an
older server opening the store puts the SQL bodies back, with the same results.
An ICU upgrade that reclassifies characters leaves lines indexed under the old rules (the
usual caveat of ICU-collated indexes: ``REINDEX INDEX chat_words``).

Limits: only the first ``MAX_INDEXED_CHARS`` characters of a line are indexed (a
``tsvector`` holds at most 1 MB; beyond that bound a line still commits, and is found by
the words of its beginning only). ICU's ``[:alnum:]`` counts no "other" or letter-like
numbers (``²``, ``½``, ``Ⅻ``) as letters or digits, Python's ``\\w`` does: the bracket adds
them (``_NUMBERS``). Measured: the lexemes equal ``index_terms`` for every assigned code
point in a word and alone, and for 20,000 random mixed-script lines
(``tests/store_contract/test_postgres_search.py`` keeps a sample); Python's Unicode
and the server ICU's, if of different versions, can still differ on characters new in one.
Every candidate line is checked against the port's own tokeniser too (``holds_all``), so
no line is found that SQLite would not find.

A search reads the user's sessions that are not CLOSED (the partial index ``sessions_open``;
``SessionService`` caps them per user) and matches their titles here, so a rename or a
close counts from the next search. Lines: the tenant's lexemes of every query word joined
by ``&`` (each quoted and checked to be a tenant key and letters and digits or a hash,
``_tsquery``, then written into the statement as a literal, so each search is planned for
its own words), the ``chat`` rows of those sessions' chat processes, newest first: by the
line's ``createdAt``, then ``seq`` (a process's ``seq`` is its commit order; ``chat``'s
``row_no``, schema version 2, numbers a version-1 store's lines in table order), ``LIMIT``. The index yields every matching line of the
tenant's users, sorted then (top-N): the cost grows with the matches of the rarest words,
not with the chat's size. The GIN index keeps ``fastupdate`` on (commits are the hot path):
its pending list, the newest lines' index entries of every tenant (at most
``gin_pending_list_limit``, 4 MB), is read through by every search until autovacuum merges
it — index keys only; no other tenant's row is read.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from vancetope_brain.models import ChatMessage, Session
from vancetope_brain.models.conversation import ConversationHit
from vancetope_brain.store.documents import search_terms
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import load_all
from vancetope_brain.store.session_search import (
    SEARCHED_ROLES,
    SessionSearch,
    capped,
    holds_all,
    line_hit,
    searched,
    title_hits,
)

MAX_INDEXED_CHARS = 50_000
"""Characters of a chat line indexed (its beginning). At most 25,000 distinct words of at
most 4 bytes a character, each with its 12-byte key and 4-byte entry: well under the 1 MB
of a ``tsvector``."""
MAX_WORD_BYTES = 256
"""UTF-8 bytes of the longest word kept as itself; a longer one is kept as its hash."""

_NUMBERS = (
    r"\u00b2-\u00b3\u00b9\u00bc-\u00be\u09f4-\u09f9\u0b72-\u0b77\u0bf0-\u0bf2\u0c78-\u0c7e"
    r"\u0d58-\u0d5e\u0d70-\u0d78\u0f2a-\u0f33\u1369-\u137c\u16ee-\u16f0\u17f0-\u17f9\u19da"
    r"\u2070\u2074-\u2079\u2080-\u2089\u2150-\u2182\u2185-\u2189\u2460-\u249b\u24ea-\u24ff"
    r"\u2776-\u2793\u2cfd\u3007\u3021-\u3029\u3038-\u303a\u3192-\u3195\u3220-\u3229"
    r"\u3248-\u324f\u3251-\u325f\u3280-\u3289\u32b1-\u32bf\ua6e6-\ua6ef\ua830-\ua835"
    r"\U00010107-\U00010133\U00010140-\U00010178\U0001018a-\U0001018b\U000102e1-\U000102fb"
    r"\U00010320-\U00010323\U00010341\U0001034a\U000103d1-\U000103d5\U00010858-\U0001085f"
    r"\U00010879-\U0001087f\U000108a7-\U000108af\U000108fb-\U000108ff\U00010916-\U0001091b"
    r"\U000109bc-\U000109bd\U000109c0-\U000109cf\U000109d2-\U000109ff\U00010a40-\U00010a48"
    r"\U00010a7d-\U00010a7e\U00010a9d-\U00010a9f\U00010aeb-\U00010aef\U00010b58-\U00010b5f"
    r"\U00010b78-\U00010b7f\U00010ba9-\U00010baf\U00010cfa-\U00010cff\U00010e60-\U00010e7e"
    r"\U00010f1d-\U00010f26\U00010f51-\U00010f54\U00010fc5-\U00010fcb\U00011052-\U00011065"
    r"\U000111e1-\U000111f4\U0001173a-\U0001173b\U000118ea-\U000118f2\U00011c5a-\U00011c6c"
    r"\U00011fc0-\U00011fd4\U00012400-\U0001246e\U00016b5b-\U00016b61\U00016e80-\U00016e96"
    r"\U0001d2e0-\U0001d2f3\U0001d360-\U0001d378\U0001e8c7-\U0001e8cf\U0001ec71-\U0001ecab"
    r"\U0001ecad-\U0001ecaf\U0001ecb1-\U0001ecb4\U0001ed01-\U0001ed2d\U0001ed2f-\U0001ed3d"
    r"\U0001f100-\U0001f10c"
)
"""The "other" and letter-like numbers (general categories No and Nl, Unicode 14.0) as
ranges of a regular expression's bracket: Python's ``\\w`` counts them as word characters,
ICU's ``[:alnum:]`` does not. Part of ``chat_words``: never changed but by a migration."""

_LATIN_MARKED = r"\u00c0-\u024f\u0385\u1e00-\u1eff\u1fc1\u1fed\u1fee\u212b\u2260\u226e\u226f"
"""Every character whose NFD is a letter below U+0250 and combining marks (and a few more):
a line without one needs no folding."""

FUNCTION_COST = 1_000
"""``conversation_lexemes``'s cost for the planner, in ``cpu_operator_cost``s (one is about
1 µs here): measured ~100 µs for a line of 500 characters, ASCII or not, so ~400 µs for an
answer of 2,000. The planner then computes it on a user's lines (the index on ``process_id``)
only when they are few, and otherwise looks the words up in ``chat_words``."""

_ROLES = ", ".join(f"'{role.value}'" for role in SEARCHED_ROLES)

_TABLES = f"""
SELECT normalize('vancetope', NFC);
CREATE OR REPLACE FUNCTION conversation_fold(cut TEXT) RETURNS TEXT
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
BEGIN
    RETURN CASE WHEN cut ~ '[{_LATIN_MARKED}]'
            THEN normalize(regexp_replace(normalize(cut, NFD),
                                          '([\\u0001-\\u024f])[\\u0300-\\u036f]+', '\\1', 'g'), NFC)
            ELSE cut END;
END
$fn$;
CREATE OR REPLACE FUNCTION conversation_text(head TEXT) RETURNS TEXT
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
BEGIN
    RETURN CASE WHEN octet_length(head) = char_length(head)
            THEN lower(regexp_replace(head COLLATE "C", '[^0-9A-Za-z]+', ' ', 'g'))
                 COLLATE "default"
            ELSE conversation_fold(regexp_replace(
                lower(CASE WHEN head IS NFC NORMALIZED THEN head ELSE normalize(head, NFC) END
                      COLLATE "und-x-icu"),
                '[^[:alnum:]{_NUMBERS}]+', ' ', 'g') COLLATE "default") END;
END
$fn$;
CREATE OR REPLACE FUNCTION conversation_keyed(tenant_key TEXT, cut TEXT) RETURNS TSVECTOR
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
BEGIN
    RETURN CASE WHEN cut ~ '[^ ]{{65}}'
            THEN array_to_tsvector(ARRAY(
                SELECT tenant_key || CASE WHEN octet_length(word) > {MAX_WORD_BYTES}
                    THEN '#' || encode(sha256(convert_to(word, 'UTF8')), 'hex') ELSE word END
                FROM unnest(string_to_array(cut, ' ')) AS word WHERE word <> ''))
            ELSE array_to_tsvector(array_remove(array_remove(string_to_array(
                replace(' ' || cut, ' ', ' ' || tenant_key), ' '), ''), tenant_key))
            END;
END
$fn$;
CREATE OR REPLACE FUNCTION conversation_lexemes(tenant TEXT, body TEXT) RETURNS TSVECTOR
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST {FUNCTION_COST} AS $fn$
BEGIN
    RETURN conversation_keyed(left(md5(tenant), 12),
                              conversation_text(left(body, {MAX_INDEXED_CHARS})));
END
$fn$;
CREATE INDEX IF NOT EXISTS chat_words
    ON chat USING GIN (conversation_lexemes(tenant_id, doc->>'content'))
    WHERE role IN ({_ROLES})
"""
"""The first statement fails at open, not in a turn, on a database not in UTF-8."""

_LINES = (
    "SELECT doc FROM chat WHERE conversation_lexemes(tenant_id, doc->>'content') @@ "
    "{tsquery}::tsquery AND role IN (" + _ROLES + ") AND tenant_id = %s "
    "AND process_id = ANY(%s) "
    "ORDER BY (doc->>'createdAt')::timestamptz DESC, seq DESC, id DESC LIMIT %s OFFSET %s")
"""The lines of the user's chat processes holding every word, newest first; the condition
on ``conversation_lexemes`` and ``role`` is ``chat_words``'s, word for word."""

_LEXEME = re.compile(r"[0-9a-f]{12}(?:[^\W_]+|#[0-9a-f]{64})")
"""A lexeme of ``conversation_lexemes``: a tenant key, then a word or a word's hash."""


def tenant_key(tenant_id: str) -> str:
    """The prefix of a tenant's lexemes in ``chat_words``."""
    return hashlib.md5(tenant_id.encode(), usedforsecurity=False).hexdigest()[:12]


def word_key(word: str) -> str:
    """How ``conversation_lexemes`` keeps a folded word: itself, or ``#`` and its SHA-256
    when longer than ``MAX_WORD_BYTES``."""
    data = word.encode()
    return word if len(data) <= MAX_WORD_BYTES else "#" + hashlib.sha256(data).hexdigest()


def _tsquery(tenant_id: str, words: list[str]) -> str:
    """The SQL literal of the tsquery of every word of ``words`` in the tenant's lexemes;
    ``ValueError`` for a lexeme that is not a key and letters and digits or a hash (so
    nothing in the query is tsquery or SQL syntax)."""
    key = tenant_key(tenant_id)
    lexemes = [key + word_key(word) for word in words]
    for lexeme in lexemes:
        if not _LEXEME.fullmatch(lexeme):
            raise ValueError(f"not a conversation lexeme: {lexeme!r}")
    return "'" + " & ".join(f"''{lexeme}''" for lexeme in lexemes) + "'"


class PostgresSessionSearch(PostgresAdapter, SessionSearch):
    tables = _TABLES

    def search_sessions(self, tenant_id: str, user_id: str, query: str, *,
                        limit: int = 20) -> list[ConversationHit]:
        wanted, limit = search_terms(query), capped(limit)
        if not wanted or limit == 0:
            return []
        # The WHERE of the partial index sessions_open, word for word.
        by_chat = searched(load_all(Session, self.db.read(
            "SELECT doc FROM sessions WHERE tenant_id = %s AND user_id = %s "
            "AND doc->>'status' <> 'CLOSED'", (tenant_id, user_id))))
        hits = title_hits(by_chat.values(), wanted)[:limit]
        if len(hits) == limit or not by_chat:
            return hits
        lines = _LINES.format(tsquery=_tsquery(tenant_id, wanted))
        offset = 0
        while len(hits) < limit:
            # A line the index finds holds every word as ICU cuts it; the port's tokeniser
            # has the last word (module docstring), so a rare line may be dropped here and
            # the next page read.
            wanted_rows = limit - len(hits)
            params: tuple[Any, ...] = (tenant_id, list(by_chat), wanted_rows, offset)
            rows = self.db.read(lines, params)
            for line in load_all(ChatMessage, rows):
                if holds_all(line.content, wanted):
                    hits.append(line_hit(by_chat[line.process_id], line, wanted))
            if len(rows) < wanted_rows:
                break
            offset += len(rows)
        return hits
