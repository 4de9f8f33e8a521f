"""Documents: added PENDING, replaced by name (an unchanged READY file is a no-op), capped
per project and tenant with nothing stored over a cap, written by the worker of their
current version only, deleted with their chunks; another tenant's look missing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from vancetope_brain.errors import ProjectKnowledgeFull, TenantKnowledgeFull
from vancetope_brain.models import utcnow
from vancetope_brain.models.knowledge import DocumentFormat, DocumentStatus
from vancetope_brain.store import DocumentStore

from ._build import ROOMY, chunks, document, indexed


def test_an_added_document_is_pending_version_1_and_reads_back(documents: DocumentStore) -> None:
    given = document().model_copy(update={"version": 7, "status": DocumentStatus.READY,
                                          "chunk_count": 3})
    stored = documents.add_document(given, **ROOMY)
    assert (stored.id, stored.version, stored.status, stored.chunk_count) == (
        given.id, 1, DocumentStatus.PENDING, 0)
    assert documents.get_document("ten_1", "prj_1", stored.id) == stored
    assert documents.list_documents("ten_1", "prj_1") == [stored]
    assert documents.usage("ten_1") == documents.usage("ten_1", "prj_1") == (1, stored.size)


def test_adding_a_changed_file_under_its_name_replaces_the_document(
        documents: DocumentStore) -> None:
    first = indexed(documents, "old text about llamas", content="old")
    changed = document(content="new, longer content").model_copy(
        update={"format": DocumentFormat.TEXT, "media_type": "text/plain", "added_by": "usr_2"})
    second = documents.add_document(changed, **ROOMY)
    assert (second.id, second.version, second.status, second.chunk_count, second.created_at) \
        == (first.id, 2, DocumentStatus.PENDING, 0, first.created_at)
    assert (second.size, second.sha256, second.format, second.added_by) == (
        changed.size, changed.sha256, DocumentFormat.TEXT, "usr_2")
    assert documents.list_documents("ten_1", "prj_1") == [second]
    assert documents.usage("ten_1", "prj_1") == (1, changed.size)
    # Until the new version is written, the old chunks are not searched.
    assert documents.search_chunks("ten_1", ["prj_1"], "llamas", 10) == []


def test_adding_an_unchanged_ready_file_again_changes_nothing(documents: DocumentStore) -> None:
    ready = indexed(documents, "alpha", content="same")
    again = documents.add_document(document(content="same"), **ROOMY)
    assert again == ready == documents.get_document("ten_1", "prj_1", ready.id)
    assert len(documents.search_chunks("ten_1", ["prj_1"], "alpha", 10)) == 1


def test_an_unchanged_file_not_yet_ready_is_queued_again(documents: DocumentStore) -> None:
    pending = documents.add_document(document(content="same"), **ROOMY)
    assert documents.mark_document("ten_1", "prj_1", pending.id, 1, DocumentStatus.FAILED,
                                   error_code="unreadable_document", error="bad")
    again = documents.add_document(document(content="same"), **ROOMY)
    assert (again.version, again.status, again.error_code) == (2, DocumentStatus.PENDING, None)


@pytest.mark.parametrize(("caps", "size", "error"), [
    ({"max_project_documents": 2}, 1, ProjectKnowledgeFull),
    ({"max_project_bytes": 25}, 6, ProjectKnowledgeFull),
    ({"max_tenant_bytes": 30}, 11, TenantKnowledgeFull),
])
def test_a_document_over_a_cap_is_refused_and_nothing_is_stored(
        documents: DocumentStore, caps: dict[str, int], size: int,
        error: type[Exception]) -> None:
    limits = {**ROOMY, **caps}
    documents.add_document(document("a.md", size=10), **limits)
    documents.add_document(document("b.md", size=10), **limits)
    documents.add_document(document("other.md", size=10, project="prj_2"), **ROOMY)
    before = documents.list_documents("ten_1", "prj_1")
    with pytest.raises(error) as raised:
        documents.add_document(document("c.md", size=size), **limits)
    assert raised.value.code == error.code
    assert documents.list_documents("ten_1", "prj_1") == before
    assert documents.usage("ten_1") == (3, 30)


def test_a_replacement_counts_the_difference_against_the_caps(documents: DocumentStore) -> None:
    caps = {**ROOMY, "max_project_documents": 1, "max_project_bytes": 10, "max_tenant_bytes": 10}
    documents.add_document(document(size=8), **caps)
    bigger = documents.add_document(document(content="v2", size=10), **caps)
    assert (bigger.version, bigger.size) == (2, 10)
    with pytest.raises(ProjectKnowledgeFull):
        documents.add_document(document(content="v3", size=11), **caps)
    lowered = {**caps, "max_project_bytes": 5, "max_tenant_bytes": 5}
    assert documents.add_document(document(content="v4", size=9), **lowered).version == 3
    assert documents.usage("ten_1") == (1, 9)


def test_the_tenant_cap_counts_every_project_and_no_other_tenant(
        documents: DocumentStore) -> None:
    caps = {**ROOMY, "max_tenant_bytes": 20}
    documents.add_document(document("a.md", size=10, project="prj_1"), **caps)
    documents.add_document(document("a.md", size=10, tenant="ten_2"), **caps)
    documents.add_document(document("b.md", size=10, project="prj_2"), **caps)
    with pytest.raises(TenantKnowledgeFull):
        documents.add_document(document("c.md", size=1, project="prj_3"), **caps)
    assert documents.usage("ten_1") == (2, 20)
    assert documents.usage("ten_1", "prj_3") == (0, 0)


def test_marks_and_chunks_of_an_older_version_write_nothing(documents: DocumentStore) -> None:
    v1 = documents.add_document(document(content="one"), **ROOMY)
    assert documents.mark_document("ten_1", "prj_1", v1.id, 1, DocumentStatus.INDEXING)
    v2 = documents.add_document(document(content="two"), **ROOMY)
    assert not documents.mark_document("ten_1", "prj_1", v1.id, 1, DocumentStatus.FAILED,
                                       error_code="unreadable_document")
    assert not documents.write_chunks("ten_1", "prj_1", v1.id, 1,
                                      chunks(v1, "stale words"), pages=3)
    assert documents.get_document("ten_1", "prj_1", v1.id) == v2
    assert documents.search_chunks("ten_1", ["prj_1"], "stale", 10) == []
    assert documents.write_chunks("ten_1", "prj_1", v2.id, 2, chunks(v2, "fresh words"),
                                  pages=4)
    ready = documents.get_document("ten_1", "prj_1", v2.id)
    assert ready is not None
    assert (ready.status, ready.chunk_count, ready.pages, ready.version) == (
        DocumentStatus.READY, 1, 4, 2)
    assert [hit.chunk.text for hit in documents.search_chunks(
        "ten_1", ["prj_1"], "stale fresh", 10)] == ["fresh words"]


def test_a_failed_mark_keeps_its_error_and_a_later_write_clears_it(
        documents: DocumentStore) -> None:
    doc = documents.add_document(document(), **ROOMY)
    assert documents.mark_document("ten_1", "prj_1", doc.id, 1, DocumentStatus.FAILED,
                                   error_code="unreadable_document", error="truncated PDF")
    failed = documents.get_document("ten_1", "prj_1", doc.id)
    assert failed is not None
    assert (failed.status, failed.error_code, failed.error) == (
        DocumentStatus.FAILED, "unreadable_document", "truncated PDF")
    assert documents.write_chunks("ten_1", "prj_1", doc.id, 1, [], pages=0)
    empty = documents.get_document("ten_1", "prj_1", doc.id)
    assert empty is not None
    assert (empty.status, empty.chunk_count, empty.error_code, empty.error) == (
        DocumentStatus.READY, 0, None, None)
    with pytest.raises(ValueError, match="write_chunks"):
        documents.mark_document("ten_1", "prj_1", doc.id, 1, DocumentStatus.READY)


def test_chunks_must_be_the_documents_own_in_order(documents: DocumentStore) -> None:
    doc = documents.add_document(document(), **ROOMY)
    other = documents.add_document(document("other.md"), **ROOMY)
    for wrong in (chunks(other, "x"), chunks(doc, "a", "b")[::-1],
                  [chunks(doc, "a")[0].model_copy(update={"document_version": 2})]):
        with pytest.raises(ValueError):
            documents.write_chunks("ten_1", "prj_1", doc.id, 1, wrong, pages=None)
    assert documents.get_document("ten_1", "prj_1", doc.id) == doc


def test_writing_chunks_again_replaces_them_all(documents: DocumentStore) -> None:
    doc = indexed(documents, "alpha one", "alpha two", "alpha three")
    assert documents.write_chunks("ten_1", "prj_1", doc.id, 1, chunks(doc, "alpha again"),
                                  pages=1)
    hits = documents.search_chunks("ten_1", ["prj_1"], "alpha", 10)
    assert [(hit.chunk.ordinal, hit.chunk.text) for hit in hits] == [(0, "alpha again")]
    assert documents.search_chunks("ten_1", ["prj_1"], "one two three", 10) == []


def test_words_of_deleted_chunks_never_find_the_chunks_written_after(
        documents: DocumentStore) -> None:
    """SQLite reuses a deleted row's id; its index entries must have gone with it."""
    doc = indexed(documents, "walrus tusks", "walrus whiskers")
    assert documents.delete_document("ten_1", "prj_1", doc.id)
    indexed(documents, "penguin", "puffin", name="birds.md")
    assert documents.search_chunks("ten_1", ["prj_1"], "walrus tusks whiskers", 10) == []


def test_deleting_a_document_removes_it_and_its_chunks(documents: DocumentStore) -> None:
    doc = indexed(documents, "zebra crossing", "zebra stripes")
    kept = indexed(documents, "zebra elsewhere", name="kept.md")
    assert documents.delete_document("ten_1", "prj_1", doc.id)
    assert not documents.delete_document("ten_1", "prj_1", doc.id)
    assert documents.get_document("ten_1", "prj_1", doc.id) is None
    assert documents.list_documents("ten_1", "prj_1") == [kept]
    assert [hit.chunk.document_id for hit in documents.search_chunks(
        "ten_1", ["prj_1"], "zebra", 10)] == [kept.id]
    assert not documents.write_chunks("ten_1", "prj_1", doc.id, 1, chunks(doc, "zebra"),
                                      pages=None)
    assert documents.search_chunks("ten_1", ["prj_1"], "crossing stripes", 10) == []
    again = documents.add_document(document(content="zebra crossing\nzebra stripes"), **ROOMY)
    assert (again.version, again.id != doc.id) == (1, True)


def test_documents_are_listed_by_name(documents: DocumentStore) -> None:
    for name in ("b.md", "B.md", "a.md", "é.md", "z.md", "a b.md"):
        documents.add_document(document(name), **ROOMY)
    assert [doc.name for doc in documents.list_documents("ten_1", "prj_1")] == [
        "B.md", "a b.md", "a.md", "b.md", "z.md", "é.md"]


def test_another_tenants_or_projects_document_looks_missing(documents: DocumentStore) -> None:
    doc = indexed(documents, "secret plans")
    for tenant, project in (("ten_2", "prj_1"), ("ten_1", "prj_2")):
        assert documents.get_document(tenant, project, doc.id) is None
        assert documents.list_documents(tenant, project) == []
        assert not documents.mark_document(tenant, project, doc.id, 1, DocumentStatus.FAILED)
        assert not documents.write_chunks(tenant, project, doc.id, 1,
                                          chunks(doc.model_copy(update={
                                              "tenant_id": tenant, "project_id": project}),
                                              "forged"), pages=None)
        assert not documents.delete_document(tenant, project, doc.id)
    assert documents.usage("ten_2") == (0, 0)
    assert documents.get_document("ten_1", "prj_1", doc.id) == doc
    assert [hit.chunk.text for hit in documents.search_chunks(
        "ten_1", ["prj_1"], "secret forged", 10)] == ["secret plans"]


def test_stalled_documents_are_the_unfinished_untouched_since_oldest_first(
        documents: DocumentStore) -> None:
    pending = documents.add_document(document("a.md"), **ROOMY)
    other_tenant = documents.add_document(document("b.md", tenant="ten_2"), **ROOMY)
    indexing = documents.add_document(document("c.md"), **ROOMY)
    assert documents.mark_document("ten_1", "prj_1", indexing.id, 1, DocumentStatus.INDEXING)
    indexed(documents, "ready text", name="d.md")
    failed = documents.add_document(document("e.md"), **ROOMY)
    assert documents.mark_document("ten_1", "prj_1", failed.id, 1, DocumentStatus.FAILED)
    later = utcnow() + timedelta(seconds=1)
    stalled = documents.stalled_documents(later, 10)
    assert {doc.id for doc in stalled} == {pending.id, other_tenant.id, indexing.id}
    assert [doc.updated_at for doc in stalled] == sorted(doc.updated_at for doc in stalled)
    assert {doc.id: doc.status for doc in stalled}[indexing.id] is DocumentStatus.INDEXING
    [oldest] = documents.stalled_documents(later, 1)
    assert oldest.updated_at == stalled[0].updated_at
    # A change (a worker marking it) makes it fresh again; none is older than its add.
    assert documents.mark_document("ten_1", "prj_1", pending.id, 1, DocumentStatus.PENDING)
    assert pending.id not in [doc.id for doc in documents.stalled_documents(
        documents.get_document("ten_1", "prj_1", pending.id).updated_at, 10)]
    assert documents.stalled_documents(pending.added_at - timedelta(seconds=1), 10) == []
