"""Memory search: lexical, over several scopes at once, each hit with its scope and a score in
0..1 that is the same on every backend and depends only on the scopes asked; free text is
never query syntax."""

from __future__ import annotations

import pytest

from tests.store_contract.memory._entries import entry, project
from vancetope_brain.models.memory import MemoryScope, ScopeRef
from vancetope_brain.store import MemoryStore

HOSTILE = ['"launch" OR friday*', 'NEAR(launch friday, 2)', "launch) AND (", "^launch$ .* [a-",
           "{$where: 'sleep(1000)', launch: 1}", "launch:* -friday", "\\\"launch\\\"",
           "l%a_u'n;ch -- launch'; DROP TABLE memory_entries"]


def test_one_entry_with_the_one_term_scores_as_bm25_says(memory: MemoryStore) -> None:
    note = entry("launch")
    memory.record(note)
    (hit,) = memory.search_memory("ten_a", [project()], "launch")
    # One entry of average length, the term once: it reaches weight × 1 of the query's
    # best, weight × (k1 + 1): s = 1 / 2.2, scored 2s / (1 + s) (store/ranking.py) — the
    # same number on every backend, whatever the scope's size.
    assert hit.entry == note
    assert hit.score == pytest.approx(2 / 3.2)


def test_hits_are_ranked_and_say_their_scope(memory: MemoryStore) -> None:
    both = entry("The launch moved to Friday after the review.", scope=MemoryScope.SESSION)
    one = entry("The launch checklist is in the wiki.", minute=1)
    neither = entry("Lunch is at noon.", minute=2)
    other_scope = entry("launch Friday launch Friday", project="prj_2")
    for note in (both, one, neither, other_scope):
        memory.record(note)
    scopes = [ScopeRef(MemoryScope.SESSION, "ses_1"), project()]
    hits = memory.search_memory("ten_a", scopes, "launch Friday")
    assert [hit.entry for hit in hits] == [both, one]
    assert [hit.entry.scope_ref for hit in hits] == scopes
    assert 1 >= hits[0].score > hits[1].score > 0
    assert memory.search_memory("ten_a", scopes, "launch Friday", limit=1)[0].entry == both
    assert memory.search_memory("ten_a", scopes, "launch", limit=0) == []


def test_scores_depend_only_on_the_scopes_asked(memory: MemoryStore) -> None:
    memory.record(entry("the launch moved to Friday"))
    memory.record(entry("the review is on Monday", minute=1))
    before = [h.score for h in memory.search_memory("ten_a", [project()], "launch review")]
    for i in range(5):  # the same terms in another tenant and in another scope
        memory.record(entry(f"launch review {i}", tenant="ten_b"))
        memory.record(entry(f"launch review {i}", scope=MemoryScope.SESSION))
    assert [h.score for h in memory.search_memory("ten_a", [project()], "launch review")] == \
        before


@pytest.mark.parametrize("query", HOSTILE)
def test_query_syntax_is_only_text(memory: MemoryStore, query: str) -> None:
    note = entry("launch on friday")
    memory.record(note)
    assert [hit.entry for hit in memory.search_memory("ten_a", [project()], query)] == [note]


def test_an_entry_that_looks_like_syntax_is_found_by_its_words(memory: MemoryStore) -> None:
    notes = [entry(text, minute=i) for i, text in enumerate(HOSTILE)]
    for note in notes:
        memory.record(note)
    hits = memory.search_memory("ten_a", [project()], "sleep")
    assert [hit.entry for hit in hits] == [notes[4]]
    assert len(memory.search_memory("ten_a", [project()], "launch", limit=100)) == len(HOSTILE)


def test_a_query_without_terms_finds_nothing(memory: MemoryStore) -> None:
    memory.record(entry("launch"))
    for query in ("", "   ", '"" * () -- ;', "_" * 10, "x" * 65):
        assert memory.search_memory("ten_a", [project()], query) == []


def test_tags_are_searched_and_terms_are_folded(memory: MemoryStore) -> None:
    tagged = entry("the plan", tags=["Roadmap"])
    folded = entry("STRASSE ＬＡＵＮＣＨ", minute=1)
    memory.record(tagged)
    memory.record(folded)
    assert [h.entry for h in memory.search_memory("ten_a", [project()], "roadmap")] == [tagged]
    assert [h.entry for h in memory.search_memory("ten_a", [project()], "straße launch")] == \
        [folded]


def test_equal_scores_put_the_newest_first(memory: MemoryStore) -> None:
    notes = [entry("launch", minute=i) for i in range(3)]
    for note in notes:
        memory.record(note)
    hits = memory.search_memory("ten_a", [project()], "launch")
    assert [hit.entry for hit in hits] == notes[::-1]
    assert len({hit.score for hit in hits}) == 1
