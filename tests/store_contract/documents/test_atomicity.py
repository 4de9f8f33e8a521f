"""Concurrent adds cannot pass a cap together; on MongoDB, what a crash between the steps of
a write leaves is never found, and the tenant's add lease is waited for or taken over once
it has run out."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from tests.store_contract.conftest import BACKENDS
from vancetope_brain.errors import ProjectKnowledgeFull, StoreError, TenantKnowledgeFull
from vancetope_brain.models import utcnow
from vancetope_brain.models.knowledge import Chunk, KnowledgeDocument
from vancetope_brain.store import Backend, DocumentStore
from vancetope_brain.store.documents import admitted, index_terms
from vancetope_brain.store.mongo import MongoBackend
from vancetope_brain.store.mongo import documents as mongo_documents
from vancetope_brain.store.mongo._codec import naive_utc
from vancetope_brain.store.postgres import documents as postgres_documents
from vancetope_brain.store.sqlite import documents as sqlite_documents

from ._build import ROOMY, chunks, document, indexed


def test_concurrent_adds_cannot_pass_the_project_cap_together(
        documents: DocumentStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow_admitted(*args: Any, **kwargs: Any) -> KnowledgeDocument | None:
        time.sleep(0.005)  # widen the window between reading the usage and writing
        return admitted(*args, **kwargs)

    for adapter in (mongo_documents, postgres_documents, sqlite_documents):
        monkeypatch.setattr(adapter, "admitted", slow_admitted)
    caps = {**ROOMY, "max_project_documents": 3}
    refused: list[Exception] = []
    start = threading.Barrier(8)

    def add(n: int) -> None:
        start.wait()
        try:
            documents.add_document(document(f"doc{n}.md"), **caps)
        except ProjectKnowledgeFull as e:
            refused.append(e)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(documents.list_documents("ten_1", "prj_1")) == 3
    assert len(refused) == 5


def test_concurrent_adds_to_two_projects_cannot_pass_the_tenant_cap_together(
        documents: DocumentStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow_admitted(*args: Any, **kwargs: Any) -> KnowledgeDocument | None:
        time.sleep(0.005)
        return admitted(*args, **kwargs)

    for adapter in (mongo_documents, postgres_documents, sqlite_documents):
        monkeypatch.setattr(adapter, "admitted", slow_admitted)
    caps = {**ROOMY, "max_tenant_bytes": 300}
    refused: list[Exception] = []
    start = threading.Barrier(6)

    def add(n: int) -> None:
        start.wait()
        try:
            documents.add_document(document(f"doc{n}.md", "x" * 100, project=f"prj_{n % 2}"),
                                   **caps)
        except TenantKnowledgeFull as e:
            refused.append(e)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert documents.usage("ten_1") == (3, 300)
    assert len(refused) == 3


def test_concurrent_indexing_of_one_project_counts_as_one_after_another(
        documents: DocumentStore) -> None:
    """Documents of one project sharing their words, their chunks written again and again at
    once: no writer fails or waits for ever, and the scores after are those of the same
    chunks written one by one (every change of the term statistics counted once)."""
    words = [f"w{n}" for n in range(30)]

    def texts(n: int, round_: int) -> list[str]:
        turned = words[n + round_:] + words[:n + round_]
        return [" ".join(turned[:12]), " ".join(reversed(turned[5:25])), f"d{n} r{round_}"]

    docs = [indexed(documents, *texts(n, 0), name=f"d{n}.md") for n in range(6)]
    start = threading.Barrier(len(docs))
    failed: list[Exception] = []

    def rewrite(n: int, doc: KnowledgeDocument) -> None:
        start.wait()
        try:
            for round_ in range(1, 4):
                assert documents.write_chunks("ten_1", "prj_1", doc.id, doc.version,
                                              chunks(doc, *texts(n, round_)), pages=None)
        except Exception as e:  # noqa: BLE001 - reported below
            failed.append(e)

    threads = [threading.Thread(target=rewrite, args=(n, doc)) for n, doc in enumerate(docs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failed == []
    for n in range(len(docs)):
        indexed(documents, *texts(n, 3), name=f"d{n}.md", project="prj_2")
    for query in ("w0 w7", "w3 d2 r3", "w12 w29 r1", "d5 w20"):
        found = [[(hit.citation.document_name, hit.chunk.ordinal, hit.score)
                  for hit in documents.search_chunks("ten_1", [project], query, 20)]
                 for project in ("prj_1", "prj_2")]
        assert found[0] == found[1] and found[0]


# SQLite writes each call in one transaction, with no step between: these are MongoDB's.
ON_MONGO = pytest.mark.parametrize("storage", [b for b in BACKENDS if b.startswith("mongo")],
                                   indirect=True)


def _mongo(backend: Backend) -> MongoBackend:
    assert isinstance(backend, MongoBackend)
    return backend


def _raw(chunk: Chunk) -> dict[str, object]:
    """A chunk as the MongoDB adapter stores it."""
    terms = index_terms(chunk.text)
    return {**chunk.dump(), "_id": chunk.id, "terms": terms, "length": len(terms)}


@ON_MONGO
def test_mongo_chunks_a_crash_left_behind_are_never_found(
        backend: Backend, documents: DocumentStore) -> None:
    raw_chunks = _mongo(backend).database["knowledge_chunks"]
    v1 = indexed(documents, "orca pod", content="one")
    v2 = documents.add_document(document(content="two"), **ROOMY)
    assert documents.write_chunks("ten_1", "prj_1", v2.id, 2, chunks(v2, "orca alone"),
                                  pages=None)
    # Died after the flip, before deleting the older version's chunks:
    raw_chunks.insert_one(_raw(chunks(v1, "orca pod")[0]))
    # Died after inserting a newer version's chunks, before its flip:
    raw_chunks.insert_one(_raw(chunks(v2.model_copy(update={"version": 3}), "orca ghost")[0]))
    # Died after deleting a document, before deleting its chunks:
    gone = indexed(documents, "orca deleted", name="gone.md")
    assert documents.delete_document("ten_1", "prj_1", gone.id)
    raw_chunks.insert_one(_raw(chunks(gone, "orca deleted")[0]))
    assert [hit.chunk.text for hit in documents.search_chunks(
        "ten_1", ["prj_1"], "orca pod ghost deleted", 10)] == ["orca alone"]


@ON_MONGO
def test_mongo_a_held_add_lease_is_waited_for_then_refused(
        backend: Backend, documents: DocumentStore, monkeypatch: pytest.MonkeyPatch) -> None:
    locks = _mongo(backend).database["knowledge_locks"]
    monkeypatch.setattr(mongo_documents, "LOCK_WAIT", 0.05)
    locks.insert_one({"_id": "ten_1", "owner": "lease_other",
                      "until": naive_utc(utcnow() + timedelta(minutes=1))})
    with pytest.raises(StoreError, match="lease"):
        documents.add_document(document(), **ROOMY)
    assert documents.list_documents("ten_1", "prj_1") == []
    documents.add_document(document(tenant="ten_2"), **ROOMY)  # another tenant's is free
    locks.update_one({"_id": "ten_1"},
                     {"$set": {"until": naive_utc(utcnow() - timedelta(seconds=1))}})
    stored = documents.add_document(document(), **ROOMY)  # a dead holder's lease ran out
    assert documents.list_documents("ten_1", "prj_1") == [stored]
    assert locks.count_documents({}) == 0
