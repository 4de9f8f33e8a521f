"""PostgreSQL ``DocumentStore``: tables ``knowledge_documents``, ``knowledge_chunks`` and
``knowledge_terms`` (the vectors, ``DocumentVectors``: ``postgres/vectors.py``), a port of
``sqlite/documents.py`` with the same columns where they are the same thing.

A document row holds the ``KnowledgeDocument`` whole in ``doc`` (jsonb) with its key, name
(``COLLATE "C"``: listed in code point order), version, status, size and ``updated_us`` (its
``updated_at`` in microseconds since the epoch, for ``stalled_documents``) as columns,
rewritten whole on each change; (tenant, project, name) is unique. A chunk row (``id`` an
identity: insertion order) holds the ``Chunk`` without its text in ``doc`` and the text in
``text``, merged on load, its ``length`` in tokens and ``terms``: the distinct terms of its
text (``index_terms``, so lowercased and Latin diacritics folded exactly as every backend
counts them) as a ``tsvector`` made by ``array_to_tsvector`` — PostgreSQL's own parser and
dictionaries are never applied, so the terms are the port's, not ``to_tsvector``'s — with a
GIN index. A term longer than ``MAX_TERM_BYTES`` (a run of CJK letters has no spaces) is kept
as ``#`` and its SHA-256 (``term_key``): a tsvector lexeme and a btree key have a size
limit, and ``#`` is in no term.

Atomicity and concurrency (READ COMMITTED): each call is one transaction. Every write of a
document first locks its row (``SELECT … FOR UPDATE``) and decides on what it then reads,
so ``add_document``, ``mark_document``, ``write_chunks``, ``delete_document`` and
``DocumentVectors.write_vectors`` of one document run one after the other. ``add_document``
first takes a transaction-scoped advisory lock on the tenant (``pg_advisory_xact_lock``:
``_LOCK_CLASS`` and the tenant id hashed), then reads the usage: two adds of a tenant,
in one project or two, cannot pass a project's or the tenant's cap together (a hash
collision only makes two tenants' adds wait for each other). ``write_chunks`` checks the
version, deletes every chunk of the document (and its vectors), inserts the new ones and
flips the document in one transaction, so a search sees the old chunks or the new ones.

A document row also keeps ``chunks`` and ``tokens``, the count of its current chunks and
of their tokens (set by ``write_chunks``), and ``knowledge_terms`` per (tenant, project,
term) how many current chunks of the project's READY documents hold the term, kept as on
SQLite in the transaction of every change: ``write_chunks`` adds its chunks' terms, and
whatever makes a READY document stop being one, or replaces or deletes its chunks, takes
its chunks' terms (read back from ``terms``) away. One write applies the net change per
term in one statement in term order (``count_terms``), so two writers of one project lock
the term rows they share in the same order and never deadlock.

Search, per query term rarest first (n from ``knowledge_terms`` summed over the searched
projects; terms no chunk holds are skipped): the chunks of the tenant's projects whose
``terms`` hold the term (``@@`` one quoted lexeme, through the GIN index), of their READY
document at the chunk's version, in ``id`` order, until ``MAX_CANDIDATES`` chunks are found
in all — SQLite's candidates, in the same order. They are scored in Python by the port's
ranking (``store/ranking.py``) with the statistics SQLite uses (N and the mean length from
``chunks`` and ``tokens`` of those documents, n from ``knowledge_terms``, each candidate's
term frequencies counted in its text by ``counter``), so every backend gives the same
numbers (``tests/store_contract/documents/test_backends_agree.py``). ``ts_rank`` is not
used: its statistics are not BM25's. The best ``limit`` are then read whole. Cost: the GIN
index holds every tenant's chunks, so finding a rare term's chunks costs what its matches
across the store cost (as SQLite's FTS5 index); a common term is read in ``id`` order until
enough match; a search then reads at most ``MAX_CANDIDATES`` chunk texts. The planner
chooses between the two per term (the term is a literal in the query: ``_CANDIDATES``),
from the statistics autovacuum's ``ANALYZE`` keeps. Measured on 20,000 chunks of one
project and 10,000 of another tenant (180 Zipf words each, one client on the same host):
p50 2 ms for a rare word, 5 ms for a word in 0.5–5 % of the chunks, 10 ms for the commonest.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

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
    index_terms,
    lexical_hit,
    search_terms,
)
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import JsonDoc, doc_json, equal_clauses, load_all
from vancetope_brain.store.postgres.vectors import drop_vectors
from vancetope_brain.store.ranking import Candidate

MAX_TERM_BYTES = 256
"""UTF-8 bytes of the longest term kept as itself in ``terms`` and ``knowledge_terms``; a
longer one is kept as its hash (``term_key``)."""

_LOCK_CLASS = 0x766B_6E6F
"""The first key of the tenant's ``add_document`` advisory lock (``_db``'s schema lock has
another)."""

_TABLES = """
CREATE TABLE IF NOT EXISTS knowledge_documents (
    tenant_id TEXT NOT NULL, id TEXT NOT NULL, project_id TEXT NOT NULL,
    name TEXT COLLATE "C" NOT NULL, version INTEGER NOT NULL, status TEXT NOT NULL,
    size BIGINT NOT NULL, updated_us BIGINT NOT NULL, doc JSONB NOT NULL,
    chunks INTEGER NOT NULL DEFAULT 0, tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS knowledge_documents_by_name
    ON knowledge_documents (tenant_id, project_id, name);
CREATE INDEX IF NOT EXISTS knowledge_documents_by_status
    ON knowledge_documents (status, updated_us);
CREATE TABLE IF NOT EXISTS knowledge_chunks (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant_id TEXT NOT NULL,
    project_id TEXT NOT NULL, document_id TEXT NOT NULL, version INTEGER NOT NULL,
    ordinal INTEGER NOT NULL, length INTEGER NOT NULL, text TEXT NOT NULL, doc JSONB NOT NULL,
    terms TSVECTOR NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_chunks_by_document
    ON knowledge_chunks (tenant_id, document_id, version, ordinal);
CREATE INDEX IF NOT EXISTS knowledge_chunks_by_term ON knowledge_chunks USING GIN (terms);
CREATE TABLE IF NOT EXISTS knowledge_terms (
    tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, term TEXT COLLATE "C" NOT NULL,
    chunks INTEGER NOT NULL, PRIMARY KEY (tenant_id, project_id, term)
)
"""

_DOCUMENT = ("SELECT doc FROM knowledge_documents WHERE tenant_id = %s AND project_id = %s "
             "AND id = %s")

_CANDIDATES = (
    "SELECT c.id, c.length, c.text, d.name, c.ordinal, c.document_id FROM knowledge_chunks c "
    "JOIN knowledge_documents d ON d.tenant_id = c.tenant_id AND d.id = c.document_id "
    "AND d.version = c.version "
    "WHERE c.terms @@ {lexeme}::tsquery AND d.status = 'READY' AND c.tenant_id = %s "
    "AND c.project_id = ANY(%s) ORDER BY c.id LIMIT %s")
"""The first chunks holding a term that a search may return, in insertion order. The term
is a literal (``_lexeme``), not a parameter: the generic plan of a prepared statement
cannot tell a rare term (the GIN index, then a sort) from a common one (the chunks in ``id``
order until enough match), and took the second for every term (50 ms instead of 1 for a
rare term among 20,000 chunks)."""

_KEY = re.compile(r"[^\W_]+|#[0-9a-f]{64}")
"""What ``term_key`` gives: letters and digits, or ``#`` and a hex digest."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def term_key(term: str) -> str:
    """How ``term`` is kept in ``terms`` and ``knowledge_terms``: itself, or ``#`` and its
    SHA-256 when longer than ``MAX_TERM_BYTES`` (or, which ``index_terms`` never gives, not
    letters and digits only)."""
    data = term.encode()
    if len(data) <= MAX_TERM_BYTES and _KEY.fullmatch(term):
        return term
    return "#" + hashlib.sha256(data).hexdigest()


def chunk_terms(text: str) -> tuple[int, list[str]]:
    """A chunk's ``length`` (its terms, repeats counted) and its ``terms``: the keys of its
    distinct terms, sorted."""
    terms = index_terms(text)
    return len(terms), sorted({term_key(term) for term in terms})


def tenant_lock_in(conn: psycopg.Connection[Any], tenant_id: str) -> None:
    """Take the tenant's ``add_document`` advisory lock until the transaction ends."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, tenant_id))


def _lexeme(key: str) -> str:
    """The SQL literal of the tsquery of the one lexeme ``key``; ``ValueError`` unless it is
    what ``term_key`` gives (so nothing in it is SQL or tsquery syntax)."""
    if not _KEY.fullmatch(key):
        raise ValueError(f"not a term: {key!r}")
    return "'''" + key + "'''"


def epoch_us(moment: datetime) -> int:
    """Microseconds since the Unix epoch (``updated_us``); naive datetimes are UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1)


class PostgresDocuments(PostgresAdapter, DocumentStore):
    tables = _TABLES

    def add_document(self, doc: KnowledgeDocument, *, max_project_documents: int,
                     max_project_bytes: int, max_tenant_bytes: int) -> KnowledgeDocument:
        with self.db.write() as conn:
            tenant_lock_in(conn, doc.tenant_id)
            row = conn.execute("SELECT doc FROM knowledge_documents WHERE tenant_id = %s AND "
                               "project_id = %s AND name = %s FOR UPDATE",
                               (doc.tenant_id, doc.project_id, doc.name)).fetchone()
            stored = None if row is None else KnowledgeDocument.load(row[0])
            new = admitted(doc, stored, project=_usage(conn, doc.tenant_id, doc.project_id),
                           tenant_bytes=_usage(conn, doc.tenant_id, None)[1],
                           max_project_documents=max_project_documents,
                           max_project_bytes=max_project_bytes, max_tenant_bytes=max_tenant_bytes)
            if new is None:
                assert stored is not None
                return stored
            count_terms(conn, doc.tenant_id, doc.project_id, _unready(conn, stored))
            _put(conn, new)
        return new

    def get_document(self, tenant_id: str, project_id: str,
                     document_id: str) -> KnowledgeDocument | None:
        rows = self.db.read(_DOCUMENT, (tenant_id, project_id, document_id))
        return load_all(KnowledgeDocument, rows)[0] if rows else None

    def list_documents(self, tenant_id: str, project_id: str) -> list[KnowledgeDocument]:
        return load_all(KnowledgeDocument, self.db.read(
            "SELECT doc FROM knowledge_documents WHERE tenant_id = %s AND project_id = %s "
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
            count_terms(conn, tenant_id, project_id, _unready(conn, stored))
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
            change = _unready(conn, stored)
            _drop_chunks(conn, tenant_id, document_id)
            tokens, rows = 0, []
            for chunk in chunks:
                length, keys = chunk_terms(chunk.text)
                tokens += length
                change.update(keys)
                rows.append((tenant_id, project_id, document_id, version, chunk.ordinal,
                             length, chunk.text,
                             JsonDoc(chunk.model_dump_json(by_alias=True, exclude={"text"})), keys))
            conn.cursor().executemany(
                "INSERT INTO knowledge_chunks (tenant_id, project_id, document_id, version, "
                "ordinal, length, text, doc, terms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
                "array_to_tsvector(%s::text[]))", rows)
            count_terms(conn, tenant_id, project_id, change)
            _put(conn, stored.model_copy(update={
                "status": DocumentStatus.READY, "chunk_count": len(chunks), "pages": pages,
                "error_code": None, "error": None, "updated_at": utcnow()}),
                 tokens=tokens)
        return True

    def delete_document(self, tenant_id: str, project_id: str, document_id: str) -> bool:
        with self.db.write() as conn:
            row = conn.execute(_DOCUMENT + " FOR UPDATE",
                               (tenant_id, project_id, document_id)).fetchone()
            if row is None:
                return False
            count_terms(conn, tenant_id, project_id,
                         _unready(conn, KnowledgeDocument.load(row[0])))
            _drop_chunks(conn, tenant_id, document_id)
            conn.execute("DELETE FROM knowledge_documents WHERE tenant_id = %s AND id = %s",
                         (tenant_id, document_id))
        return True

    def search_chunks(self, tenant_id: str, project_ids: Sequence[str], query: str,
                      limit: int) -> list[SearchHit]:
        terms = search_terms(query)
        projects = sorted(set(project_ids))
        limit = min(limit, MAX_SEARCH_LIMIT)
        if not terms or not projects or limit <= 0:
            return []
        [(chunk_count, tokens)] = self.db.read(
            "SELECT COALESCE(SUM(chunks), 0), COALESCE(SUM(tokens), 0) FROM knowledge_documents "
            "WHERE tenant_id = %s AND project_id = ANY(%s) AND status = 'READY'",
            (tenant_id, projects))
        if chunk_count == 0:
            return []
        keys = {term: term_key(term) for term in terms}
        held = dict(self.db.read(
            "SELECT term, SUM(chunks) FROM knowledge_terms WHERE tenant_id = %s AND "
            "project_id = ANY(%s) AND term = ANY(%s) GROUP BY term",
            (tenant_id, projects, sorted(set(keys.values())))))
        holding = {term: int(held.get(keys[term], 0)) for term in terms}
        rows: dict[int, tuple[int, str, str, int, str]] = {}
        for term in sorted((t for t in terms if holding[t]), key=lambda t: (holding[t], t)):
            if len(rows) >= MAX_CANDIDATES:
                break
            for rowid, *found in self.db.read(
                    _CANDIDATES.format(lexeme=_lexeme(keys[term])),
                    (tenant_id, projects, MAX_CANDIDATES - len(rows))):
                rows.setdefault(rowid, tuple(found))
        count = counter(terms)
        candidates = [Found(Candidate(count(text), length), name, ordinal, document_id, rowid)
                      for rowid, (length, text, name, ordinal, document_id) in rows.items()]
        ranked = best(candidates, terms, chunks=int(chunk_count), tokens=int(tokens),
                      holding=holding, limit=limit)
        if not ranked:
            return []
        full = {rowid: (text, doc) for rowid, text, doc in self.db.read(
            "SELECT id, text, doc FROM knowledge_chunks WHERE id = ANY(%s)",
            ([hit.key for hit, _ in ranked],))}
        return [lexical_hit(Chunk.load({**full[hit.key][1], "text": full[hit.key][0]}),
                            hit.document_name, score)
                for hit, score in ranked if hit.key in full]

    def read_chunks(self, tenant_id: str, project_id: str, document_id: str, *,
                    section: str | None = None, page: int | None = None,
                    lines: tuple[int, int] | None = None,
                    limit: int = MAX_READ_CHUNKS) -> list[Chunk]:
        where: list[str] = []
        params: list[Any] = []
        if section is not None:
            where.append("c.doc->>'section' = %s")
            params.append(section)
        if page is not None:
            where.append("(c.doc->>'page')::bigint = %s")
            params.append(page)
        if lines is not None:
            where.append("(c.doc->>'lineStart')::bigint <= %s AND "
                         "(c.doc->>'lineEnd')::bigint >= %s")
            params += [lines[1], lines[0]]
        rows = self.db.read(
            "SELECT c.text, c.doc FROM knowledge_documents d JOIN knowledge_chunks c "
            "ON c.tenant_id = d.tenant_id AND c.document_id = d.id AND c.version = d.version "
            "WHERE d.tenant_id = %s AND d.project_id = %s AND d.id = %s AND d.status = 'READY' "
            f"{''.join(' AND ' + clause for clause in where)} ORDER BY c.ordinal LIMIT %s",
            (tenant_id, project_id, document_id, *params, max(0, min(limit, MAX_READ_CHUNKS))))
        return [Chunk.load({**doc, "text": text}) for text, doc in rows]

    def stalled_documents(self, before: datetime, limit: int) -> list[KnowledgeDocument]:
        return load_all(KnowledgeDocument, self.db.read(
            "SELECT doc FROM knowledge_documents WHERE status = ANY(%s) AND updated_us < %s "
            "ORDER BY updated_us, tenant_id, id LIMIT %s",
            ([DocumentStatus.PENDING.value, DocumentStatus.INDEXING.value], epoch_us(before),
             max(0, limit))))

    def usage(self, tenant_id: str, project_id: str | None = None) -> tuple[int, int]:
        count, size = self.db.read(*_usage_query(tenant_id, project_id))[0]
        return int(count), int(size)


def _usage_query(tenant_id: str, project_id: str | None) -> tuple[str, tuple[str, ...]]:
    clauses, params = equal_clauses(tenant_id, project_id=project_id)
    return (f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM knowledge_documents "
            f"WHERE {' AND '.join(clauses)}", tuple(params))


def _usage(conn: psycopg.Connection[Any], tenant_id: str,
           project_id: str | None) -> tuple[int, int]:
    count, size = conn.execute(*_usage_query(tenant_id, project_id)).fetchone() or (0, 0)
    return int(count), int(size)


def _current(conn: psycopg.Connection[Any], tenant_id: str, project_id: str, document_id: str,
             version: int) -> KnowledgeDocument | None:
    """The stored document, its row locked, if it is still at ``version``."""
    row = conn.execute(_DOCUMENT + " FOR UPDATE",
                       (tenant_id, project_id, document_id)).fetchone()
    stored = None if row is None else KnowledgeDocument.load(row[0])
    return stored if stored is not None and stored.version == version else None


def _put(conn: psycopg.Connection[Any], doc: KnowledgeDocument, *, tokens: int = 0) -> None:
    """Write the document row; ``chunks`` is its ``chunk_count``, ``tokens`` its chunks'
    tokens (both counted by a search only while it is READY)."""
    conn.execute(
        "INSERT INTO knowledge_documents (tenant_id, id, project_id, name, version, status, "
        "size, updated_us, doc, chunks, tokens) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (tenant_id, id) DO UPDATE SET name = excluded.name, "
        "version = excluded.version, status = excluded.status, size = excluded.size, "
        "updated_us = excluded.updated_us, doc = excluded.doc, chunks = excluded.chunks, "
        "tokens = excluded.tokens",
        (doc.tenant_id, doc.id, doc.project_id, doc.name, doc.version, doc.status.value,
         doc.size, epoch_us(doc.updated_at), doc_json(doc), doc.chunk_count,
         tokens))


def _unready(conn: psycopg.Connection[Any], stored: KnowledgeDocument | None) -> Counter[str]:
    """What a READY document's chunks take away from its project's term counts when it stops
    being one or gets new chunks (per term key, negative; empty for a document not READY)."""
    if stored is None or stored.status is not DocumentStatus.READY:
        return Counter()
    return Counter({term: -int(n) for term, n in conn.execute(
        "SELECT term, COUNT(*) FROM knowledge_chunks, unnest(tsvector_to_array(terms)) AS term "
        "WHERE tenant_id = %s AND document_id = %s GROUP BY term",
        (stored.tenant_id, stored.id))})


def count_terms(conn: psycopg.Connection[Any], tenant_id: str, project_id: str,
                 change: Counter[str]) -> None:
    """Apply ``change``, chunks per term key (negative: fewer), to the project's
    ``knowledge_terms`` in one statement in term order; a term no chunk holds any more
    loses its row."""
    changed = sorted((term, n) for term, n in change.items() if n)
    if not changed:
        return
    conn.execute(
        "INSERT INTO knowledge_terms (tenant_id, project_id, term, chunks) "
        "SELECT %s, %s, term, n FROM unnest(%s::text[], %s::int[]) AS change (term, n) "
        "ORDER BY term ON CONFLICT (tenant_id, project_id, term) "
        "DO UPDATE SET chunks = knowledge_terms.chunks + excluded.chunks",
        (tenant_id, project_id, [term for term, _ in changed], [n for _, n in changed]))
    gone = [term for term, n in changed if n < 0]
    if gone:
        conn.execute("DELETE FROM knowledge_terms WHERE tenant_id = %s AND project_id = %s "
                     "AND term = ANY(%s) AND chunks <= 0", (tenant_id, project_id, gone))


def _drop_chunks(conn: psycopg.Connection[Any], tenant_id: str, document_id: str) -> None:
    """Delete every chunk of the document and their vectors."""
    drop_vectors(conn, tenant_id, document_id)
    conn.execute("DELETE FROM knowledge_chunks WHERE tenant_id = %s AND document_id = %s",
                 (tenant_id, document_id))
