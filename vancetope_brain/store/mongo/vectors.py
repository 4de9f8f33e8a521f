"""MongoDB ``DocumentVectors``: in ``mongo/documents.py``'s collections ``knowledge_documents``
and ``knowledge_chunks``.

A chunk's unit vector is kept in its chunk document: ``vector`` (float32 bytes, BSON binary),
``vectorModel`` and ``vectorDim``; index (tenantId, projectId, vectorModel, vectorDim). So
replacing or deleting a document's chunks replaces or deletes their vectors with them.

Search is an exact scan: each searched project's chunks with vectors of the model and
dimension (at most ``scan_rows``, in index order) are read, those of a READY
document's current version kept, and multiplied by the query in numpy. Nothing is cached:
every search reads the project's vectors (about 1.5 KB a chunk at 384 dimensions), so its
cost grows with the project — fine for thousands of chunks, slow for a hundred thousand.
Atlas ``$vectorSearch`` (an approximate index on the server) is not used: it exists only on
Atlas, and nothing here can test it (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from bson import Binary
from pymongo import ASCENDING

from vancetope_brain.models.knowledge import Chunk, DocumentStatus, KnowledgeDocument, SearchHit
from vancetope_brain.store.mongo import MongoAdapter
from vancetope_brain.store.mongo._codec import from_bson, translated
from vancetope_brain.store.vectors import (
    DocumentVectors,
    check_model,
    nearest,
    scan_rows,
    unit_rows,
    vector_hit,
    vector_query,
)

if TYPE_CHECKING:
    from vancetope_brain.store.mongo import MongoBackend

VECTOR_INDEX = ([("tenantId", ASCENDING), ("projectId", ASCENDING), ("vectorModel", ASCENDING),
                 ("vectorDim", ASCENDING)], "by_vector_model")
"""The chunks' index a vector search reads by: (keys, name)."""
_READY = DocumentStatus.READY.value
_NOT_CHUNK = {"terms": 0, "length": 0, "vector": 0, "vectorModel": 0, "vectorDim": 0}


class MongoDocumentVectors(MongoAdapter, DocumentVectors):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._docs = db.database["knowledge_documents"]
        self._chunks = db.database["knowledge_chunks"]
        self._chunks.create_index(VECTOR_INDEX[0], name=VECTOR_INDEX[1])

    @translated
    def write_vectors(self, tenant_id: str, project_id: str, document_id: str, version: int,
                      model: str, vectors: np.ndarray) -> bool:
        check_model(model)
        fence = {"_id": document_id, "tenantId": tenant_id, "projectId": project_id,
                 "version": version, "status": _READY}
        raw = self._docs.find_one(fence, {"chunkCount": 1})
        if raw is None:
            return False
        matrix = unit_rows(vectors, raw["chunkCount"])
        for ordinal, row in enumerate(matrix):  # one update a chunk: mongomock lacks bulk_write
            self._chunks.update_one(
                {"_id": f"{document_id}:{version}:{ordinal}", "tenantId": tenant_id},
                {"$set": {"vector": Binary(row.tobytes()), "vectorModel": model,
                          "vectorDim": matrix.shape[1]}})
        return self._docs.find_one(fence, {"_id": 1}) is not None

    @translated
    def search_vectors(self, tenant_id: str, project_ids: Sequence[str], model: str,
                       vector: np.ndarray, limit: int) -> list[SearchHit]:
        query, projects, limit = vector_query(model, vector, project_ids, limit)
        if not projects or limit <= 0:
            return []
        ready = {raw["_id"]: raw for raw in self._docs.find(
            {"tenantId": tenant_id, "projectId": {"$in": projects}, "status": _READY},
            {"name": 1, "version": 1})}
        found: list[tuple[float, str, str]] = []
        for project in projects if ready else ():
            raws = [raw for raw in self._chunks.find(
                {"tenantId": tenant_id, "projectId": project, "vectorModel": model,
                 "vectorDim": query.shape[0]},
                {"vector": 1, "documentId": 1, "documentVersion": 1}).limit(scan_rows(query.shape[0]))
                if raw["documentId"] in ready and
                ready[raw["documentId"]]["version"] == raw["documentVersion"]]
            matrix = np.frombuffer(b"".join(bytes(raw["vector"]) for raw in raws),
                                   np.float32).reshape(-1, query.shape[0])
            found += [(score, raws[row]["_id"], ready[raws[row]["documentId"]]["name"])
                      for row, score in nearest(matrix, query, None, limit)]
        found = sorted(found, key=lambda hit: (-hit[0], hit[1]))[:limit]
        full = {raw["_id"]: raw for raw in self._chunks.find(
            {"_id": {"$in": [chunk_id for _, chunk_id, _ in found]}}, _NOT_CHUNK)}
        return [vector_hit(from_bson(Chunk, full[chunk_id]), name, score)
                for score, chunk_id, name in found if chunk_id in full]

    @translated
    def without_vectors(self, tenant_id: str, project_id: str, model: str,
                        limit: int) -> list[KnowledgeDocument]:
        missing: list[KnowledgeDocument] = []
        for raw in self._docs.find({"tenantId": tenant_id, "projectId": project_id,
                                    "status": _READY, "chunkCount": {"$gt": 0}}
                                   ).sort("name", ASCENDING):
            if len(missing) >= limit:
                break
            if self._chunks.find_one({"tenantId": tenant_id, "documentId": raw["_id"],
                                      "documentVersion": raw["version"],
                                      "vectorModel": model}, {"_id": 1}) is None:
                missing.append(from_bson(KnowledgeDocument, raw))
        return missing
