"""PostgreSQL ``DocumentVectors``: tables ``knowledge_vectors`` and
``knowledge_vector_generations``, next to ``postgres/documents.py``'s tables, which it reads;
a port of ``sqlite/vectors.py``.

A vector row is one chunk's (``chunk_id`` = ``knowledge_chunks.id``) unit vector as float32
``BYTEA``, with its tenant, project, document, version, model and dimension. **No
pgvector**: the extension is not in PostgreSQL itself, a database user may not be allowed to
create it, and no machine this is tested on has it (Debian ships no package for it), so
nothing here may depend on it. The scan is exact, in numpy, as on SQLite, with the same limit:
at most ``scan_rows(dim)`` vectors (200,000, fewer for long vectors: 512 MiB) per project are
compared, the first by ``chunk_id``; a project with more finds by vector only among them.
Its cost is linear: one matrix-vector product per project searched, and the matrix read
from the server again after every change of the project's vectors. An approximate index
(pgvector's HNSW) is the way past that limit where the extension can be had; it is not
built here.

Atomicity (READ COMMITTED): ``write_vectors`` is one transaction that locks the document's
row (``SELECT … FOR UPDATE``, as every write of ``postgres/documents.py`` does first), checks
it is READY at the version, deletes its vectors, inserts the new ones and bumps the
project's generation, so vectors never attach to chunks a concurrent ``write_chunks``
replaced.

Search reads each searched project's vectors of the model and dimension into one matrix,
kept in a per-process cache of at most ``MAX_CACHED_BYTES`` (least recently used out
first), and multiplies it by the query. A cached matrix is valid while the project's row in
``knowledge_vector_generations`` says the generation it was read at: every write that adds
or removes vectors of a project (``write_vectors``, and ``drop_vectors``, which
``PostgresDocuments`` calls when ``write_chunks`` or ``delete_document`` drop a document's
chunks) bumps it in the same transaction (an upsert, which also orders concurrent vector
writes of one project), so every process sharing the database reads a changed project again
at its next search (one indexed read a search). Which rows may be returned — current
versions of READY documents — is decided per search from the document rows, not cached, so
a document re-added or deleted is never found through a stale matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from vancetope_brain.models.knowledge import Chunk, KnowledgeDocument, SearchHit
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import load_all
from vancetope_brain.store.vectors import (
    DocumentVectors,
    Matrix,
    MatrixCache,
    check_model,
    nearest,
    scan_rows,
    unit_rows,
    vector_hit,
    vector_query,
)

if TYPE_CHECKING:
    from vancetope_brain.store.postgres import PostgresBackend


_TABLES = """
CREATE TABLE IF NOT EXISTS knowledge_vectors (
    chunk_id BIGINT PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT NOT NULL,
    document_id TEXT NOT NULL, version INTEGER NOT NULL, model TEXT NOT NULL,
    dim INTEGER NOT NULL, vector BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_vectors_by_scope
    ON knowledge_vectors (tenant_id, project_id, model, dim, chunk_id);
CREATE INDEX IF NOT EXISTS knowledge_vectors_by_document
    ON knowledge_vectors (tenant_id, document_id, version, model);
CREATE TABLE IF NOT EXISTS knowledge_vector_generations (
    tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, generation BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, project_id)
)
"""

_BUMP = ("INSERT INTO knowledge_vector_generations AS g (tenant_id, project_id, generation) "
         "{select} ON CONFLICT (tenant_id, project_id) DO UPDATE SET "
         "generation = g.generation + 1")


def drop_vectors(conn: psycopg.Connection[Any], tenant_id: str, document_id: str) -> None:
    """Delete the document's vectors, bumping the generation of the project they were of."""
    conn.execute(_BUMP.format(select="SELECT DISTINCT tenant_id, project_id, 1 FROM "
                                     "knowledge_vectors WHERE tenant_id = %s AND "
                                     "document_id = %s"),
                 (tenant_id, document_id))
    conn.execute("DELETE FROM knowledge_vectors WHERE tenant_id = %s AND document_id = %s",
                 (tenant_id, document_id))



class PostgresDocumentVectors(PostgresAdapter, DocumentVectors):
    tables = _TABLES

    def __init__(self, db: PostgresBackend) -> None:
        super().__init__(db)
        self._cache = MatrixCache()

    def write_vectors(self, tenant_id: str, project_id: str, document_id: str, version: int,
                      model: str, vectors: np.ndarray) -> bool:
        check_model(model)
        with self.db.write() as conn:
            row = conn.execute("SELECT version, status, chunks FROM knowledge_documents WHERE "
                               "tenant_id = %s AND project_id = %s AND id = %s FOR UPDATE",
                               (tenant_id, project_id, document_id)).fetchone()
            if row is None or (row[0], row[1]) != (version, "READY"):
                return False
            matrix = unit_rows(vectors, row[2])
            ids = [chunk_id for (chunk_id,) in conn.execute(
                "SELECT id FROM knowledge_chunks WHERE tenant_id = %s AND document_id = %s AND "
                "version = %s ORDER BY ordinal", (tenant_id, document_id, version))]
            drop_vectors(conn, tenant_id, document_id)
            conn.cursor().executemany(
                "INSERT INTO knowledge_vectors (chunk_id, tenant_id, project_id, document_id, "
                "version, model, dim, vector) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [(chunk_id, tenant_id, project_id, document_id, version, model,
                  matrix.shape[1], vector.tobytes())
                 for chunk_id, vector in zip(ids, matrix, strict=True)])
            conn.execute(_BUMP.format(select="VALUES (%s, %s, 1)"), (tenant_id, project_id))
        return True

    def search_vectors(self, tenant_id: str, project_ids: Sequence[str], model: str,
                       vector: np.ndarray, limit: int) -> list[SearchHit]:
        query, projects, limit = vector_query(model, vector, project_ids, limit)
        if not projects or limit <= 0:
            return []
        ready = {(doc_id, version): name for doc_id, version, name in self.db.read(
            "SELECT id, version, name FROM knowledge_documents WHERE tenant_id = %s AND "
            "project_id = ANY(%s) AND status = 'READY'", (tenant_id, projects))}
        found: list[tuple[float, int, str]] = []
        for project in projects if ready else ():
            held = self._matrix(tenant_id, project, model, query.shape[0])
            found += [(score, int(held.ids[row]), ready[held.pairs[held.codes[row]]])
                      for row, score in nearest(held.matrix, query, held.keep(ready), limit)]
        found = sorted(found, key=lambda hit: (-hit[0], hit[1]))[:limit]
        if not found:
            return []
        full = {chunk_id: (text, doc) for chunk_id, text, doc in self.db.read(
            "SELECT id, text, doc FROM knowledge_chunks WHERE id = ANY(%s)",
            ([chunk_id for _, chunk_id, _ in found],))}
        return [vector_hit(Chunk.load({**full[chunk_id][1], "text": full[chunk_id][0]}),
                           name, score)
                for score, chunk_id, name in found if chunk_id in full]

    def without_vectors(self, tenant_id: str, project_id: str, model: str,
                        limit: int) -> list[KnowledgeDocument]:
        return load_all(KnowledgeDocument, self.db.read(
            "SELECT d.doc FROM knowledge_documents d WHERE d.tenant_id = %s AND "
            "d.project_id = %s AND d.status = 'READY' AND d.chunks > 0 AND NOT EXISTS "
            "(SELECT 1 FROM knowledge_vectors v WHERE v.tenant_id = d.tenant_id AND "
            "v.document_id = d.id AND v.version = d.version AND v.model = %s) "
            "ORDER BY d.name LIMIT %s", (tenant_id, project_id, model, max(0, limit))))

    def _matrix(self, tenant_id: str, project_id: str, model: str, dim: int) -> Matrix:
        """The project's vectors of ``model`` and ``dim``, from the cache while its
        generation is the stored one (read before the vectors, so a write in between only
        makes the next search read them again)."""
        rows = self.db.read("SELECT generation FROM knowledge_vector_generations WHERE "
                            "tenant_id = %s AND project_id = %s", (tenant_id, project_id))
        generation = int(rows[0][0]) if rows else 0
        return self._cache.get((tenant_id, project_id, model, str(dim)), generation,
                               lambda: Matrix.of(generation, self.db.read(
                                   "SELECT chunk_id, document_id, version, vector FROM "
                                   "knowledge_vectors WHERE tenant_id = %s AND project_id = %s AND "
                                   "model = %s AND dim = %s ORDER BY chunk_id LIMIT %s",
                                   (tenant_id, project_id, model, dim, scan_rows(dim))), dim))
