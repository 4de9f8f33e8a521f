"""SQLite ``MemoryStore``: tables ``memory_entries``, ``memory_terms`` and ``memory_scopes``.

``memory_entries`` holds each entry whole in ``doc``, with ``length`` (its term count);
the unique partial index ``memory_idempotency`` backs idempotent records. ``memory_terms``
is the lexical index: one row per distinct term of an entry, keyed by tenant, scope and
term first, so a search reads only the postings of its scopes' terms. ``memory_scopes``
counts each scope's entries and terms: the cap's count and the statistics BM25 needs,
without a scan. Atomicity: ``record`` and ``delete`` are one ``BEGIN IMMEDIATE`` transaction
each, which reads the scope's count, writes the entry, its terms and the count. No FTS5:
its tokenizer is not the one Mongo's ``terms`` use, and its statistics span all tenants.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

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
from vancetope_brain.store.sql import to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all, load_one, marks

_TABLES = """
CREATE TABLE IF NOT EXISTS memory_entries (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, scope TEXT NOT NULL, scope_id TEXT NOT NULL,
    process_id TEXT NOT NULL, kind TEXT NOT NULL, idempotency_key TEXT,
    length INTEGER NOT NULL, created_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_by_scope
    ON memory_entries (tenant_id, scope, scope_id, created_ms, id);
CREATE UNIQUE INDEX IF NOT EXISTS memory_idempotency
    ON memory_entries (tenant_id, process_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS memory_terms (
    tenant_id TEXT NOT NULL, scope TEXT NOT NULL, scope_id TEXT NOT NULL, term TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    PRIMARY KEY (tenant_id, scope, scope_id, term, entry_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memory_terms_entry ON memory_terms (entry_id);
CREATE TABLE IF NOT EXISTS memory_scopes (
    tenant_id TEXT NOT NULL, scope TEXT NOT NULL, scope_id TEXT NOT NULL,
    entries INTEGER NOT NULL, terms INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, scope_id)
) WITHOUT ROWID
"""

_SCOPE_KEY = "tenant_id = ? AND scope = ? AND scope_id = ?"


class SqliteMemory(SqliteAdapter, MemoryStore):
    tables = _TABLES

    def record(self, entry: MemoryEntry, *,
               limit: int = MAX_ENTRIES_PER_SCOPE) -> tuple[MemoryEntry, bool]:
        key = (entry.tenant_id, *entry.scope_ref)
        indexed = entry.indexed_terms()
        with self.db.write() as conn:
            if entry.idempotency_key is not None:
                first = conn.execute(
                    "SELECT doc FROM memory_entries WHERE tenant_id = ? AND process_id = ? "
                    "AND idempotency_key = ?",
                    (entry.tenant_id, entry.process_id, entry.idempotency_key)).fetchall()
                if first:
                    return load_all(MemoryEntry, first)[0], False
            row = conn.execute(f"SELECT entries FROM memory_scopes WHERE {_SCOPE_KEY}",
                               key).fetchone()
            if (row[0] if row else 0) >= limit:
                raise memory_full(entry, limit)
            try:
                conn.execute(
                    "INSERT INTO memory_entries (id, tenant_id, scope, scope_id, process_id, "
                    "kind, idempotency_key, length, created_ms, doc) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (entry.id, *key, entry.process_id, entry.kind.value, entry.idempotency_key,
                     len(indexed), to_ms(entry.created_at), entry.model_dump_json(by_alias=True)))
            except sqlite3.IntegrityError as e:
                raise Conflict(f"memory entry {entry.id} exists") from e
            index_entry_in(conn, key, entry.id, indexed, len(indexed))
        return entry, True

    def get_memory(self, tenant_id: str, entry_id: str) -> MemoryEntry:
        return load_one(MemoryEntry, self.db.read(
            "SELECT doc FROM memory_entries WHERE id = ? AND tenant_id = ?",
            (entry_id, tenant_id)), f"memory entry {entry_id} not found")

    def list_memory(self, tenant_id: str, scopes: Sequence[ScopeRef], *, limit: int = 20,
                    kinds: Iterable[MemoryKind] | None = None) -> list[MemoryEntry]:
        wanted = None if kinds is None else sorted({MemoryKind(k).value for k in kinds})
        limit = capped(limit)
        if limit == 0 or wanted == []:
            return []
        kind_clause = "" if wanted is None else f" AND kind IN {marks(wanted)}"
        # One index walk per scope, newest first, merged here: a single query over several
        # scopes would sort all their entries.
        found = [entry for scope in checked_scopes(scopes) for entry in load_all(
            MemoryEntry, self.db.read(
                f"SELECT doc FROM memory_entries WHERE {_SCOPE_KEY}{kind_clause} "
                "ORDER BY created_ms DESC, id DESC LIMIT ?",
                (tenant_id, *scope, *(wanted or ()), limit)))]
        found.sort(key=lambda entry: entry.id, reverse=True)
        found.sort(key=lambda entry: entry.created_at, reverse=True)
        return found[:limit]

    def search_memory(self, tenant_id: str, scopes: Sequence[ScopeRef], query: str, *,
                      limit: int = 10) -> list[MemoryHit]:
        asked, wanted = checked_scopes(scopes), query_terms(query)
        if not asked or not wanted or capped(limit) == 0:
            return []
        # One seek per scope (UNION ALL): a row-value IN over several scopes would make SQLite
        # walk all the tenant's terms.
        stats = self.db.read(" UNION ALL ".join(
            [f"SELECT entries, terms FROM memory_scopes WHERE {_SCOPE_KEY}"] * len(asked)),
            tuple(part for scope in asked for part in (tenant_id, *scope)))
        terms_in = f"term IN {marks(wanted)}"
        rows = self.db.read(" UNION ALL ".join(
            [f"SELECT doc FROM memory_entries WHERE id IN (SELECT entry_id FROM memory_terms "
             f"WHERE {_SCOPE_KEY} AND {terms_in})"] * len(asked)),
            tuple(part for scope in asked for part in (tenant_id, *scope, *wanted)))
        return rank(load_all(MemoryEntry, rows), wanted, entries=sum(row[0] for row in stats),
                    total_terms=sum(row[1] for row in stats), limit=limit)

    def delete_memory(self, tenant_id: str, entry_id: str) -> None:
        with self.db.write() as conn:
            row = conn.execute("SELECT scope, scope_id, length FROM memory_entries "
                               "WHERE id = ? AND tenant_id = ?", (entry_id, tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"memory entry {entry_id} not found")
            conn.execute("DELETE FROM memory_entries WHERE id = ?", (entry_id,))
            conn.execute("DELETE FROM memory_terms WHERE entry_id = ?", (entry_id,))
            conn.execute(f"UPDATE memory_scopes SET entries = entries - 1, terms = terms - ? "
                         f"WHERE {_SCOPE_KEY}", (row[2], tenant_id, row[0], row[1]))


def index_entry_in(conn: sqlite3.Connection, key: tuple[str, str, str], entry_id: str,
                   indexed: Iterable[str], length: int) -> None:
    """Enter an entry just inserted under scope ``key`` (tenant, scope, scope id) in the lexical
    index (each distinct term of ``indexed``) and count it, with its ``length``, in its scope's
    row (what ``delete_memory`` takes away). Also how ``sqlite/transfer.py`` indexes an
    imported entry."""
    conn.executemany(
        "INSERT INTO memory_terms (tenant_id, scope, scope_id, term, entry_id) "
        "VALUES (?, ?, ?, ?, ?)", [(*key, term, entry_id) for term in set(indexed)])
    conn.execute(
        "INSERT INTO memory_scopes (tenant_id, scope, scope_id, entries, terms) "
        "VALUES (?, ?, ?, 1, ?) ON CONFLICT (tenant_id, scope, scope_id) DO UPDATE "
        "SET entries = entries + 1, terms = terms + excluded.terms", (*key, length))
