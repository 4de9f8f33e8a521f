"""PostgreSQL ``MemoryStore``: tables ``memory_entries`` and ``memory_scopes``, a port of
``sqlite/memory.py``.

``memory_entries`` holds each entry whole in ``doc`` (jsonb), with ``length`` (its term
count), ``created_us`` (its ``created_at`` in microseconds: entries are listed newest first
to the microsecond, as the port's models compare them) and ``id`` ``COLLATE "C"`` (ties
listed by the greater id, bytewise as on SQLite). The unique partial index
``memory_idempotency`` backs idempotent records; ``memory_by_scope`` (tenant, scope, scope
id, time, id) serves listings, one backward index walk per scope asked, merged in one
statement.

Lexical index: ``terms``, a ``tsvector`` made by ``array_to_tsvector`` of the entry's
distinct terms (``models.memory.terms``, so NFKC- and case-folded exactly as every backend
counts them; PostgreSQL's own parser and dictionaries are never applied), each lexeme
prefixed with the entry's scope key (``scope_key``: 16 hex digits of the SHA-256 of tenant,
scope level and scope id), with the GIN index ``memory_by_term``. A search asks for the
lexemes ``scope key + term`` of the scopes and terms asked, so **the tenant and the scopes
are inside the index lookup**: one tenant's search reads only the posting lists of its own
asked scopes, never another tenant's or another scope's entries (unlike SQLite's FTS5
tables, memory never used FTS5, and unlike a tenant filter applied after a shared
term's postings). The same condition on the tenant and the scopes is also applied to the
rows, so a key collision could only cost a read, never a wrong hit. The index is built
with ``fastupdate = off``: an entry's lexemes go straight into the index (no pending list
of every tenant's recent entries read by each search); records are rare next to searches.
The query is a disjunction of quoted lexemes, each checked to be a scope key and letters
and digits only (``_lexeme``) and written into the statement as a literal (so each search
is planned for its own lexemes; no text typed reaches the tsquery parser unquoted).

``memory_scopes`` counts each scope's entries and terms: the cap's count and the statistics
BM25 needs (N and the summed lengths), without a scan. A search reads them and the
candidates (every entry of the asked scopes holding a query term) in one statement, so one
snapshot; they are scored in Python by the port's ``rank`` exactly as on SQLite and
MongoDB.

Atomicity and concurrency (READ COMMITTED): ``record`` and ``delete_memory`` are one
transaction each that first locks the scope's ``memory_scopes`` row ``FOR UPDATE``
(``record`` creates it at zero first, ``ON CONFLICT DO NOTHING``), so the writes of one
scope run one after the other: the count read is the count written, and the cap holds
under any number of concurrent writers. Under that lock ``record`` looks its idempotency
key up (a replay answers even when the scope is full), checks the cap, inserts the entry
``ON CONFLICT`` on ``memory_idempotency`` ``DO NOTHING`` (a racing record of the same key
into another scope: it then returns that one's entry) and adds to the counter. A taken id
is a ``Conflict`` and rolls the whole record back. ``delete_memory`` reads the entry's
scope, locks it, deletes the entry (``RETURNING`` its length: of two deletes, the second
finds nothing) and subtracts from the counter. Both lock the scope row before touching an
entry, so they never deadlock with each other.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models.memory import (
    MAX_ENTRIES_PER_SCOPE,
    MemoryEntry,
    MemoryHit,
    MemoryKind,
    ScopeRef,
    query_terms,
)
from vancetope_brain.store.memory import (
    MemoryStore,
    capped,
    checked_scopes,
    memory_full,
    rank,
)
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, load_all, load_one

_TABLES = """
CREATE TABLE IF NOT EXISTS memory_entries (
    id TEXT COLLATE "C" PRIMARY KEY, tenant_id TEXT NOT NULL, scope TEXT NOT NULL,
    scope_id TEXT NOT NULL, process_id TEXT NOT NULL, kind TEXT NOT NULL,
    idempotency_key TEXT, length INTEGER NOT NULL, created_us BIGINT NOT NULL,
    doc JSONB NOT NULL, terms TSVECTOR NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_by_scope
    ON memory_entries (tenant_id, scope, scope_id, created_us, id);
CREATE UNIQUE INDEX IF NOT EXISTS memory_idempotency
    ON memory_entries (tenant_id, process_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS memory_by_term ON memory_entries USING GIN (terms)
    WITH (fastupdate = off);
CREATE TABLE IF NOT EXISTS memory_scopes (
    tenant_id TEXT NOT NULL, scope TEXT NOT NULL, scope_id TEXT NOT NULL,
    entries INTEGER NOT NULL, terms BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, scope, scope_id)
)
"""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_SCOPE_KEY = "tenant_id = %s AND scope = %s AND scope_id = %s"

_LEXEME = re.compile(r"[0-9a-f]{16}[^\W_]+")
"""A lexeme of ``terms``: a scope key, then a term (letters and digits only)."""


def scope_key(tenant_id: str, scope: ScopeRef) -> str:
    """The prefix of the lexemes of a scope's entries: 16 hex digits of the SHA-256 of
    tenant, level and id (unit-separated, so no two triples give the same input)."""
    raw = "\x1f".join((tenant_id, scope.level.value, scope.id)).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def _lexeme(lexeme: str) -> str:
    """``lexeme`` quoted for a tsquery literal; ``ValueError`` unless it is a scope key and
    a term (so nothing in it is tsquery or SQL syntax)."""
    if not _LEXEME.fullmatch(lexeme):
        raise ValueError(f"not a memory lexeme: {lexeme!r}")
    return "'" + lexeme + "'"


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (standard_conforming_strings: only quotes double)."""
    return "'" + text.replace("'", "''") + "'"


def _in_scopes(scopes: Sequence[ScopeRef]) -> tuple[str, list[str]]:
    """The condition on (scope, scope_id) for ``scopes`` and its parameters."""
    return (f"(scope, scope_id) IN ({', '.join(['(%s, %s)'] * len(scopes))})",
            [part for scope in scopes for part in (scope.level.value, scope.id)])


def entry_lexemes(entry: MemoryEntry) -> list[str]:
    """The lexemes of the entry's ``terms``: its scope key before each distinct term, sorted."""
    prefix = scope_key(entry.tenant_id, entry.scope_ref)
    return sorted({prefix + term for term in entry.indexed_terms()})


def created_us(entry: MemoryEntry) -> int:
    """``created_at`` in microseconds since the Unix epoch (naive: UTC)."""
    moment = entry.created_at
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1)


class PostgresMemory(PostgresAdapter, MemoryStore):
    tables = _TABLES

    def record(self, entry: MemoryEntry, *,
               limit: int = MAX_ENTRIES_PER_SCOPE) -> tuple[MemoryEntry, bool]:
        key = (entry.tenant_id, *entry.scope_ref)
        indexed = entry.indexed_terms()
        with self.db.write() as conn:
            conn.execute("INSERT INTO memory_scopes (tenant_id, scope, scope_id, entries, terms) "
                         "VALUES (%s, %s, %s, 0, 0) ON CONFLICT DO NOTHING", key)
            row = conn.execute(f"SELECT entries FROM memory_scopes WHERE {_SCOPE_KEY} "
                               "FOR UPDATE", key).fetchone()
            first = _first(conn, entry)
            if first is not None:
                return first, False
            if row is None or row[0] >= limit:
                raise memory_full(entry, limit)
            try:
                inserted = conn.execute(
                    "INSERT INTO memory_entries (id, tenant_id, scope, scope_id, process_id, "
                    "kind, idempotency_key, length, created_us, doc, terms) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                    "array_to_tsvector(%s::text[])) "
                    "ON CONFLICT (tenant_id, process_id, idempotency_key) "
                    "WHERE idempotency_key IS NOT NULL DO NOTHING",
                    (entry.id, *key, entry.process_id, entry.kind.value, entry.idempotency_key,
                     len(indexed), created_us(entry), doc_json(entry),
                     entry_lexemes(entry))).rowcount
            except psycopg.errors.UniqueViolation as e:
                raise Conflict(f"memory entry {entry.id} exists") from e
            if not inserted:  # the same key, recorded into another scope meanwhile
                first = _first(conn, entry)
                if first is None:
                    raise Conflict(f"memory entry {entry.idempotency_key} is being recorded")
                return first, False
            conn.execute(f"UPDATE memory_scopes SET entries = entries + 1, terms = terms + %s "
                         f"WHERE {_SCOPE_KEY}", (len(indexed), *key))
        return entry, True

    def get_memory(self, tenant_id: str, entry_id: str) -> MemoryEntry:
        return load_one(MemoryEntry, self.db.read(
            "SELECT doc FROM memory_entries WHERE id = %s AND tenant_id = %s",
            (entry_id, tenant_id)), f"memory entry {entry_id} not found")

    def list_memory(self, tenant_id: str, scopes: Sequence[ScopeRef], *, limit: int = 20,
                    kinds: Iterable[MemoryKind] | None = None) -> list[MemoryEntry]:
        wanted = None if kinds is None else sorted({MemoryKind(k).value for k in kinds})
        asked, limit = checked_scopes(scopes), capped(limit)
        if not asked or limit == 0 or wanted == []:
            return []
        kind_clause = "" if wanted is None else " AND kind = ANY(%s)"
        # One backward walk of memory_by_scope per scope, each stopping at ``limit``, merged:
        # a single condition over several scopes would sort all their entries.
        walk = (f"(SELECT doc, created_us, id FROM memory_entries WHERE {_SCOPE_KEY}"
                f"{kind_clause} ORDER BY created_us DESC, id DESC LIMIT %s)")
        params: list[Any] = []
        for scope in asked:
            params += [tenant_id, *scope, *([] if wanted is None else [wanted]), limit]
        return load_all(MemoryEntry, self.db.read(
            f"SELECT doc FROM ({' UNION ALL '.join([walk] * len(asked))}) AS newest "
            "ORDER BY created_us DESC, id DESC LIMIT %s", (*params, limit)))

    def search_memory(self, tenant_id: str, scopes: Sequence[ScopeRef], query: str, *,
                      limit: int = 10) -> list[MemoryHit]:
        asked, wanted = checked_scopes(scopes), query_terms(query)
        if not asked or not wanted or capped(limit) == 0:
            return []
        tsquery = " | ".join(_lexeme(scope_key(tenant_id, scope) + term)
                             for scope in asked for term in wanted)
        in_scopes, scope_params = _in_scopes(asked)
        rows = self.db.read(
            "WITH stats AS (SELECT COALESCE(SUM(entries), 0) AS entries, "
            "COALESCE(SUM(terms), 0) AS terms FROM memory_scopes "
            f"WHERE tenant_id = %s AND {in_scopes}) "
            "SELECT e.doc, stats.entries, stats.terms FROM memory_entries e CROSS JOIN stats "
            f"WHERE e.terms @@ {_literal(tsquery)}::tsquery AND e.tenant_id = %s AND {in_scopes}",
            (tenant_id, *scope_params, tenant_id, *scope_params))
        if not rows:
            return []
        return rank(load_all(MemoryEntry, rows), wanted, entries=int(rows[0][1]),
                    total_terms=int(rows[0][2]), limit=limit)

    def delete_memory(self, tenant_id: str, entry_id: str) -> None:
        with self.db.write() as conn:
            row = conn.execute("SELECT scope, scope_id FROM memory_entries "
                               "WHERE id = %s AND tenant_id = %s",
                               (entry_id, tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"memory entry {entry_id} not found")
            key = (tenant_id, *row)
            conn.execute(f"SELECT 1 FROM memory_scopes WHERE {_SCOPE_KEY} FOR UPDATE", key)
            gone = conn.execute("DELETE FROM memory_entries WHERE id = %s AND tenant_id = %s "
                                "RETURNING length", (entry_id, tenant_id)).fetchone()
            if gone is None:  # deleted by another call meanwhile
                raise NotFound(f"memory entry {entry_id} not found")
            conn.execute(f"UPDATE memory_scopes SET entries = entries - 1, terms = terms - %s "
                         f"WHERE {_SCOPE_KEY}", (gone[0], *key))


def _first(conn: psycopg.Connection[Any], entry: MemoryEntry) -> MemoryEntry | None:
    """The entry its process recorded under its idempotency key before, if any."""
    if entry.idempotency_key is None:
        return None
    row = conn.execute("SELECT doc FROM memory_entries WHERE tenant_id = %s AND process_id = %s "
                       "AND idempotency_key = %s",
                       (entry.tenant_id, entry.process_id, entry.idempotency_key)).fetchone()
    return None if row is None else MemoryEntry.load(row[0])
