"""Hybrid retrieval end to end (issue 29, acceptance 2): the embedded runtime's worker embeds
uploaded documents through the real ``openai`` client against the fake OpenAI-compatible
server (profile ``embed`` from ``VANCETOPE_LLM_PROFILES``, setting ``rag.embedding.profile``);
Arthur's ``<rag-context>`` then holds a passage only the vector path finds and one only the
lexical path finds. With the embedding endpoint answering 500, or gone, the turn still
answers from the lexical hit and ``vancetope_embedding_fallbacks_total`` counts it; a
document indexed meanwhile is READY and lexical, and gets its vectors with a later job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Embedded
from tests.engines.test_arthur_rag import Prompts, ask
from tests.helpers import wait_for
from tests.knowledge.test_retrieval import FILLER, add
from tests.llm.fake_openai_server import FakeOpenAiServer, HttpError, Raw
from vancetope_brain.errors import StoreError
from vancetope_brain.knowledge.retrieval import Retriever, fuse
from vancetope_brain.llm.embeddings import Embeddings
from vancetope_brain.llm.profiles import Profile
from vancetope_brain.models.knowledge import Chunk, Citation, DocumentStatus, SearchHit
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.observability import metrics
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import DocumentStore, DocumentVectors, IdentityStore, SettingStore

CAR = "Car maintenance: change the engine oil every 15000 km."
LAUNCH = "Bluebird ships on 4 May."
QUESTION = "When is automobile upkeep due, and when does Bluebird ship?"
MIN_SCORE = 0.1
CONCEPTS = {"car": "car", "automobile": "car", "maintenance": "care", "upkeep": "care",
            "tyres": "tyre", "tires": "tyre"}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as fake:
        fake.teach(CONCEPTS)
        yield fake


@pytest.fixture(scope="module")
def hybrid(server, tmp_path_factory) -> Iterator[Embedded]:
    folder = tmp_path_factory.mktemp("hybrid")
    profiles = folder / "profiles.yaml"
    profiles.write_text(f"profiles:\n  embed:\n    baseUrl: {server.base_url}\n"
                        "    model: toy-embed\n    maxRetries: 0\n")
    emb = Embedded(folder / "data", VANCETOPE_LLM_PROFILES=str(profiles))
    emb.brain.settings.set("acme", SettingScope.tenant(), "rag.embedding.profile", "embed")
    # The launch passage holds one of the question's five words: a BM25 share of 0.12. A
    # passage sharing no concept with the question has a cosine of 0.07 (the toy model).
    emb.brain.settings.set("acme", SettingScope.tenant(), "rag.minScore", MIN_SCORE)
    yield emb
    emb.stop()


def _add(emb: Embedded, name: str, *texts: str) -> str:
    doc, _ = emb.brain.documents.add(emb.who, "default", name, "\n\n".join(texts).encode(),
                                     "text/markdown")
    wait_for(lambda: emb.brain.documents.get(emb.who, "default", doc.id).status
             is DocumentStatus.READY, timeout=20, what=f"{name} indexed")
    return doc.id


def _missing(emb: Embedded) -> list[str]:
    return [d.name for d in emb.brain.store.port(DocumentVectors).without_vectors(
        "acme", "default", "toy-embed", 10)]


def _fallbacks(stage: str, code: str = "embedding_failed") -> float:
    return metrics.EMBEDDING_FALLBACKS.labels(stage=stage, code=code)._value.get()


def _block(system: str) -> str:
    return system[system.index("<rag-context>"):] if "<rag-context>" in system else ""


def test_vector_and_lexical_hits_are_fused_and_an_endpoint_down_falls_back(hybrid, server,
                                                                         tmp_path: Path):
    for name, texts in (("office.md", FILLER), ("car-care.md", [CAR]),
                        ("launch.md", [LAUNCH])):
        _add(hybrid, name, *texts)
    wait_for(lambda: _missing(hybrid) == [], timeout=10, what="vectors written")
    assert any(r.path == "/v1/embeddings" for r in server.requests)

    # The search itself: the car passage only by vector, the launch only lexically.
    retriever = Retriever(hybrid.brain.store.port(DocumentStore),
                          hybrid.brain.store.port(DocumentVectors), Embeddings(
        {"embed": Profile("embed", server.base_url, "toy-embed")}, hybrid.brain.settings))
    hits = retriever.search("acme", ["default"], QUESTION, top_k=5, min_score=MIN_SCORE)
    # Each first on its path: the same fused weight, then the higher score (cosine 1) first.
    assert [(h.chunk.text, h.via) for h in hits] == [(CAR, "vector"), (LAUNCH, "lexical")]
    assert retriever.search("acme", ["default"], "automobile upkeep", top_k=5,
                            min_score=MIN_SCORE)[0].chunk.text == CAR

    block = _block(ask(hybrid, QUESTION, Prompts())[0])
    assert CAR in block and LAUNCH in block
    assert 'document="car-care.md"' in block and 'document="launch.md"' in block

    # Garbage from the endpoint: the search is lexical, counted under its own code.
    garbage = _fallbacks("query", "embedding_invalid")
    server.break_embeddings(Raw('{"data": [{"index": 0, "embedding": "oops"}]}',
                                content_type="application/json"))
    assert [(h.chunk.text, h.via) for h in retriever.search(
        "acme", ["default"], QUESTION, top_k=5, min_score=MIN_SCORE)] == [(LAUNCH, "lexical")]
    assert _fallbacks("query", "embedding_invalid") == garbage + 1

    # The endpoint answers 500: the turn answers from the lexical hit, and it is counted.
    before = _fallbacks("query")
    server.break_embeddings(HttpError(500, "down"))
    system, chat = ask(hybrid, QUESTION, Prompts("Bluebird ships on 4 May, says launch.md."))
    assert LAUNCH in _block(system) and CAR not in system
    assert chat[-1].content.startswith("Bluebird ships") and chat[-1].sources
    assert _fallbacks("query") >= before + 1

    # A document indexed meanwhile: READY, found lexically, its vectors missing and counted.
    indexing = _fallbacks("index")
    _add(hybrid, "tyres.md", "Swap the tires before winter.")
    # (READY comes first: the job embeds after writing the chunks.)
    wait_for(lambda: _fallbacks("index") == indexing + 1, timeout=10, what="counted")
    assert _missing(hybrid) == ["tyres.md"]
    assert [h.chunk.text for h in retriever.search("acme", ["default"], "winter tires",
                                                   top_k=5, min_score=MIN_SCORE)] == [
        "Swap the tires before winter."]
    # Back up: the next job of the project fills them.
    server.break_embeddings(None)
    _add(hybrid, "notes.md", "Nothing to add.")
    wait_for(lambda: _missing(hybrid) == [], timeout=10, what="vectors backfilled")
    assert [(h.chunk.text, h.via) for h in retriever.search(
        "acme", ["default"], "automobile tyres", top_k=5, min_score=MIN_SCORE)] == [
        ("Swap the tires before winter.", "vector"), (CAR, "vector")]

    # The endpoint gone altogether: still lexical, still counted.
    before = _fallbacks("query")
    server.__exit__(None, None, None)
    system, _ = ask(hybrid, QUESTION, Prompts())
    assert LAUNCH in _block(system) and CAR not in system
    assert _fallbacks("query") >= before + 1


def _hit(ordinal: int, score: float, via: str) -> SearchHit:
    chunk = Chunk(tenant_id="t", project_id="p", document_id="d", document_version=1,
                  ordinal=ordinal, text=f"chunk {ordinal}")
    return SearchHit(chunk=chunk, citation=Citation(document_id="d", document_name="d.md"),
                     score=score, via=via)


def test_fusion_is_by_reciprocal_rank_keeping_the_better_score():
    lexical = [_hit(1, 0.9, "lexical"), _hit(2, 0.5, "lexical"), _hit(3, 0.3, "lexical")]
    vector = [_hit(3, 0.8, "vector"), _hit(4, 0.7, "vector")]
    fused = fuse(lexical, vector)
    # chunk 3: 1/63 + 1/61; chunk 1: 1/61; chunk 4: 1/62; chunk 2: 1/62 (lower score).
    assert [(h.chunk.ordinal, h.score, h.via) for h in fused] == [
        (3, 0.8, "hybrid"), (1, 0.9, "lexical"), (4, 0.7, "vector"), (2, 0.5, "lexical")]
    assert fuse(lexical, []) == lexical


def test_a_failing_vector_store_raises_after_a_log_line_and_a_count(acme_store, monkeypatch,
                                                                    caplog):
    add(acme_store, "acme", "p1", "car-care.md", CAR)
    settings = SettingsService(acme_store.port(SettingStore), acme_store.port(IdentityStore))
    settings.set("acme", SettingScope.tenant(), "rag.embedding.profile", "embed")
    vectors = acme_store.port(DocumentVectors)

    def broken(*args, **kwargs):
        raise StoreError("disk I/O error")

    monkeypatch.setattr(vectors, "search_vectors", broken)
    failures = metrics.RETRIEVAL_FAILURES.labels(stage="vector")
    before = failures._value.get()
    with FakeOpenAiServer() as fake:
        retriever = Retriever(acme_store.port(DocumentStore), vectors, Embeddings(
            {"embed": Profile("embed", fake.base_url, "toy-embed")}, settings))
        with pytest.raises(StoreError):
            retriever.search("acme", ["p1"], "car upkeep", top_k=5, min_score=0.0)
    assert failures._value.get() == before + 1
    assert "knowledge search failed (stage vector, tenant acme)" in caplog.text
