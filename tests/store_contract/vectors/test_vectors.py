"""The document vector port: one vector per current chunk, stored at unit length, searched by an
exact cosine scan over READY documents' current versions of the tenant's named projects, of
one model and dimension; replaced by a re-add, removed by a delete, refused when malformed;
and seen by every backend open on the same storage (another process's cache)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.store_contract.documents._build import ROOMY, chunks, document, indexed
from vancetope_brain.store import DocumentStore, DocumentVectors
from vancetope_brain.store import vectors as store_vectors
from vancetope_brain.store.documents import MAX_SEARCH_LIMIT

M = "embed-small"
AXES = np.eye(4, dtype=np.float32)


def _vectors(store: DocumentVectors, doc, *rows, model: str = M) -> bool:
    return store.write_vectors(doc.tenant_id, doc.project_id, doc.id, doc.version, model,
                               np.array(rows, dtype=np.float32))


def _found(store: DocumentVectors, query, projects=("prj_1",), tenant="ten_1", model=M,
           limit=10) -> list[tuple[str, float]]:
    return [(hit.chunk.text, round(hit.score, 6)) for hit in store.search_vectors(
        tenant, list(projects), model, np.array(query, dtype=np.float32), limit)]


def test_the_nearest_chunks_come_first_scored_by_their_cosine(documents, vectors):
    doc = indexed(documents, "north", "east", "north-east", "south")
    assert _vectors(vectors, doc, [0, 5, 0, 0], [3, 0, 0, 0], [1, 1, 0, 0], [0, -2, 0, 0])
    hits = vectors.search_vectors("ten_1", ["prj_1"], M, np.array([0.2, 1.0, 0, 0]), 10)
    assert [h.chunk.text for h in hits] == ["north", "north-east", "east"]  # south: cos < 0
    cos = 1 / math.sqrt(1.04)
    assert [h.score for h in hits] == pytest.approx([cos, 1.2 / math.sqrt(2 * 1.04),
                                                     0.2 * cos], rel=1e-6)
    assert {h.via for h in hits} == {"vector"}
    assert hits[0].chunk.ordinal == 0 and hits[0].citation.document_name == "guide.md"
    assert len(vectors.search_vectors("ten_1", ["prj_1"], M, np.array([1.0, 1, 0, 0]),
                                        1)) == 1


def test_only_the_tenants_named_projects_and_the_model_are_searched(documents, vectors):
    mine = indexed(documents, "mine")
    other_project = indexed(documents, "other project", project="prj_2")
    other_tenant = indexed(documents, "other tenant", tenant="ten_2")
    other_model = indexed(documents, "other model", name="b.md")
    for doc in (mine, other_project, other_tenant):
        assert _vectors(vectors, doc, AXES[0])
    assert _vectors(vectors, other_model, AXES[0], model="embed-large")
    assert _found(vectors, AXES[0]) == [("mine", 1.0)]
    assert sorted(_found(vectors, AXES[0], projects=("prj_1", "prj_2"))) == [
        ("mine", 1.0), ("other project", 1.0)]
    assert _found(vectors, AXES[0], tenant="ten_2") == [("other tenant", 1.0)]
    assert _found(vectors, AXES[0], tenant="ten_3") == []
    assert _found(vectors, AXES[0], model="embed-large") == [("other model", 1.0)]
    assert _found(vectors, AXES[0], projects=()) == []


def test_a_re_add_replaces_the_vectors_and_a_delete_removes_them(documents, vectors):
    doc = indexed(documents, "old text")
    assert _vectors(vectors, doc, AXES[0])
    other = indexed(documents, "other text", name="other.md")
    assert _vectors(vectors, other, [1.0, 0, 1, 0])
    again = documents.add_document(document(content="v2"), **ROOMY)
    assert again.version == 2
    # PENDING: nothing of it is searched (the other document's chunk still is).
    assert _found(vectors, AXES[0]) == [("other text", round(1 / math.sqrt(2), 6))]
    assert documents.delete_document("ten_1", "prj_1", other.id)
    assert _found(vectors, AXES[0]) == []
    assert not _vectors(vectors, doc, AXES[0])  # the old version writes nothing
    assert documents.write_chunks("ten_1", "prj_1", doc.id, 2, chunks(again, "new a", "new b"),
                                  pages=None)
    assert _found(vectors, AXES[0]) == []  # the old vectors went with the old chunks
    assert [d.id for d in vectors.without_vectors("ten_1", "prj_1", M, 10)] == [doc.id]
    ready = documents.get_document("ten_1", "prj_1", doc.id)
    assert _vectors(vectors, ready, AXES[1], AXES[0])
    assert _found(vectors, AXES[0]) == [("new b", 1.0)]
    assert vectors.without_vectors("ten_1", "prj_1", M, 10) == []
    assert vectors.without_vectors("ten_1", "prj_1", "embed-large", 10)[0].id == doc.id
    assert documents.delete_document("ten_1", "prj_1", doc.id)
    assert _found(vectors, AXES[0]) == []
    assert not _vectors(vectors, ready, AXES[1], AXES[0])


def test_malformed_vectors_are_refused_and_another_dimension_is_not_compared(documents, vectors):
    doc = indexed(documents, "one", "two")
    for rows in ([AXES[0]], [AXES[0], AXES[1], AXES[2]], [[1.0, math.nan, 0, 0], AXES[1]],
                 [[0.0, 0, 0, 0], AXES[1]], [[1.0] * 4097, [1.0] * 4097]):
        with pytest.raises(ValueError):
            _vectors(vectors, doc, *rows)
    with pytest.raises(ValueError):
        vectors.write_vectors("ten_1", "prj_1", doc.id, 1, M, np.ones((2, 0), np.float32))
    with pytest.raises(ValueError):
        vectors.write_vectors("ten_1", "prj_1", doc.id, 1, "", np.ones((2, 4), np.float32))
    assert _found(vectors, AXES[0]) == []  # nothing of a refused write was kept
    assert _vectors(vectors, doc, AXES[0], AXES[1])
    assert _found(vectors, [1.0, 0, 0]) == []  # 3 numbers: the stored 4 are not compared
    for query in ([0.0, 0, 0, 0], [math.inf, 0, 0, 0], [[1.0, 0, 0, 0]]):
        with pytest.raises(ValueError):
            _found(vectors, query)
    assert _found(vectors, AXES[1], limit=0) == []
    assert len(_found(vectors, [1.0, 1, 0, 0], limit=10**6)) == 2 <= MAX_SEARCH_LIMIT


def test_another_backend_on_the_same_storage_sees_every_change(storage):
    """What another worker process sees: its cached matrix must not outlive a write."""
    backend = storage.open_backend()
    documents, writer = backend.port(DocumentStore), backend.port(DocumentVectors)
    reader = storage.open_backend().port(DocumentVectors)
    first = indexed(documents, "first")
    assert _vectors(writer, first, AXES[0])
    assert _found(reader, AXES[0]) == [("first", 1.0)]
    second = indexed(documents, "second", name="b.md")
    assert _vectors(writer, second, AXES[0])
    assert sorted(_found(reader, AXES[0])) == [("first", 1.0), ("second", 1.0)]
    assert _vectors(writer, first, AXES[1])
    assert _found(reader, AXES[0]) == [("second", 1.0)]
    assert documents.delete_document("ten_1", "prj_1", second.id)
    assert _found(reader, AXES[0]) == []
    assert _found(reader, AXES[1]) == [("first", 1.0)]


def test_a_search_compares_no_more_vectors_than_its_byte_cap_allows(documents, vectors,
                                                                    monkeypatch):
    doc = indexed(documents, "north", "east", "south")
    assert _vectors(vectors, doc, [0, 1, 0, 0], [1, 0, 0, 0], [0, -1, 0, 0])
    monkeypatch.setattr(store_vectors, "MAX_SCAN_BYTES", 2 * 4 * 4)  # two vectors of four
    assert store_vectors.scan_rows(4) == 2 and store_vectors.scan_rows(1) == 8
    assert _found(vectors, [0, -1, 0, 0.1]) == []  # south is the third: not compared
    assert [text for text, _ in _found(vectors, [1, 0, 0, 0])] == ["east"]
