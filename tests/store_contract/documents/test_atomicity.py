"""Concurrent adds cannot pass a cap together; what a crash in the middle of a write leaves
is never found; and the tenant's add lock held by another writer is waited for, then
refused within its bound.

Each property is tested on every backend in the shape it has there: SQLite and PostgreSQL
write each call in one transaction (a failure inside it leaves nothing; ``add_document``
waits for SQLite's write lock or PostgreSQL's per-tenant advisory lock), MongoDB in
single-document steps (a crash between them leaves chunks a search must pass over;
``add_document`` holds a per-tenant lease in ``knowledge_locks``)."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.store_contract.conftest import Storage
from vancetope_brain.errors import ProjectKnowledgeFull, StoreError, TenantKnowledgeFull
from vancetope_brain.models import utcnow
from vancetope_brain.models.knowledge import Chunk, KnowledgeDocument
from vancetope_brain.store import Backend, DocumentStore
from vancetope_brain.store import postgres as postgres_store
from vancetope_brain.store.documents import admitted, index_terms
from vancetope_brain.store.mongo import MongoBackend
from vancetope_brain.store.mongo import documents as mongo_documents
from vancetope_brain.store.mongo._codec import naive_utc
from vancetope_brain.store.postgres import PostgresBackend
from vancetope_brain.store.postgres import documents as postgres_documents
from vancetope_brain.store.sqlite import SqliteBackend
from vancetope_brain.store.sqlite import _db as sqlite_db
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


class Crash(Exception):
    """A failure injected inside a write (the process dies there, or the store fails)."""


def _mongo(backend: Backend) -> MongoBackend:
    assert isinstance(backend, MongoBackend)
    return backend


def _raw(chunk: Chunk) -> dict[str, object]:
    """A chunk as the MongoDB adapter stores it."""
    terms = index_terms(chunk.text)
    return {**chunk.dump(), "_id": chunk.id, "terms": terms, "length": len(terms)}


def _sql_adapter(storage: Storage) -> Any:
    """The documents adapter module of a SQL backend (its helpers are where a failure is
    injected)."""
    return {"sqlite": sqlite_documents, "postgres": postgres_documents}[storage.name]


def _crashing(monkeypatch: pytest.MonkeyPatch, adapter: Any, name: str, *, after: bool,
              seen: list[list[str]]) -> None:
    """Make the adapter's helper ``name`` (whose first argument is the write's connection)
    raise ``Crash``, before doing its work or after it; ``seen`` gets the chunk texts the
    transaction held at that moment."""
    real = getattr(adapter, name)

    def crash(conn: Any, *args: Any, **kwargs: Any) -> Any:
        if after:
            real(conn, *args, **kwargs)
        seen.append([row[0] for row in conn.execute(
            "SELECT text FROM knowledge_chunks ORDER BY text").fetchall()])
        raise Crash(name)

    monkeypatch.setattr(adapter, name, crash)


def _stored_chunks(backend: Backend) -> list[str]:
    """The texts of every chunk row a SQL store holds (of any document and version)."""
    assert isinstance(backend, PostgresBackend | SqliteBackend)
    return [row[0] for row in backend.read("SELECT text FROM knowledge_chunks ORDER BY text",
                                           ())]


def test_chunks_a_crash_left_behind_are_never_found(
        storage: Storage, backend: Backend, documents: DocumentStore,
        monkeypatch: pytest.MonkeyPatch) -> None:
    v1 = indexed(documents, "orca pod", content="one")
    v2 = documents.add_document(document(content="two"), **ROOMY)
    assert documents.write_chunks("ten_1", "prj_1", v2.id, 2, chunks(v2, "orca alone"),
                                  pages=None)
    ready = documents.get_document("ten_1", "prj_1", v2.id)
    if storage.name.startswith("mongo"):
        # MongoDB writes in steps (mongo/documents.py); what a crash between two leaves:
        raw_chunks = _mongo(backend).database["knowledge_chunks"]
        # Died after the flip, before deleting the older version's chunks:
        raw_chunks.insert_one(_raw(chunks(v1, "orca pod")[0]))
        # Died after inserting a newer version's chunks, before its flip:
        raw_chunks.insert_one(_raw(chunks(v2.model_copy(update={"version": 3}),
                                          "orca ghost")[0]))
        # Died after deleting a document, before deleting its chunks:
        gone = indexed(documents, "orca deleted", name="gone.md")
        assert documents.delete_document("ten_1", "prj_1", gone.id)
        raw_chunks.insert_one(_raw(chunks(gone, "orca deleted")[0]))
    else:
        # SQLite and PostgreSQL write each call in one transaction: a failure anywhere in it
        # (here injected between its statements) leaves nothing of it, and the version
        # written before stays searchable as it was.
        adapter = _sql_adapter(storage)
        seen: list[list[str]] = []
        # The READY document written again: failing after its new chunks are in and it is
        # flipped, or after the chunks are in, before the flip.
        for text, after in (("orca pod", True), ("orca ghost", False)):
            with monkeypatch.context() as patch:
                _crashing(patch, adapter, "_put", after=after, seen=seen)
                with pytest.raises(Crash):
                    documents.write_chunks("ten_1", "prj_1", v2.id, 2, chunks(v2, text),
                                           pages=None)
            assert seen.pop() == [text]  # the old chunk was gone, the new one in
            assert documents.get_document("ten_1", "prj_1", v2.id) == ready
            assert _stored_chunks(backend) == ["orca alone"]
            assert [hit.chunk.text for hit in documents.search_chunks(
                "ten_1", ["prj_1"], "orca pod ghost", 10)] == ["orca alone"]
        # A delete failing after the chunks are deleted, before the document is: the
        # document and its chunks are all still there (and found); deleted again, gone.
        gone = indexed(documents, "orca deleted", name="gone.md")
        with monkeypatch.context() as patch:
            _crashing(patch, adapter, "_drop_chunks", after=True, seen=seen)
            with pytest.raises(Crash):
                documents.delete_document("ten_1", "prj_1", gone.id)
        assert seen.pop() == ["orca alone"]
        assert documents.get_document("ten_1", "prj_1", gone.id) == gone
        assert [hit.chunk.text for hit in documents.search_chunks(
            "ten_1", ["prj_1"], "deleted", 10)] == ["orca deleted"]
        assert documents.delete_document("ten_1", "prj_1", gone.id)
        assert _stored_chunks(backend) == ["orca alone"]
    assert documents.get_document("ten_1", "prj_1", v2.id) == ready
    assert [hit.chunk.text for hit in documents.search_chunks(
        "ten_1", ["prj_1"], "orca pod ghost deleted", 10)] == ["orca alone"]


def _hold_sql_lock(storage: Storage, backend: Backend, tenant_id: str) -> Any:
    """Another writer's open transaction holding what ``add_document`` of ``tenant_id``
    waits for: SQLite's write lock (one per file: every tenant's), PostgreSQL's per-tenant
    advisory lock. Ended (as by the holder's death) by closing it."""
    if storage.name == "sqlite":
        assert isinstance(backend, SqliteBackend)
        holder = sqlite3.connect(backend.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        return holder
    assert isinstance(backend, PostgresBackend)
    pg_holder = psycopg.connect(backend.pool.conninfo)
    pg_holder.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                      (postgres_documents._LOCK_CLASS, tenant_id))
    return pg_holder


def test_a_held_add_lock_is_waited_for_then_refused(
        storage: Storage, backend: Backend, documents: DocumentStore,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if storage.name.startswith("mongo"):
        # MongoDB: a lease document per tenant in knowledge_locks, waited for up to
        # LOCK_WAIT, taken over once it has run out (its holder died).
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
        return
    # SQLite waits for the write lock up to BUSY_DEADLINE (10 s), PostgreSQL for the tenant's
    # advisory lock up to its statement timeout (STATEMENT_TIMEOUT_MS, 30 s); then the add
    # fails with StoreError, nothing written. Both bounds shortened here to be seen.
    holder = _hold_sql_lock(storage, backend, "ten_1")
    try:
        with monkeypatch.context() as patch:
            if storage.name == "sqlite":
                patch.setattr(sqlite_db, "BUSY_DEADLINE", 0.2)
                short, refusal = documents, "locked"
            else:  # the bound a backend reads when it is opened
                patch.setattr(postgres_store, "STATEMENT_TIMEOUT_MS", 200)
                short, refusal = storage.open_backend().port(DocumentStore), "statement timeout"
            began = time.monotonic()
            with pytest.raises(StoreError, match=refusal):
                short.add_document(document(), **ROOMY)
            assert time.monotonic() - began >= 0.15  # waited for it, then refused
            if storage.name == "sqlite":
                # One write lock for the file: another tenant's add waits for it as well.
                with pytest.raises(StoreError, match=refusal):
                    short.add_document(document(tenant="ten_2"), **ROOMY)
                assert documents.list_documents("ten_2", "prj_1") == []
            else:
                # The advisory lock is the tenant's: another tenant's add is free.
                short.add_document(document(tenant="ten_2"), **ROOMY)
        assert documents.list_documents("ten_1", "prj_1") == []
        # Held while an add (with the real bound) waits: it goes on once the holder ends.
        added: list[KnowledgeDocument] = []
        adding = threading.Thread(
            target=lambda: added.append(documents.add_document(document(), **ROOMY)))
        adding.start()
        time.sleep(0.3)
        assert added == [] and adding.is_alive()
    finally:
        holder.close()  # its transaction ends: rolled back, the lock released
    adding.join(timeout=30)
    assert documents.list_documents("ten_1", "prj_1") == added != []
