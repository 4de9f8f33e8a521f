"""SQLite ``DocumentStore``: tables ``knowledge_documents``, ``knowledge_chunks``,
``knowledge_terms`` and the FTS5 index ``knowledge_fts`` (the vectors,
``DocumentVectors``: ``sqlite/vectors.py``).

A document row holds the ``KnowledgeDocument`` whole in ``doc`` with its key, name, version,
status and size as columns, rewritten whole on each change; (tenant, project, name) is
unique. A chunk row holds the ``Chunk`` without its text in ``doc`` and the text in
``text``, authoritative and merged on load. ``knowledge_fts`` is an external-content FTS5
table over ``knowledge_chunks.text`` (tokenizer ``unicode61 remove_diacritics 2``, no
stemming), kept by this adapter — not by triggers — in the same transaction as the chunks.

Atomicity: each call is one ``BEGIN IMMEDIATE`` transaction: ``add_document`` reads the
usage and the document of that name and writes inside it; ``write_chunks`` checks the
version, deletes every chunk of the document, inserts the new ones and flips the document.

A document row also keeps ``chunks`` and ``tokens``, the count of its current chunks and
of their tokens (set by ``write_chunks``), a chunk row its ``length`` in tokens
(``index_terms``), and ``knowledge_terms`` per (tenant, project, term) how many current
chunks of the project's READY documents hold the term: ``write_chunks`` adds its chunks'
terms as it makes a document READY, and whatever makes a READY document stop being one, or
replaces or deletes its chunks, first takes them away (``_unready``: their texts read and
tokenised again), all in that call's transaction. So a search has its statistics without
reading the chunks.

Search, per query term rarest first (n from ``knowledge_terms`` summed over the searched
projects — one read of its key; terms no chunk holds are skipped):
``knowledge_fts`` ``MATCH``es the term's words (each quoted: nothing the user typed is FTS
syntax), joined to the chunks of the tenant's projects and to their READY document at the
chunk's version, in rowid order, until ``MAX_CANDIDATES`` chunks are found in all. So the
chunks holding a rare term are always ranked, and only a common term's long list is cut
(``MAX_CANDIDATES`` in the port). They are scored in Python by the port's ranking
(``store/ranking.py``): N and the mean length are the sums of ``chunks`` and ``tokens`` over
those documents, n per term is ``knowledge_terms``', each candidate's term frequencies are
counted in its text (``counter``: as ``index_terms`` counts). FTS5's ``bm25()`` is not used:
its statistics span the whole file (every tenant, old versions). The best ``limit`` are then
read whole. Cost (``benchmarks/retrieval.py``): a search reads at most ``MAX_CANDIDATES``
chunk texts whatever the store's size; ``knowledge_terms`` holds one row per distinct term
of each project.
The knowledge tables came without a schema version (``_db``: a new table needs none) and
have had ``length``, ``chunks``, ``tokens`` and ``knowledge_terms`` since before any release.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from vancetope_brain.models import utcnow
from vancetope_brain.models.knowledge import Chunk, DocumentStatus, KnowledgeDocument, SearchHit
from vancetope_brain.store.documents import (
    MAX_CANDIDATES,
    MAX_READ_CHUNKS,
    MAX_SEARCH_LIMIT,
    DocumentStore,
    Found,
    admitted,
    best,
    check_chunks,
    counter,
    fold,
    index_terms,
    lexical_hit,
    query_words,
)
from vancetope_brain.store.ranking import Candidate
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import equal_clauses, fts_query, load_all, marks
from vancetope_brain.store.sqlite.vectors import drop_vectors

_TABLES = """
CREATE TABLE IF NOT EXISTS knowledge_documents (
    tenant_id TEXT NOT NULL, id TEXT NOT NULL, project_id TEXT NOT NULL, name TEXT NOT NULL,
    version INTEGER NOT NULL, status TEXT NOT NULL, size INTEGER NOT NULL, doc TEXT NOT NULL,
    chunks INTEGER NOT NULL DEFAULT 0, tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS knowledge_documents_by_name
    ON knowledge_documents (tenant_id, project_id, name);
CREATE INDEX IF NOT EXISTS knowledge_documents_by_status ON knowledge_documents (status);
CREATE TABLE IF NOT EXISTS knowledge_chunks (
    id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT NOT NULL,
    document_id TEXT NOT NULL, version INTEGER NOT NULL, ordinal INTEGER NOT NULL,
    length INTEGER NOT NULL, text TEXT NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_chunks_by_document
    ON knowledge_chunks (tenant_id, document_id, version, ordinal);
CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_fts USING fts5(
    text, content = 'knowledge_chunks', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS knowledge_terms (
    tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, term TEXT NOT NULL,
    chunks INTEGER NOT NULL, PRIMARY KEY (tenant_id, project_id, term)
) WITHOUT ROWID
"""

_IN_SCOPE = (
    "FROM knowledge_fts CROSS JOIN knowledge_chunks c ON c.id = knowledge_fts.rowid "
    "CROSS JOIN knowledge_documents d ON d.tenant_id = c.tenant_id AND d.id = c.document_id "
    "WHERE knowledge_fts MATCH ? AND d.status = 'READY' AND d.version = c.version "
    "AND c.tenant_id = ? AND c.project_id IN")
"""The chunks matching a ``MATCH`` that a search may return; the projects' list follows.
``CROSS JOIN`` fixes the order: the index's matches first, each then looked up by key
(the planner otherwise walks the tenant's chunks and runs the ``MATCH`` per row)."""

_DOCUMENT = "SELECT doc FROM knowledge_documents WHERE tenant_id = ? AND project_id = ? AND id = ?"


class SqliteDocuments(SqliteAdapter, DocumentStore):
    tables = _TABLES

    def add_document(self, doc: KnowledgeDocument, *, max_project_documents: int,
                     max_project_bytes: int, max_tenant_bytes: int) -> KnowledgeDocument:
        with self.db.write() as conn:
            row = conn.execute("SELECT doc FROM knowledge_documents WHERE tenant_id = ? AND "
                               "project_id = ? AND name = ?",
                               (doc.tenant_id, doc.project_id, doc.name)).fetchone()
            stored = None if row is None else KnowledgeDocument.load(json.loads(row[0]))
            project = _usage(conn, doc.tenant_id, doc.project_id)
            new = admitted(doc, stored, project=project,
                           tenant_bytes=_usage(conn, doc.tenant_id, None)[1],
                           max_project_documents=max_project_documents,
                           max_project_bytes=max_project_bytes, max_tenant_bytes=max_tenant_bytes)
            if new is None:
                assert stored is not None
                return stored
            _unready(conn, stored)
            _put(conn, new)
        return new

    def get_document(self, tenant_id: str, project_id: str,
                     document_id: str) -> KnowledgeDocument | None:
        rows = self.db.read(_DOCUMENT, (tenant_id, project_id, document_id))
        return load_all(KnowledgeDocument, rows)[0] if rows else None

    def list_documents(self, tenant_id: str, project_id: str) -> list[KnowledgeDocument]:
        return load_all(KnowledgeDocument, self.db.read(
            "SELECT doc FROM knowledge_documents WHERE tenant_id = ? AND project_id = ? "
            "ORDER BY name", (tenant_id, project_id)))

    def mark_document(self, tenant_id: str, project_id: str, document_id: str, version: int,
                      status: DocumentStatus, *, error_code: str | None = None,
                      error: str | None = None) -> bool:
        if status is DocumentStatus.READY:
            raise ValueError("a document becomes READY with write_chunks")
        with self.db.write() as conn:
            stored = _current(conn, tenant_id, project_id, document_id, version)
            if stored is None:
                return False
            _unready(conn, stored)
            _put(conn, stored.model_copy(update={"status": status, "error_code": error_code,
                                                 "error": error, "updated_at": utcnow()}))
        return True

    def write_chunks(self, tenant_id: str, project_id: str, document_id: str, version: int,
                     chunks: Sequence[Chunk], *, pages: int | None) -> bool:
        check_chunks(tenant_id, project_id, document_id, version, chunks)
        with self.db.write() as conn:
            stored = _current(conn, tenant_id, project_id, document_id, version)
            if stored is None:
                return False
            _unready(conn, stored)
            _drop_chunks(conn, tenant_id, document_id)
            tokens = 0
            holding: Counter[str] = Counter()
            for chunk in chunks:
                terms = index_terms(chunk.text)
                length = len(terms)
                tokens += length
                holding.update(set(terms))
                rowid = conn.execute(
                    "INSERT INTO knowledge_chunks (tenant_id, project_id, document_id, version, "
                    "ordinal, length, text, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (tenant_id, project_id, document_id, version, chunk.ordinal, length,
                     chunk.text, chunk.model_dump_json(by_alias=True, exclude={"text"}))
                ).lastrowid
                assert rowid is not None
                index_chunk_in(conn, rowid, chunk.text)
            count_terms_in(conn, tenant_id, project_id, holding, 1)
            _put(conn, stored.model_copy(update={
                "status": DocumentStatus.READY, "chunk_count": len(chunks), "pages": pages,
                "error_code": None, "error": None, "updated_at": utcnow()}),
                 tokens=tokens)
        return True

    def delete_document(self, tenant_id: str, project_id: str, document_id: str) -> bool:
        with self.db.write() as conn:
            row = conn.execute(_DOCUMENT, (tenant_id, project_id, document_id)).fetchone()
            if row is None:
                return False
            _unready(conn, KnowledgeDocument.load(json.loads(row[0])))
            _drop_chunks(conn, tenant_id, document_id)
            conn.execute("DELETE FROM knowledge_documents WHERE tenant_id = ? AND id = ?",
                         (tenant_id, document_id))
        return True

    def search_chunks(self, tenant_id: str, project_ids: Sequence[str], query: str,
                      limit: int) -> list[SearchHit]:
        words = query_words(query)
        projects = sorted(set(project_ids))
        limit = min(limit, MAX_SEARCH_LIMIT)
        if not words or not projects or limit <= 0:
            return []
        spelled: dict[str, list[str]] = {}  # each folded term and the query words it comes of
        for word in words:
            spelled.setdefault(fold(word), []).append(word)
        ready = self.db.read(
            f"SELECT chunks, tokens FROM knowledge_documents WHERE tenant_id = ? AND "
            f"project_id IN {marks(projects)} AND status = 'READY'", (tenant_id, *projects))
        chunk_count, tokens = sum(row[0] for row in ready), sum(row[1] for row in ready)
        if chunk_count == 0:
            return []
        terms = list(spelled)
        holding = dict.fromkeys(terms, 0)
        holding.update(self.db.read(
            f"SELECT term, SUM(chunks) FROM knowledge_terms WHERE tenant_id = ? AND project_id "
            f"IN {marks(projects)} AND term IN {marks(terms)} GROUP BY term",
            (tenant_id, *projects, *terms)))
        rows: dict[int, tuple[int, str, str, int, str]] = {}
        for term in sorted((t for t in terms if holding[t]), key=lambda t: (holding[t], t)):
            if len(rows) >= MAX_CANDIDATES:
                break
            for rowid, *found in self.db.read(
                    f"SELECT c.id, c.length, c.text, d.name, c.ordinal, c.document_id "
                    f"{_IN_SCOPE} {marks(projects)} LIMIT ?",
                    (fts_query(spelled[term], any_word=True), tenant_id, *projects,
                     MAX_CANDIDATES - len(rows))):
                rows.setdefault(rowid, found)  # type: ignore[arg-type]
        count = counter(terms)
        found = [Found(Candidate(count(text), length), name, ordinal, document_id, rowid)
                 for rowid, (length, text, name, ordinal, document_id) in rows.items()]
        ranked = best(found, terms, chunks=chunk_count, tokens=tokens, holding=holding,
                      limit=limit)
        if not ranked:
            return []
        full = {rowid: (text, doc) for rowid, text, doc in self.db.read(
            f"SELECT id, text, doc FROM knowledge_chunks WHERE id IN "
            f"{marks(ranked)}", tuple(hit.key for hit, _ in ranked))}
        return [lexical_hit(Chunk.load({**json.loads(full[hit.key][1]), "text": full[hit.key][0]}),
                            hit.document_name, score)
                for hit, score in ranked if hit.key in full]

    def read_chunks(self, tenant_id: str, project_id: str, document_id: str, *,
                    section: str | None = None, page: int | None = None,
                    lines: tuple[int, int] | None = None,
                    limit: int = MAX_READ_CHUNKS) -> list[Chunk]:
        where, params = [], []
        for clause, value in (("json_extract(c.doc, '$.section') = ?", section),
                              ("json_extract(c.doc, '$.page') = ?", page)):
            if value is not None:
                where.append(clause)
                params.append(value)
        if lines is not None:
            where.append("json_extract(c.doc, '$.lineStart') <= ? AND "
                         "json_extract(c.doc, '$.lineEnd') >= ?")
            params += [lines[1], lines[0]]
        rows = self.db.read(
            "SELECT c.text, c.doc FROM knowledge_documents d CROSS JOIN knowledge_chunks c "
            "ON c.tenant_id = d.tenant_id AND c.document_id = d.id AND c.version = d.version "
            "WHERE d.tenant_id = ? AND d.project_id = ? AND d.id = ? AND d.status = 'READY' "
            f"{''.join(' AND ' + clause for clause in where)} ORDER BY c.ordinal LIMIT ?",
            (tenant_id, project_id, document_id, *params, max(0, min(limit, MAX_READ_CHUNKS))))
        return [Chunk.load({**json.loads(doc), "text": text}) for text, doc in rows]

    def stalled_documents(self, before: datetime, limit: int) -> list[KnowledgeDocument]:
        unfinished = load_all(KnowledgeDocument, self.db.read(
            "SELECT doc FROM knowledge_documents WHERE status IN (?, ?)",
            (DocumentStatus.PENDING.value, DocumentStatus.INDEXING.value)))
        return sorted((doc for doc in unfinished if doc.updated_at < before),
                      key=lambda doc: doc.updated_at)[:limit]

    def usage(self, tenant_id: str, project_id: str | None = None) -> tuple[int, int]:
        count, size = self.db.read(*_usage_query(tenant_id, project_id))[0]
        return int(count), int(size)


def _usage_query(tenant_id: str, project_id: str | None) -> tuple[str, tuple[str, ...]]:
    clauses, params = equal_clauses(tenant_id, project_id=project_id)
    return (f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM knowledge_documents "
            f"WHERE {' AND '.join(clauses)}", tuple(params))


def _usage(conn: sqlite3.Connection, tenant_id: str,
           project_id: str | None) -> tuple[int, int]:
    count, size = conn.execute(*_usage_query(tenant_id, project_id)).fetchone()
    return int(count), int(size)


def _current(conn: sqlite3.Connection, tenant_id: str, project_id: str, document_id: str,
             version: int) -> KnowledgeDocument | None:
    """The stored document if it is still at ``version``."""
    row = conn.execute(_DOCUMENT, (tenant_id, project_id, document_id)).fetchone()
    stored = None if row is None else KnowledgeDocument.load(json.loads(row[0]))
    return stored if stored is not None and stored.version == version else None


def _put(conn: sqlite3.Connection, doc: KnowledgeDocument, *, tokens: int = 0) -> None:
    """Write the document row; ``chunks`` is its ``chunk_count``, ``tokens`` its chunks'
    tokens (both counted by a search only while it is READY)."""
    conn.execute(
        "INSERT INTO knowledge_documents (tenant_id, id, project_id, name, version, status, size,"
        " doc, chunks, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (tenant_id, id) DO UPDATE SET name = excluded.name, "
        "version = excluded.version, status = excluded.status, size = excluded.size, "
        "doc = excluded.doc, chunks = excluded.chunks, tokens = excluded.tokens",
        (doc.tenant_id, doc.id, doc.project_id, doc.name, doc.version, doc.status.value,
         doc.size, doc.model_dump_json(by_alias=True), doc.chunk_count, tokens))


def index_chunk_in(conn: sqlite3.Connection, rowid: int, text: str) -> None:
    """Enter a chunk just inserted as ``rowid`` in ``knowledge_fts`` (kept by the adapters,
    not by triggers: this one's ``write_chunks`` and ``sqlite/transfer.py``'s import)."""
    conn.execute("INSERT INTO knowledge_fts (rowid, text) VALUES (?, ?)", (rowid, text))


def count_terms_in(conn: sqlite3.Connection, tenant_id: str, project_id: str,
                   holding: Counter[str], sign: int) -> None:
    """Add (``sign`` 1) or take away (-1) ``holding``, chunks per term, to or from the
    project's ``knowledge_terms``; a term no chunk holds any more loses its row. Only the
    chunks of READY documents at their current version are counted."""
    rows = [(tenant_id, project_id, term, sign * n) for term, n in sorted(holding.items())]
    conn.executemany("INSERT INTO knowledge_terms (tenant_id, project_id, term, chunks) "
                     "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, project_id, term) "
                     "DO UPDATE SET chunks = chunks + excluded.chunks", rows)
    if sign < 0:
        conn.executemany("DELETE FROM knowledge_terms WHERE tenant_id = ? AND project_id = ? "
                         "AND term = ? AND chunks <= 0", (row[:3] for row in rows))


def _unready(conn: sqlite3.Connection, stored: KnowledgeDocument | None) -> None:
    """Before a READY document stops being one or gets new chunks: take its chunks out of
    its project's term counts (their terms read again from their texts)."""
    if stored is None or stored.status is not DocumentStatus.READY:
        return
    holding: Counter[str] = Counter()
    for (text,) in conn.execute("SELECT text FROM knowledge_chunks WHERE tenant_id = ? AND "
                                "document_id = ?", (stored.tenant_id, stored.id)):
        holding.update(set(index_terms(text)))
    count_terms_in(conn, stored.tenant_id, stored.project_id, holding, -1)


def _drop_chunks(conn: sqlite3.Connection, tenant_id: str, document_id: str) -> None:
    """Delete every chunk of the document, and its index entries first (an external-content
    index forgets a row only when told the text it indexed)."""
    drop_vectors(conn, tenant_id, document_id)
    conn.execute("INSERT INTO knowledge_fts (knowledge_fts, rowid, text) SELECT 'delete', id, "
                 "text FROM knowledge_chunks WHERE tenant_id = ? AND document_id = ?",
                 (tenant_id, document_id))
    conn.execute("DELETE FROM knowledge_chunks WHERE tenant_id = ? AND document_id = ?",
                 (tenant_id, document_id))
