"""Retrieval over a project's documents (``knowledge/retrieval.py``): ranking, the tenant and
project a search may see, the bounded query, ``top_k`` and ``min_score``, a failing store;
and the sample document ``vancetope serve`` seeds (``knowledge/sample.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from vancetope_brain.errors import StoreError
from vancetope_brain.identity import IdentityService
from vancetope_brain.knowledge.retrieval import MAX_QUERY_CHARS, MAX_TOP_K, Retriever, query_text
from vancetope_brain.knowledge.sample import SAMPLE_NAME, sample_bytes, seed_sample
from vancetope_brain.models.knowledge import Chunk, DocumentFormat, KnowledgeDocument
from vancetope_brain.observability import metrics
from vancetope_brain.store import Backend, DocumentStore, DocumentVectors, open_store

CAPS = {"max_project_documents": 500, "max_project_bytes": 10**9, "max_tenant_bytes": 10**10}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Backend]:
    backend = open_store(f"sqlite:///{tmp_path / 'k.db'}")
    yield backend
    backend.close()


def add(store: Backend, tenant: str, project: str, name: str, *texts: str,
        section: str = "") -> KnowledgeDocument:
    """A READY document of ``texts`` (one chunk each), written through the port."""
    documents = store.port(DocumentStore)
    body = "\n\n".join(texts).encode()
    doc = documents.add_document(KnowledgeDocument(
        tenant_id=tenant, project_id=project, name=name, format=DocumentFormat.TEXT,
        media_type="text/plain", size=len(body), sha256=hashlib.sha256(body).hexdigest(),
        added_by="ada"), **CAPS)
    chunks = [Chunk(tenant_id=tenant, project_id=project, document_id=doc.id,
                    document_version=doc.version, ordinal=i, text=text, section=section,
                    line_start=3 * i + 1, line_end=3 * i + 2) for i, text in enumerate(texts)]
    assert documents.write_chunks(tenant, project, doc.id, doc.version, chunks, pages=None)
    return doc


FILLER = ["The office kitchen has a coffee machine.", "Parking is behind the building.",
          "Holidays are booked in the HR portal.", "The printer on floor two is broken."]


def test_the_best_passage_comes_first_and_scores_are_normalised(store):
    add(store, "acme", "p1", "handbook.txt", *FILLER,
        "Expenses are reimbursed monthly; expenses need receipts.",
        "Travel expenses above 500 euros need approval.")
    hits = Retriever(store.port(DocumentStore), store.port(DocumentVectors)).search(
        "acme", ["p1"], "How are expenses reimbursed?", top_k=5, min_score=0.0)
    assert [h.chunk.ordinal for h in hits] == [4, 5]  # both words, then one
    assert all(0 < h.score < 1 and h.via == "lexical" for h in hits)
    assert hits[0].score > hits[1].score
    assert hits[0].citation.document_name == "handbook.txt"
    assert (hits[0].citation.line_start, hits[0].citation.line_end) == (13, 14)


def test_another_tenants_or_projects_passages_are_never_found(store):
    add(store, "acme", "p1", "mine.txt", *FILLER, "Our launch codename is Bluebird.")
    add(store, "acme", "p2", "other-project.txt", *FILLER, "Bluebird launch secrets of p2.")
    add(store, "evil", "p1", "other-tenant.txt", *FILLER, "Bluebird launch secrets of evil.")
    retriever = Retriever(store.port(DocumentStore), store.port(DocumentVectors))
    hits = retriever.search("acme", ["p1"], "bluebird launch", top_k=20, min_score=0.0)
    assert [h.citation.document_name for h in hits] == ["mine.txt"]
    assert {h.chunk.tenant_id for h in hits} == {"acme"}
    assert retriever.search("acme", [], "bluebird", top_k=5, min_score=0.0) == []
    assert [d.name for d in retriever.documents("evil", "p1")] == ["other-tenant.txt"]


def test_top_k_and_min_score_bound_the_hits(store):
    add(store, "acme", "p1", "many.txt", *FILLER,
        *[f"Widget note {i}: widgets{' widgets' * i}" for i in range(30)])
    retriever = Retriever(store.port(DocumentStore), store.port(DocumentVectors))
    assert len(retriever.search("acme", ["p1"], "widgets", top_k=3, min_score=0.0)) == 3
    assert len(retriever.search("acme", ["p1"], "widgets", top_k=500,
                                min_score=0.0)) == MAX_TOP_K
    assert retriever.search("acme", ["p1"], "widgets", top_k=0, min_score=0.0) == []
    every = retriever.search("acme", ["p1"], "widgets", top_k=20, min_score=0.0)
    cut = (every[2].score + every[3].score) / 2
    kept = retriever.search("acme", ["p1"], "widgets", top_k=20, min_score=cut)
    assert kept == every[:3] and all(h.score >= cut for h in kept)


def test_the_query_is_bounded_plain_words_without_stop_words():
    assert query_text("What do my documents say about Citations?") == "citations"
    assert query_text("what is it") == "what is it"  # nothing else left: all of them
    assert query_text('"a" AND title:x NEAR(y*) ^z') == "title x near y z"
    assert query_text("x " * MAX_QUERY_CHARS + "late") == "x"  # past the bound: ignored
    assert len(query_text(" ".join(f"w{i}" for i in range(100))).split()) == 32


def test_a_failing_store_raises_after_a_log_line_and_a_count(store, monkeypatch, caplog):
    documents = store.port(DocumentStore)

    def broken(*args, **kwargs):
        raise StoreError("disk I/O error")

    monkeypatch.setattr(documents, "search_chunks", broken)
    failures = metrics.RETRIEVAL_FAILURES.labels(stage="lexical")
    before = failures._value.get()
    retriever = Retriever(documents, store.port(DocumentVectors))
    with pytest.raises(StoreError):
        retriever.search("acme", ["p1"], "anything", top_k=5, min_score=0.0)
    assert failures._value.get() == before + 1
    assert "knowledge search failed (stage lexical, tenant acme)" in caplog.text
    retriever.search("acme", ["p1"], "the", top_k=0, min_score=0.0)  # no query
    assert failures._value.get() == before + 1


def test_the_sample_is_seeded_ready_once_and_found(store):
    first = seed_sample(store, "local", "default", "local")
    again = seed_sample(store, "local", "default", "local")
    documents = store.port(DocumentStore)
    assert again == first and [d.name for d in documents.list_documents("local", "default")] \
        == [SAMPLE_NAME]
    assert first.status == "READY" and first.version == 1 and first.chunk_count >= 4
    assert first.size == len(sample_bytes())
    [hit] = Retriever(documents, store.port(DocumentVectors)).search(
        "local", ["default"], "what do my documents say about citations", top_k=1,
        min_score=0.2)
    assert hit.citation.section.endswith("Citations") and "citation" in hit.chunk.text


def test_serve_seeds_only_the_project_it_creates(store, tmp_path):
    identity = IdentityService.on(store)
    seeded: list[tuple[str, str, str]] = []

    def seed(tenant: str, project: str, user: str) -> None:
        seeded.append((tenant, project, user))
        seed_sample(store, tenant, project, user)

    identity.bootstrap_local(tmp_path / "token", on_new_project=seed)
    assert seeded == [("local", "default", "local")]
    [sample] = store.port(DocumentStore).list_documents("local", "default")
    # Deleted by the user, it does not come back at the next start.
    store.port(DocumentStore).delete_document("local", "default", sample.id)
    identity.bootstrap_local(tmp_path / "token", on_new_project=seed)
    assert seeded == [("local", "default", "local")]
    assert store.port(DocumentStore).list_documents("local", "default") == []
