"""MongoDB ``DocumentStore``: collections ``knowledge_documents``, ``knowledge_chunks`` and
``knowledge_locks`` (the vectors, in the chunks:
``DocumentVectors``, ``mongo/vectors.py``).

A document is a ``KnowledgeDocument`` (``_id`` its id; (tenantId, projectId, name) unique)
with ``tokens``, the tokens of its current chunks, for the mean chunk length. A chunk is a
``Chunk`` (``_id`` ``{documentId}:{version}:{ordinal}``) with ``terms``, every token of its
text in order (``index_terms``: lowercased, Latin diacritics folded, repeats kept for the
term frequencies), and ``length``; the multikey index (tenantId, projectId, terms) finds
them. No ``$text``: mongomock lacks it, and this must rank the same on both.

Atomicity, without transactions:

- ``add_document`` holds the tenant's lease in ``knowledge_locks`` (one upserted document
  per tenant, taken by a conditional upsert, ``LOCK_LEASE`` long, released after) while
  it reads the usage and writes, so two adds of one tenant cannot pass a cap together.
  A holder that dies leaves it until the lease runs out; one that outlives it (a store
  stalled for ``LOCK_LEASE``) loses the exclusion.
- ``write_chunks``: check the version; delete any chunks of this version (an attempt that
  died); insert the new ones; flip the document to READY (``find_one_and_update`` on its
  version); delete older versions' chunks. If the flip finds the version moved on or the
  document gone, it deletes what it inserted and returns False.
- ``delete_document`` deletes the document, then its chunks.

A search keeps only chunks whose (document, version) is a READY document's current one, so
a crash between any two steps shows no stale or doubled hit (at worst a chunk left behind
that nothing finds, or a READY document written again showing fewer hits meanwhile).

Search: the READY documents of the projects give N (their chunks) and the mean length
(their ``tokens``); candidates are the chunks holding any query term (``terms: {$in: …}``),
kept when their (document, version) is a READY document's current one; their term
frequencies come from ``terms``; n per term is counted over the candidates — all the chunks
holding a query term. When more than ``MAX_CANDIDATES`` match, n is one count per term over
the same scope, and the candidates are taken again term by term, rarest first (as on SQLite),
up to ``MAX_CANDIDATES`` in all. The port's ranking
(``store/ranking.py``) scores them, the same function as on SQLite; the best ``limit`` are
then read whole.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from vancetope_brain.errors import StoreError
from vancetope_brain.models import new_id, utcnow
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
    index_terms,
    lexical_hit,
    search_terms,
)
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, naive_utc, to_bson, translated
from vancetope_brain.store.ranking import Candidate

LOCK_LEASE = timedelta(seconds=30)
"""How long a tenant's ``add_document`` lease lasts if its holder dies."""
LOCK_WAIT = 10.0
"""Seconds ``add_document`` waits for the tenant's lease before ``StoreError``."""

_READY = DocumentStatus.READY.value


class MongoDocuments(MongoAdapter, DocumentStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._docs = db.database["knowledge_documents"]
        self._chunks = db.database["knowledge_chunks"]
        self._locks = db.database["knowledge_locks"]
        self._docs.create_index([("tenantId", ASCENDING), ("projectId", ASCENDING),
                                 ("name", ASCENDING)], name="by_name", unique=True)
        self._docs.create_index([("status", ASCENDING), ("updatedAt", ASCENDING)],
                                name="by_status")
        self._chunks.create_index([("tenantId", ASCENDING), ("projectId", ASCENDING),
                                   ("terms", ASCENDING)], name="by_term")
        self._chunks.create_index([("tenantId", ASCENDING), ("documentId", ASCENDING),
                                   ("documentVersion", ASCENDING)], name="by_document")

    @translated
    def add_document(self, doc: KnowledgeDocument, *, max_project_documents: int,
                     max_project_bytes: int, max_tenant_bytes: int) -> KnowledgeDocument:
        with self._tenant_lease(doc.tenant_id):
            raw = self._docs.find_one({"tenantId": doc.tenant_id, "projectId": doc.project_id,
                                       "name": doc.name})
            stored = None if raw is None else from_bson(KnowledgeDocument, raw)
            new = admitted(doc, stored, project=self._usage(doc.tenant_id, doc.project_id),
                           tenant_bytes=self._usage(doc.tenant_id, None)[1],
                           max_project_documents=max_project_documents,
                           max_project_bytes=max_project_bytes, max_tenant_bytes=max_tenant_bytes)
            if new is None:
                assert stored is not None
                return stored
            if stored is None:
                self._docs.insert_one(to_bson(new, tokens=0))
            elif self._docs.replace_one({"_id": stored.id, "version": stored.version},
                                        to_bson(new, tokens=0)).matched_count == 0:
                raise StoreError(f"document {stored.id} changed while the tenant's lease "
                                 "was held")
        return new

    @translated
    def get_document(self, tenant_id: str, project_id: str,
                     document_id: str) -> KnowledgeDocument | None:
        raw = self._docs.find_one(_key(tenant_id, project_id, document_id))
        return None if raw is None else from_bson(KnowledgeDocument, raw)

    @translated
    def list_documents(self, tenant_id: str, project_id: str) -> list[KnowledgeDocument]:
        return [from_bson(KnowledgeDocument, raw) for raw in self._docs.find(
            {"tenantId": tenant_id, "projectId": project_id}).sort("name", ASCENDING)]

    @translated
    def mark_document(self, tenant_id: str, project_id: str, document_id: str, version: int,
                      status: DocumentStatus, *, error_code: str | None = None,
                      error: str | None = None) -> bool:
        if status is DocumentStatus.READY:
            raise ValueError("a document becomes READY with write_chunks")
        return self._docs.find_one_and_update(
            {**_key(tenant_id, project_id, document_id), "version": version},
            {"$set": {"status": status.value, "errorCode": error_code, "error": error,
                      "updatedAt": naive_utc(utcnow())}}) is not None

    @translated
    def write_chunks(self, tenant_id: str, project_id: str, document_id: str, version: int,
                     chunks: Sequence[Chunk], *, pages: int | None) -> bool:
        check_chunks(tenant_id, project_id, document_id, version, chunks)
        fence = {**_key(tenant_id, project_id, document_id), "version": version}
        if self._docs.find_one(fence, {"_id": 1}) is None:
            return False
        this_version = {"tenantId": tenant_id, "documentId": document_id,
                        "documentVersion": version}
        self._chunks.delete_many(this_version)
        stored = [_chunk_bson(chunk) for chunk in chunks]
        if stored:
            self._chunks.insert_many(stored)
        flipped = self._docs.find_one_and_update(fence, {"$set": {
            "status": _READY, "chunkCount": len(chunks), "pages": pages,
            "tokens": sum(raw["length"] for raw in stored), "errorCode": None, "error": None,
            "updatedAt": naive_utc(utcnow())}})
        if flipped is None:
            self._chunks.delete_many(this_version)
            return False
        self._chunks.delete_many({"tenantId": tenant_id, "documentId": document_id,
                                  "documentVersion": {"$lt": version}})
        return True

    @translated
    def delete_document(self, tenant_id: str, project_id: str, document_id: str) -> bool:
        if self._docs.delete_one(_key(tenant_id, project_id, document_id)).deleted_count == 0:
            return False
        self._chunks.delete_many({"tenantId": tenant_id, "documentId": document_id})
        return True

    @translated
    def search_chunks(self, tenant_id: str, project_ids: Sequence[str], query: str,
                      limit: int) -> list[SearchHit]:
        terms = search_terms(query)
        projects = sorted(set(project_ids))
        limit = min(limit, MAX_SEARCH_LIMIT)
        if not terms or not projects or limit <= 0:
            return []
        scope = {"tenantId": tenant_id, "projectId": {"$in": projects}}
        ready = {raw["_id"]: raw for raw in self._docs.find(
            {**scope, "status": _READY}, {"name": 1, "version": 1, "chunkCount": 1, "tokens": 1})}
        chunk_count = sum(raw["chunkCount"] for raw in ready.values())
        if chunk_count == 0:
            return []
        matched = self._matched(scope, {"$in": terms}, terms, MAX_CANDIDATES + 1)
        holding = None
        if len(matched) > MAX_CANDIDATES:  # the rarest term's chunks first, as on SQLite
            holding = {term: self._holding(scope, term, ready) for term in terms}
            taken: dict[Any, dict[str, Any]] = {}
            for term in sorted((t for t in terms if holding[t]), key=lambda t: (holding[t], t)):
                if len(taken) >= MAX_CANDIDATES:
                    break
                for raw in self._matched(scope, term, terms, MAX_CANDIDATES - len(taken)):
                    taken.setdefault(raw["_id"], raw)
            matched = list(taken.values())
        found = [Found(Candidate(Counter(raw["hits"]), raw["length"]),
                       ready[raw["documentId"]]["name"], raw["ordinal"], raw["documentId"],
                       raw["_id"])
                 for raw in matched if _current(raw, ready)]
        ranked = best(found, terms, chunks=chunk_count,
                      tokens=sum(raw.get("tokens", 0) for raw in ready.values()),
                      holding=holding, limit=limit)
        full = {raw["_id"]: raw for raw in self._chunks.find(
            {"_id": {"$in": [hit.key for hit, _ in ranked]}}, {"terms": 0, "length": 0})}
        return [lexical_hit(from_bson(Chunk, full[hit.key]), hit.document_name, score)
                for hit, score in ranked if hit.key in full]

    def _matched(self, scope: dict[str, Any], holds: Any, terms: list[str],
                 limit: int) -> list[dict[str, Any]]:
        """At most ``limit`` chunks in ``scope`` whose ``terms`` match ``holds``, in index
        order, each with its ``hits``: its tokens that are query ``terms``."""
        return list(self._chunks.aggregate([
            {"$match": {**scope, "terms": holds}},
            {"$project": {"documentId": 1, "documentVersion": 1, "ordinal": 1, "length": 1,
                          "hits": {"$filter": {"input": "$terms",
                                               "cond": {"$in": ["$$this", terms]}}}}},
            {"$limit": limit}]))

    def _holding(self, scope: dict[str, Any], term: str, ready: dict[str, Any]) -> int:
        """The current chunks of the READY documents in ``scope`` holding ``term``."""
        return sum(group["n"] for group in self._chunks.aggregate([
            {"$match": {**scope, "terms": term}},
            {"$group": {"_id": {"document": "$documentId", "version": "$documentVersion"},
                        "n": {"$sum": 1}}}])
            if _current({"documentId": group["_id"]["document"],
                         "documentVersion": group["_id"]["version"]}, ready))

    @translated
    def read_chunks(self, tenant_id: str, project_id: str, document_id: str, *,
                    section: str | None = None, page: int | None = None,
                    lines: tuple[int, int] | None = None,
                    limit: int = MAX_READ_CHUNKS) -> list[Chunk]:
        limit = min(limit, MAX_READ_CHUNKS)
        doc = self._docs.find_one({**_key(tenant_id, project_id, document_id), "status": _READY},
                                  {"version": 1})
        if doc is None or limit <= 0:  # (a limit of 0 is no limit to MongoDB)
            return []
        match: dict[str, Any] = {"tenantId": tenant_id, "documentId": document_id,
                                 "documentVersion": doc["version"]}
        match.update({field: value for field, value in (("section", section), ("page", page))
                      if value is not None})
        if lines is not None:
            match.update({"lineStart": {"$lte": lines[1]}, "lineEnd": {"$gte": lines[0]}})
        return [from_bson(Chunk, raw) for raw in self._chunks.find(
            match, {"terms": 0, "length": 0}).sort("ordinal", ASCENDING).limit(limit)]

    @translated
    def stalled_documents(self, before: datetime, limit: int) -> list[KnowledgeDocument]:
        return [from_bson(KnowledgeDocument, raw) for raw in self._docs.find(
            {"status": {"$in": [DocumentStatus.PENDING.value, DocumentStatus.INDEXING.value]},
             "updatedAt": {"$lt": naive_utc(before)}}).sort("updatedAt", ASCENDING).limit(limit)]

    @translated
    def usage(self, tenant_id: str, project_id: str | None = None) -> tuple[int, int]:
        return self._usage(tenant_id, project_id)

    def _usage(self, tenant_id: str, project_id: str | None) -> tuple[int, int]:
        match: dict[str, Any] = {"tenantId": tenant_id}
        if project_id is not None:
            match["projectId"] = project_id
        totals = list(self._docs.aggregate([
            {"$match": match},
            {"$group": {"_id": None, "documents": {"$sum": 1}, "bytes": {"$sum": "$size"}}}]))
        return (totals[0]["documents"], totals[0]["bytes"]) if totals else (0, 0)

    @contextmanager
    def _tenant_lease(self, tenant_id: str) -> Iterator[None]:
        """Hold the tenant's ``add_document`` lease (waiting up to ``LOCK_WAIT``)."""
        owner, deadline, delay = new_id("lease"), time.monotonic() + LOCK_WAIT, 0.001
        while True:
            now = naive_utc(utcnow())
            try:
                # Free or expired: taken; held: the upsert collides on _id.
                self._locks.find_one_and_update(
                    {"_id": tenant_id, "until": {"$lt": now}},
                    {"$set": {"until": now + LOCK_LEASE, "owner": owner}}, upsert=True)
                break
            except DuplicateKeyError:
                if time.monotonic() > deadline:
                    raise StoreError(f"tenant {tenant_id}'s knowledge lease stayed held for "
                                     f"{LOCK_WAIT:.0f} s") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            self._locks.delete_one({"_id": tenant_id, "owner": owner})


def _current(raw: dict[str, Any], ready: dict[str, Any]) -> bool:
    """Whether the chunk ``raw`` is of a READY document's current version."""
    document = ready.get(raw["documentId"])
    return document is not None and document["version"] == raw["documentVersion"]


def _key(tenant_id: str, project_id: str, document_id: str) -> dict[str, str]:
    return {"_id": document_id, "tenantId": tenant_id, "projectId": project_id}


def _chunk_bson(chunk: Chunk) -> dict[str, Any]:
    raw = chunk.dump()
    terms = index_terms(chunk.text)
    raw.update({"_id": chunk.id, "terms": terms, "length": len(terms)})
    return raw
