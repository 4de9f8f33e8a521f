"""SQLite ``DocumentVectors``: tables ``knowledge_vectors`` and
``knowledge_vector_generations``, next to ``sqlite/documents.py``'s tables, which it reads.

A vector row is one chunk's (``chunk_id`` = ``knowledge_chunks.id``) unit vector as a
float32 BLOB, with its tenant, project, document, version, model and dimension. No
``sqlite-vec``: loading an extension needs ``enable_load_extension``, which not every
Python's ``sqlite3`` has (docs/architecture.md); the scan is exact, in numpy.

Search reads each searched project's vectors of the model and dimension (at most
``scan_rows``) into one matrix, kept in a per-process cache of at most
``MAX_CACHED_BYTES`` (least recently used out first), and multiplies it by the query. A
cached matrix is valid while the project's row in ``knowledge_vector_generations`` says the
generation it was read at: every write that adds or removes vectors of a project (in
``write_vectors``, and ``drop_vectors``, which ``SqliteDocuments`` calls when ``write_chunks``
or ``delete_document`` drop a document's chunks) bumps it in the same transaction, so every
process sharing the file reads a changed project again at its next search (one indexed read
a search). Which rows may be
returned — current versions of READY documents — is decided per search from the document
rows, not cached, so a document re-added or deleted is never found through a stale matrix.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from vancetope_brain.models.knowledge import Chunk, KnowledgeDocument, SearchHit
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all, marks
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
    from vancetope_brain.store.sqlite import SqliteBackend


VECTOR_TABLES = """
CREATE TABLE IF NOT EXISTS knowledge_vectors (
    chunk_id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT NOT NULL,
    document_id TEXT NOT NULL, version INTEGER NOT NULL, model TEXT NOT NULL,
    dim INTEGER NOT NULL, vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_vectors_by_scope
    ON knowledge_vectors (tenant_id, project_id, model, dim);
CREATE INDEX IF NOT EXISTS knowledge_vectors_by_document
    ON knowledge_vectors (tenant_id, document_id, version, model);
CREATE TABLE IF NOT EXISTS knowledge_vector_generations (
    tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, generation INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, project_id)
)
"""

_BUMP = ("INSERT INTO knowledge_vector_generations (tenant_id, project_id, generation) "
         "{select} ON CONFLICT (tenant_id, project_id) DO UPDATE SET "
         "generation = generation + 1")


def drop_vectors(conn: sqlite3.Connection, tenant_id: str, document_id: str) -> None:
    """Delete the document's vectors, bumping the generation of the project they were of."""
    conn.execute(_BUMP.format(select="SELECT DISTINCT tenant_id, project_id, 1 FROM "
                                     "knowledge_vectors WHERE tenant_id = ? AND document_id = ?"),
                 (tenant_id, document_id))
    conn.execute("DELETE FROM knowledge_vectors WHERE tenant_id = ? AND document_id = ?",
                 (tenant_id, document_id))



class SqliteDocumentVectors(SqliteAdapter, DocumentVectors):
    tables = VECTOR_TABLES

    def __init__(self, db: SqliteBackend) -> None:
        super().__init__(db)
        self._cache = MatrixCache()

    def write_vectors(self, tenant_id: str, project_id: str, document_id: str, version: int,
                      model: str, vectors: np.ndarray) -> bool:
        check_model(model)
        with self.db.write() as conn:
            row = conn.execute("SELECT version, status, chunks FROM knowledge_documents WHERE "
                               "tenant_id = ? AND project_id = ? AND id = ?",
                               (tenant_id, project_id, document_id)).fetchone()
            if row is None or (row[0], row[1]) != (version, "READY"):
                return False
            matrix = unit_rows(vectors, row[2])
            ids = [chunk_id for (chunk_id,) in conn.execute(
                "SELECT id FROM knowledge_chunks WHERE tenant_id = ? AND document_id = ? AND "
                "version = ? ORDER BY ordinal", (tenant_id, document_id, version))]
            drop_vectors(conn, tenant_id, document_id)
            conn.executemany(
                "INSERT INTO knowledge_vectors (chunk_id, tenant_id, project_id, document_id, "
                "version, model, dim, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(chunk_id, tenant_id, project_id, document_id, version, model,
                  matrix.shape[1], vector.tobytes()) for chunk_id, vector in zip(ids, matrix,
                                                                                   strict=True)])
            conn.execute(_BUMP.format(select="VALUES (?, ?, 1)"), (tenant_id, project_id))
        return True

    def search_vectors(self, tenant_id: str, project_ids: Sequence[str], model: str,
                       vector: np.ndarray, limit: int) -> list[SearchHit]:
        query, projects, limit = vector_query(model, vector, project_ids, limit)
        if not projects or limit <= 0:
            return []
        ready = {(doc_id, version): name for doc_id, version, name in self.db.read(
            "SELECT id, version, name FROM knowledge_documents WHERE tenant_id = ? AND "
            f"project_id IN {marks(projects)} AND status = 'READY'",
            (tenant_id, *projects))}
        found: list[tuple[float, int, str]] = []
        for project in projects if ready else ():
            held = self._matrix(tenant_id, project, model, query.shape[0])
            found += [(score, int(held.ids[row]), ready[held.pairs[held.codes[row]]])
                      for row, score in nearest(held.matrix, query, held.keep(ready), limit)]
        found = sorted(found, key=lambda hit: (-hit[0], hit[1]))[:limit]
        if not found:
            return []
        full = {chunk_id: (text, doc) for chunk_id, text, doc in self.db.read(
            f"SELECT id, text, doc FROM knowledge_chunks WHERE id IN "
            f"{marks(found)}", tuple(chunk_id for _, chunk_id, _ in found))}
        return [vector_hit(Chunk.load({**json.loads(full[chunk_id][1]),
                                       "text": full[chunk_id][0]}), name, score)
                for score, chunk_id, name in found if chunk_id in full]

    def without_vectors(self, tenant_id: str, project_id: str, model: str,
                        limit: int) -> list[KnowledgeDocument]:
        return load_all(KnowledgeDocument, self.db.read(
            "SELECT d.doc FROM knowledge_documents d WHERE d.tenant_id = ? AND d.project_id = ? "
            "AND d.status = 'READY' AND d.chunks > 0 AND NOT EXISTS (SELECT 1 FROM "
            "knowledge_vectors v WHERE v.tenant_id = d.tenant_id AND v.document_id = d.id AND "
            "v.version = d.version AND v.model = ?) ORDER BY d.name LIMIT ?",
            (tenant_id, project_id, model, limit)))

    def _matrix(self, tenant_id: str, project_id: str, model: str, dim: int) -> Matrix:
        """The project's vectors of ``model`` and ``dim``, from the cache while its
        generation is the stored one (read before the vectors, so a write in between only
        makes the next search read them again)."""
        rows = self.db.read("SELECT generation FROM knowledge_vector_generations WHERE "
                            "tenant_id = ? AND project_id = ?", (tenant_id, project_id))
        generation = int(rows[0][0]) if rows else 0
        return self._cache.get((tenant_id, project_id, model, str(dim)), generation,
                               lambda: Matrix.of(generation, self.db.read(
                                   "SELECT chunk_id, document_id, version, vector FROM "
                                   "knowledge_vectors WHERE tenant_id = ? AND project_id = ? AND "
                                   "model = ? AND dim = ? ORDER BY chunk_id LIMIT ?",
                                   (tenant_id, project_id, model, dim, scan_rows(dim))), dim))
