"""Lexical search: the user's words, never FTS syntax; READY documents' current chunks of the
tenant's named projects only; BM25 normalised by the port's one formula, best first, ties by
document name then ordinal; case and Latin diacritics folded."""

from __future__ import annotations

import math

import pytest

from vancetope_brain.models.knowledge import DocumentStatus
from vancetope_brain.store import DocumentStore
from vancetope_brain.store.documents import (
    MAX_QUERY_TERMS,
    MAX_SEARCH_LIMIT,
    query_words,
)

from ._build import ROOMY, chunks, document, indexed


def _texts(store: DocumentStore, query: str, projects: tuple[str, ...] = ("prj_1",),
           tenant: str = "ten_1", limit: int = 10) -> list[str]:
    return [hit.chunk.text for hit in store.search_chunks(tenant, list(projects), query, limit)]


def test_a_hit_carries_its_chunk_citation_and_a_normalised_score(
        documents: DocumentStore) -> None:
    doc = documents.add_document(document("manual.pdf"), **ROOMY)
    written = chunks(doc, "the pump needs oil", section="Care › Oil", page=3, line_start=4,
                     line_end=9)
    assert documents.write_chunks("ten_1", "prj_1", doc.id, 1, written, pages=12)
    [hit] = documents.search_chunks("ten_1", ["prj_1"], "oil", 5)
    assert hit.chunk == written[0]
    assert hit.chunk.schema_version == doc.schema_version == 1
    assert hit.via == "lexical"
    assert hit.citation.model_dump() == {
        "document_id": doc.id, "document_name": "manual.pdf", "section": "Care › Oil",
        "page": 3, "line_start": 4, "line_end": 9}
    assert 0 < hit.score < 1


def _idf(chunks: int, holding: int) -> float:
    return math.log(1 + (chunks - holding + 0.5) / (holding + 0.5))


def _normalised(raw: float, *weights: float) -> float:
    share = raw / (sum(weights) * 2.2)
    return 2 * share / (1 + share)


def test_the_score_is_the_documented_bm25_normalised(documents: DocumentStore) -> None:
    """Three chunks of one project: N = 3, mean length 4; "kiwi" is in one of them, "fig" in
    two, "quince" in none (it still weighs in the query's reference)."""
    indexed(documents, "kiwi kiwi pear plum", "pear plum fig date", "fig date lime lemon")
    [hit] = documents.search_chunks("ten_1", ["prj_1"], "kiwi quince", 5)
    raw = _idf(3, 1) * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 4 / 4))
    assert hit.score == pytest.approx(_normalised(raw, _idf(3, 1), _idf(3, 0)), rel=1e-9)
    hits = documents.search_chunks("ten_1", ["prj_1"], "fig", 5)
    once = _normalised(_idf(3, 2), _idf(3, 2))  # once, at the mean length: 2 / (k1 + 2)
    assert [hit.score for hit in hits] == pytest.approx([once, once], rel=1e-9)
    assert once == pytest.approx(2 / 3.2)


def test_a_single_chunk_project_scores_high(documents: DocumentStore) -> None:
    """N = 1: every term is in every chunk, yet the one chunk holding the query's words
    scores well above ``rag.minScore`` (FTS5's bm25() gave it 1e-6)."""
    indexed(documents, "Remember to water the ficus on Tuesday")
    [hit] = documents.search_chunks("ten_1", ["prj_1"], "water ficus Tuesday", 5)
    assert hit.score >= 0.5
    assert hit.score == pytest.approx(2 / 3.2, rel=1e-9)
    [half] = documents.search_chunks("ten_1", ["prj_1"], "ficus cactus", 5)
    # "cactus", found nowhere, still weighs in the query's best (and weighs most)
    assert half.score == pytest.approx(_normalised(_idf(1, 1), _idf(1, 1), _idf(1, 0)),
                                       rel=1e-9)


def test_a_term_in_most_chunks_still_scores(documents: DocumentStore) -> None:
    indexed(documents, "pump oil", "pump belt", "pump filter")
    hits = documents.search_chunks("ten_1", ["prj_1"], "pump", 5)
    assert len(hits) == 3 and all(hit.score > 0.5 for hit in hits)


def test_other_tenants_and_projects_do_not_move_a_score(documents: DocumentStore) -> None:
    indexed(documents, "the ficus needs water", "the cactus needs none")
    before = [(hit.chunk.text, hit.score)
              for hit in documents.search_chunks("ten_1", ["prj_1"], "ficus water", 5)]
    for n in range(5):  # the same words elsewhere: another tenant, an unsearched project
        indexed(documents, f"ficus water {n}", "ficus", name=f"t{n}.md", tenant="ten_2")
        indexed(documents, f"ficus water {n}", name=f"p{n}.md", project="prj_2")
    after = [(hit.chunk.text, hit.score)
             for hit in documents.search_chunks("ten_1", ["prj_1"], "ficus water", 5)]
    assert after == before and before[0][1] > 0


def test_a_document_being_indexed_again_does_not_move_a_score(
        documents: DocumentStore) -> None:
    indexed(documents, "ficus water", "cactus sand", name="a.md")
    alone = [hit.score for hit in documents.search_chunks("ten_1", ["prj_1"], "ficus", 5)]
    indexed(documents, "ficus ficus", "ficus", "ficus", name="b.md")
    again = documents.add_document(document("b.md", "v2"), **ROOMY)  # v1's chunks stay
    assert again.version == 2
    assert [hit.score for hit in documents.search_chunks("ten_1", ["prj_1"], "ficus", 5)] \
        == alone


def test_more_matching_words_and_rarer_words_rank_higher(documents: DocumentStore) -> None:
    indexed(documents, "solar panels on the roof", "the roof leaks", "solar roof panels tilt",
            "the garden", "nothing here")
    assert _texts(documents, "solar roof panels") == [
        "solar roof panels tilt", "solar panels on the roof", "the roof leaks"]
    scores = [hit.score for hit in documents.search_chunks("ten_1", ["prj_1"], "solar roof", 10)]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)


def test_equal_scores_are_ordered_by_document_name_then_ordinal(
        documents: DocumentStore) -> None:
    indexed(documents, "same words", "same words", name="b.md")
    indexed(documents, "same words", name="a.md")
    indexed(documents, "same words", name="c.md", project="prj_2")
    hits = documents.search_chunks("ten_1", ["prj_2", "prj_1"], "words same", 10)
    assert [(hit.citation.document_name, hit.chunk.ordinal) for hit in hits] == [
        ("a.md", 0), ("b.md", 0), ("b.md", 1), ("c.md", 0)]
    assert len({hit.score for hit in hits}) == 1


def test_the_limit_is_capped(documents: DocumentStore) -> None:
    indexed(documents, *["apple"] * (MAX_SEARCH_LIMIT + 5))
    assert len(_texts(documents, "apple", limit=3)) == 3
    assert len(_texts(documents, "apple", limit=1000)) == MAX_SEARCH_LIMIT
    assert _texts(documents, "apple", limit=0) == []
    assert documents.search_chunks("ten_1", [], "apple", 10) == []


@pytest.mark.parametrize("query", [
    '"', '"unbalanced', 'alpha"', 'alpha AND', 'AND', 'OR alpha', 'NOT alpha', 'alpha NOT',
    'NEAR(alpha beta)', 'NEAR(alpha', 'alph*', '*', '^alpha', '^', '(alpha', 'alpha)', '()',
    'text: alpha', 'text:alpha', 'doc:alpha', '{text}: alpha', '- alpha', '+alpha', 'a:b:c',
    "alpha' OR 1=1 --", 'alpha; DROP TABLE knowledge_chunks', '\x00alpha', 'alpha\\',
    '"alpha" "beta"', 'alpha + beta', 'col1 : alpha', '$where', '{"$gt": ""}',
])
def test_fts_syntax_in_a_query_is_just_words(documents: DocumentStore, query: str) -> None:
    indexed(documents, "alpha beta gamma", "delta text", "near and not or")
    words = set(query_words(query))
    expected = {"alpha beta gamma"} if words & {"alpha", "beta"} else set()
    expected |= {"delta text"} if "text" in words else set()
    expected |= {"near and not or"} if words & {"near", "and", "not", "or"} else set()
    assert set(_texts(documents, query)) == expected
    assert documents.list_documents("ten_1", "prj_1")  # and nothing was dropped


@pytest.mark.parametrize("query", ["", "   ", "?!.,;:", '""', "()*^-", "_", "\u200b\n\t"])
def test_a_query_without_words_finds_nothing(documents: DocumentStore, query: str) -> None:
    indexed(documents, "anything at all")
    assert documents.search_chunks("ten_1", ["prj_1"], query, 10) == []


def test_a_long_query_searches_its_first_words_only(documents: DocumentStore) -> None:
    indexed(documents, "needle")
    filler = " ".join(f"w{n}" for n in range(MAX_QUERY_TERMS))
    assert _texts(documents, f"needle {filler}") == ["needle"]
    assert _texts(documents, f"{filler} needle") == []
    assert _texts(documents, "x " * 10_000 + "needle") == ["needle"]  # repeats count once


@pytest.mark.parametrize(("query", "found"), [
    ("cafe", True), ("CAFÉ", True), ("Café", True), ("cafè", True), ("naive", True),
    ("NAÏVE", True), ("resume", True), ("über", True), ("uber", True), ("zurich", True),
    ("café-crème", True), ("caf", False),
])
def test_case_and_latin_diacritics_are_folded(documents: DocumentStore, query: str,
                                              found: bool) -> None:
    indexed(documents, "Un café crème, naïve Résumé über Zürich")
    assert bool(_texts(documents, query)) is found


def test_other_scripts_are_searched_by_their_words(documents: DocumentStore) -> None:
    indexed(documents, "Ленин и Москва", "東京 タワー", "λόγος καὶ")
    assert _texts(documents, "москва") == ["Ленин и Москва"]
    assert _texts(documents, "東京") == ["東京 タワー"]
    assert _texts(documents, "ΛΌΓΟΣ") == ["λόγος καὶ"]


def test_a_very_long_word_is_searched_like_any_other(documents: DocumentStore) -> None:
    """A run of CJK letters is one word however long (no spaces): past what a database
    index keys, it is still found, counted once and scored like a short word."""
    long_word = "東京タワー" * 200  # 1,000 letters, 3,000 bytes of UTF-8
    indexed(documents, f"{long_word} guide", "guide only", f"{long_word} {long_word}")
    hits = documents.search_chunks("ten_1", ["prj_1"], long_word, 10)
    assert [hit.chunk.ordinal for hit in hits] == [2, 0]
    assert hits[1].score == pytest.approx(
        _normalised(_idf(3, 2) * 2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * 2 / 2)), _idf(3, 2)),
        rel=1e-9)
    assert _texts(documents, long_word[:-1]) == []


def test_only_ready_documents_are_searched(documents: DocumentStore) -> None:
    indexed(documents, "walrus facts", name="ready.md")
    pending = documents.add_document(document("pending.md"), **ROOMY)
    assert documents.mark_document("ten_1", "prj_1", pending.id, 1, DocumentStatus.INDEXING)
    assert _texts(documents, "walrus") == ["walrus facts"]
    assert documents.mark_document("ten_1", "prj_1", pending.id, 1, DocumentStatus.FAILED)
    assert _texts(documents, "walrus") == ["walrus facts"]


def test_a_search_never_crosses_tenants_or_unnamed_projects(documents: DocumentStore) -> None:
    indexed(documents, "shared word ours", tenant="ten_1", project="prj_1")
    indexed(documents, "shared word sibling", tenant="ten_1", project="prj_2")
    indexed(documents, "shared word theirs", tenant="ten_2", project="prj_1")
    assert _texts(documents, "shared word") == ["shared word ours"]
    assert set(_texts(documents, "shared", ("prj_1", "prj_2"))) == {
        "shared word ours", "shared word sibling"}
    assert _texts(documents, "shared", ("prj_1", "prj_2"), tenant="ten_2") == [
        "shared word theirs"]
    assert _texts(documents, "theirs", ("prj_1", "prj_2")) == []
    assert _texts(documents, "ours", tenant="ten_3") == []


def test_capped_candidates_keep_the_scope_statistics(documents: DocumentStore,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_CANDIDATES`` only that many chunks are ranked, but n per term is still
    counted over the whole scope, so the scores of the ranked ones do not change."""
    indexed(documents, *[f"ficus {n}" for n in range(6)], "ficus water", name="a.md")
    indexed(documents, "ficus stale")
    documents.add_document(document("guide.md", "v2"), **ROOMY)  # not READY: not counted
    uncapped = {hit.chunk.text: hit.score
                for hit in documents.search_chunks("ten_1", ["prj_1"], "ficus water", 100)}
    for adapter in ("sqlite", "postgres", "mongo"):
        monkeypatch.setattr(f"vancetope_brain.store.{adapter}.documents.MAX_CANDIDATES", 3)
    capped = documents.search_chunks("ten_1", ["prj_1"], "ficus water", 100)
    assert 1 <= len(capped) <= 3 and len(uncapped) == 7  # stale chunks are cut after the cap
    assert all(hit.score == uncapped[hit.chunk.text] for hit in capped)


def test_capped_candidates_take_the_rarest_terms_chunks_first(
        documents: DocumentStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_CANDIDATES`` the chunks holding the rarer term are ranked whatever their
    place in the index: a common word's long list is what is cut."""
    indexed(documents, *[f"ficus {n}" for n in range(8)], name="a.md")
    indexed(documents, "ficus orchid", name="b.md")  # indexed last
    for adapter in ("sqlite", "postgres", "mongo"):
        monkeypatch.setattr(f"vancetope_brain.store.{adapter}.documents.MAX_CANDIDATES", 3)
    hits = documents.search_chunks("ten_1", ["prj_1"], "ficus orchid", 10)
    assert hits[0].chunk.text == "ficus orchid" and len(hits) <= 3


def test_statistics_follow_deletes_replacements_and_status_changes(
        documents: DocumentStore) -> None:
    """A document's chunks count while it is READY, at its current version only: deleting it,
    re-indexing it, or a status change of a READY document leaves the scores as if the
    chunks that left had never been written."""
    indexed(documents, "ficus water", "cactus sand", name="a.md")

    def scores() -> list[tuple[str, float]]:
        return [(hit.chunk.text, hit.score)
                for hit in documents.search_chunks("ten_1", ["prj_1"], "ficus sand", 5)]

    alone = scores()
    gone = indexed(documents, "ficus ficus sand", "ficus", name="b.md")
    assert scores() != alone
    assert documents.delete_document("ten_1", "prj_1", gone.id)
    assert scores() == alone
    again = indexed(documents, "ficus", name="c.md")
    assert documents.mark_document("ten_1", "prj_1", again.id, 1, DocumentStatus.INDEXING)
    assert scores() == alone
    assert documents.write_chunks("ten_1", "prj_1", again.id, 1, chunks(again, "pear"),
                                  pages=None)
    with_pear = scores()
    assert documents.write_chunks("ten_1", "prj_1", again.id, 1, chunks(again, "pear"),
                                  pages=None)  # READY written again: counted once
    assert scores() == with_pear
    indexed(documents, "plum", name="c.md", content="v2")  # replaced: v1's "pear" leaves
    assert [text for text, _ in scores()] == [text for text, _ in alone]
