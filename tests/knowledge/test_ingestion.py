"""``DocumentService`` and ``DocumentIndexer`` on a real SQLite store and an in-memory Redis,
the ingestion job run by hand: what a redelivered, stale or hostile job does, what a failed
queue leaves, the caps' codes and the pushes into the user feed."""

from __future__ import annotations

import time
from datetime import timedelta

import fakeredis
import pytest

from tests.knowledge.pdfs import bomb_pdf
from vancetope_brain import keys
from vancetope_brain.errors import (
    NotFound,
    ProjectKnowledgeFull,
    TenantKnowledgeFull,
    UnsupportedDocument,
)
from vancetope_brain.events import EventBus
from vancetope_brain.identity import Principal
from vancetope_brain.models import utcnow
from vancetope_brain.models.knowledge import DocumentStatus as S
from vancetope_brain.services import (
    DocumentFiles,
    DocumentIndexer,
    DocumentPushes,
    DocumentService,
    IndexJob,
)
from vancetope_brain.services.documents import GIVE_UP_SECONDS, STALL_SECONDS
from vancetope_brain.store import DocumentStore, DocumentVectors, IdentityStore

ADA = Principal("acme", "ada")


class Parts:
    def __init__(self, store, root, *, fail_enqueue: bool = False, **caps: int) -> None:
        self.jobs: list[IndexJob] = []
        self.events = EventBus(fakeredis.FakeRedis(), max_len=100, ttl=60)
        self.files = DocumentFiles(root)
        self.documents = store.port(DocumentStore)
        pushes = DocumentPushes(self.events)

        def enqueue(job: dict) -> None:
            # A worker's INDEXING push can only follow the PENDING one.
            assert self.pushed()[-1][1:] == ("PENDING", job["version"])
            if fail_enqueue:
                raise ConnectionError("the broker is down")
            self.jobs.append(IndexJob.model_validate(job))

        self.service = DocumentService(documents=self.documents,
                                       identity=store.port(IdentityStore), files=self.files,
                                       pushes=pushes, enqueue=enqueue, **caps)
        self.indexer = DocumentIndexer(documents=self.documents,
                                       vectors=store.port(DocumentVectors), files=self.files,
                                       pushes=pushes, seconds=1.0)

    def pushed(self) -> list[tuple[str, str, int]]:
        return [(e.type.value, e.data["document"]["status"], e.data["document"]["version"])
                for e in self.events.read(keys.user_feed("acme", "ada"), 0)]


@pytest.fixture
def parts(acme_store, tmp_path):
    return Parts(acme_store, tmp_path / "attachments")


def test_a_job_indexes_once_and_a_redelivery_does_nothing(parts):
    doc, changed = parts.service.add(ADA, "p1", "a.md", b"# A\n\nalpha beta\n")
    assert changed and doc.status is S.PENDING and len(parts.jobs) == 1
    assert parts.indexer.index(parts.jobs[0]) is S.READY
    assert parts.indexer.index(parts.jobs[0]) is None  # redelivered: moot
    stored = parts.documents.get_document("acme", "p1", doc.id)
    assert stored is not None and stored.status is S.READY and stored.chunk_count == 1
    assert parts.pushed() == [("document-updated", "PENDING", 1),
                              ("document-updated", "INDEXING", 1),
                              ("document-updated", "READY", 1)]


def test_a_job_of_a_replaced_version_writes_nothing(parts):
    doc, _ = parts.service.add(ADA, "p1", "a.txt", b"old words\n")
    parts.service.add(ADA, "p1", "a.txt", b"new words\n")
    old_job, new_job = parts.jobs
    assert parts.indexer.index(old_job) is None
    assert parts.indexer.index(new_job) is S.READY
    hits = parts.documents.search_chunks("acme", ["p1"], "words", 10)
    assert [h.chunk.text for h in hits] == ["new words"]
    assert parts.files.versions("acme", doc.id) == [2]


def test_a_job_of_a_deleted_document_writes_nothing(parts):
    doc, _ = parts.service.add(ADA, "p1", "a.txt", b"some words\n")
    parts.service.delete(ADA, "p1", doc.id)
    assert parts.indexer.index(parts.jobs[0]) is None
    assert parts.documents.search_chunks("acme", ["p1"], "words", 10) == []
    assert parts.pushed()[-1] == ("document-deleted", "PENDING", 1)
    with pytest.raises(NotFound):
        parts.service.delete(ADA, "p1", doc.id)


def test_a_hostile_pdf_fails_within_its_bound_and_stores_nothing(parts):
    doc, _ = parts.service.add(ADA, "p1", "bomb.pdf", bomb_pdf(20_000_000))
    started = time.monotonic()
    assert parts.indexer.index(parts.jobs[0]) is S.FAILED
    assert time.monotonic() - started < 10
    stored = parts.documents.get_document("acme", "p1", doc.id)
    assert stored is not None and stored.error_code == "unreadable_document"
    assert stored.chunk_count == 0 and "1 s" in (stored.error or "")
    assert parts.documents.search_chunks("acme", ["p1"], "A", 10) == []
    assert parts.indexer.index(parts.jobs[0]) is None  # FAILED is final for this version


def test_lost_bytes_fail_the_document_with_a_reason(parts):
    doc, _ = parts.service.add(ADA, "p1", "a.txt", b"words\n")
    parts.files.remove("acme", doc.id)
    assert parts.indexer.index(parts.jobs[0]) is S.FAILED
    stored = parts.documents.get_document("acme", "p1", doc.id)
    assert stored is not None and "add the file again" in (stored.error or "")


def test_a_failed_queue_marks_the_new_version_failed(acme_store, tmp_path):
    parts = Parts(acme_store, tmp_path / "a", fail_enqueue=True)
    with pytest.raises(ConnectionError):
        parts.service.add(ADA, "p1", "a.txt", b"words\n")
    [doc] = parts.documents.list_documents("acme", "p1")
    assert doc.status is S.FAILED and doc.error_code == "runtime_failure"
    assert parts.pushed() == [("document-updated", "PENDING", 1),
                              ("document-updated", "FAILED", 1)]
    # Adding the same bytes again is a change (only READY ones are kept as they are).
    ok = Parts(acme_store, tmp_path / "a")
    again, changed = ok.service.add(ADA, "p1", "a.txt", b"words\n")
    assert changed and again.version == 2


def test_the_caps_refuse_with_their_codes_and_store_nothing(acme_store, tmp_path):
    parts = Parts(acme_store, tmp_path / "a", max_project_documents=1, max_project_bytes=100,
                  max_tenant_bytes=150)
    parts.service.add(ADA, "p1", "one.txt", b"x" * 60)
    with pytest.raises(ProjectKnowledgeFull):
        parts.service.add(ADA, "p1", "two.txt", b"y")
    with pytest.raises(ProjectKnowledgeFull):
        parts.service.add(ADA, "p1", "one.txt", b"x" * 101)
    with pytest.raises(UnsupportedDocument):
        parts.service.add(ADA, "p1", "one.exe", b"MZ")
    assert [d.name for d in parts.documents.list_documents("acme", "p1")] == ["one.txt"]
    assert len(parts.jobs) == 1
    with pytest.raises(NotFound):
        parts.service.add(ADA, "nope", "one.txt", b"x")
    tenant = Parts(acme_store, tmp_path / "b", max_tenant_bytes=50)
    with pytest.raises(TenantKnowledgeFull):
        tenant.service.add(ADA, "p1", "three.txt", b"z")


def test_the_housekeeping_queues_a_lost_job_again_and_gives_up_after_an_hour(parts):
    doc, _ = parts.service.add(ADA, "p1", "a.md", b"# A\n\nalpha beta\n")
    parts.jobs.clear()  # the job is lost (a broker restart)
    queued: list[dict] = []
    now = utcnow()
    assert parts.indexer.resume_stalled(now, queued.append) == 0  # not stalled yet
    later = now + timedelta(seconds=STALL_SECONDS + 1)
    assert parts.indexer.resume_stalled(later, queued.append) == 1
    assert [IndexJob.model_validate(job) for job in queued] == [IndexJob(
        tenant_id="acme", project_id="p1", document_id=doc.id, version=1)]
    assert parts.indexer.index(IndexJob.model_validate(queued[0])) is S.READY
    assert parts.indexer.resume_stalled(later, queued.append) == 0  # READY: done

    # A worker died while INDEXING, and its retries ran out long ago: FAILED, told.
    again, _ = parts.service.add(ADA, "p1", "a.md", b"# A\n\ngamma\n")
    assert parts.documents.mark_document("acme", "p1", doc.id, 2, S.INDEXING)
    much_later = utcnow() + timedelta(seconds=GIVE_UP_SECONDS + 1)
    assert parts.indexer.resume_stalled(much_later, queued.append) == 1
    failed = parts.documents.get_document("acme", "p1", doc.id)
    assert failed.status is S.FAILED and failed.error_code == "runtime_failure"
    assert "add the file again" in failed.error and len(queued) == 1
    assert parts.pushed()[-1] == ("document-updated", "FAILED", 2)
