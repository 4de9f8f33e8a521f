"""Session search: a user finds their own sessions by the words of a title or of a chat line;
every word must be there; hits come newest first with a snippet marking the words; nothing
typed is query syntax; another tenant's or another user's sessions are never found."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.store_contract.conftest import World
from vancetope_brain.models import ChatRole, ProcessStatus, Session, SessionStatus, utcnow
from vancetope_brain.models.conversation import ConversationHit
from vancetope_brain.store import LaneStore, SessionSearch, SessionStore
from vancetope_brain.store.documents import search_terms

HOSTILE = ['"budget" OR friday*', "NEAR(budget friday, 2)", "budget) AND (", "content:budget",
           "budget -friday", "^budget", "{$where: 'sleep(1000)', budget: 1}", "budget*",
           "\\\"budget\\\"", "b%u_d'g;et -- budget'; DROP TABLE chat"]


class Conversations:
    """Sessions with a chat process and committed chat lines, through the ports."""

    def __init__(self, world: World) -> None:
        self.world = world

    def session(self, *lines: str | tuple[ChatRole, str], tenant: str = "ten_1",
                user: str = "usr_1", title: str = "") -> Session:
        session = self.world.session(tenant, user, title=title)
        process = self.world.process(tenant, session.id)
        self.world.sessions.set_chat_process(tenant, session.id, process.id)
        for epoch, line in enumerate(lines, start=1):
            role, text = line if isinstance(line, tuple) else (ChatRole.USER, line)
            assert epoch == self.world.lanes.acquire_epoch(tenant, process.id).epoch
            assert self.world.lanes.commit_turn(tenant, process.id, epoch, self.world.turn(
                process, epoch, chat=[self.world.line(process, text, role=role)]))
        return self.world.sessions.get_session(tenant, session.id)


@pytest.fixture
def talk(world: World) -> Conversations:
    return Conversations(world)


@pytest.fixture
def search(backend) -> SessionSearch:  # type: ignore[no-untyped-def]
    return backend.port(SessionSearch)


def _found(hits: list[ConversationHit]) -> list[tuple[str, int | None]]:
    return [(hit.session_id, hit.seq) for hit in hits]


def _marked(hit: ConversationHit) -> list[str]:
    return [part.text for part in hit.snippet if part.match]


def test_a_line_with_every_word_is_found_with_its_place_and_the_words_marked(
        search: SessionSearch, talk: Conversations) -> None:
    first = talk.session("hello", ("assistant", "The Budget for Friday is set."),
                         title="Planning")
    talk.session("the budget alone", "friday alone")
    (hit,) = search.search_sessions("ten_1", "usr_1", "friday BUDGET")
    assert (hit.session_id, hit.process_id, hit.seq, hit.role, hit.title) == \
        (first.id, first.chat_process_id, 2, "assistant", "Planning")
    assert "".join(part.text for part in hit.snippet) == "The Budget for Friday is set."
    assert _marked(hit) == ["Budget", "Friday"]


def test_titles_come_first_then_lines_newest_first(search: SessionSearch,
                                                   talk: Conversations) -> None:
    old = talk.session("budget one", "budget two")
    titled = talk.session("nothing here", title="Budget review")
    hits = search.search_sessions("ten_1", "usr_1", "budget")
    assert _found(hits) == [(titled.id, None), (old.id, 2), (old.id, 1)]
    assert hits[0].snippet[0].match and hits[0].snippet[0].text == "Budget"
    assert _found(search.search_sessions("ten_1", "usr_1", "budget", limit=2)) == \
        [(titled.id, None), (old.id, 2)]
    assert search.search_sessions("ten_1", "usr_1", "budget", limit=0) == []


def test_case_and_latin_diacritics_do_not_matter(search: SessionSearch,
                                                 talk: Conversations) -> None:
    session = talk.session("Meet at the Café Müller")
    for query in ("cafe muller", "CAFÉ", "müller"):
        assert _found(search.search_sessions("ten_1", "usr_1", query)) == [(session.id, 1)]
    assert search.search_sessions("ten_1", "usr_1", "caf") == []  # whole words only


def test_only_what_the_user_and_arthur_said_is_searched(search: SessionSearch,
                                                        talk: Conversations) -> None:
    session = talk.session((ChatRole.TOOL, "budget tool"), (ChatRole.EVENT, "budget event"),
                           (ChatRole.ERROR, "budget error"), "my budget")
    assert _found(search.search_sessions("ten_1", "usr_1", "budget")) == [(session.id, 4)]


def test_another_tenants_and_another_users_sessions_are_never_found(
        search: SessionSearch, talk: Conversations) -> None:
    mine = talk.session("secret budget", title="secret budget")
    talk.session("secret budget", title="secret budget", user="usr_2")
    talk.session("secret budget", title="secret budget", tenant="ten_2")
    hits = search.search_sessions("ten_1", "usr_1", "secret budget")
    assert {hit.session_id for hit in hits} == {mine.id} and len(hits) == 2
    assert search.search_sessions("ten_1", "usr_3", "secret budget") == []
    assert search.search_sessions("ten_3", "usr_1", "secret budget") == []


@pytest.mark.parametrize("query", HOSTILE)
def test_query_syntax_is_only_text(search: SessionSearch, talk: Conversations,
                                   query: str) -> None:
    session = talk.session("the budget is fine", "budget friday where sleep content and near")
    for asked in (query, query + " budget"):
        words = set(search_terms(asked))
        # Found exactly where every word of the text is: operators are words or separators.
        expected = [(session.id, seq) for seq, line in
                    ((2, "budget friday where sleep content and near"), (1, "the budget is fine"))
                    if words <= set(line.split())]
        assert _found(search.search_sessions("ten_1", "usr_1", asked)) == expected
    assert _found(search.search_sessions("ten_1", "usr_1", 'NEAR(budget friday)')) == \
        [(session.id, 2)]


def test_a_query_without_words_finds_nothing(search: SessionSearch,
                                             talk: Conversations) -> None:
    talk.session("budget", title="budget")
    for query in ("", "   ", "\"*\" ()", "-- ;"):
        assert search.search_sessions("ten_1", "usr_1", query) == []


def test_a_rename_a_close_and_a_purge_are_followed(search: SessionSearch,
                                                  talk: Conversations,
                                                  sessions: SessionStore,
                                                  lanes: LaneStore, world: World) -> None:
    session = talk.session("the budget line")
    sessions.set_details("ten_1", session.id, title="Quarterly numbers")
    assert _found(search.search_sessions("ten_1", "usr_1", "quarterly")) == [(session.id, None)]
    sessions.update_session_status("ten_1", session.id, SessionStatus.CLOSED,
                                   allowed_from=frozenset(SessionStatus))
    assert search.search_sessions("ten_1", "usr_1", "budget") == []
    assert search.search_sessions("ten_1", "usr_1", "quarterly") == []

    purged = talk.session("a purged budget line")
    process = sessions.get_process("ten_1", purged.chat_process_id or "")
    world.set_status(process, ProcessStatus.CLOSED)
    assert _found(search.search_sessions("ten_1", "usr_1", "purged")) == [(purged.id, 1)]
    sessions.purge_closed_processes("usr_1", utcnow() + timedelta(seconds=1))
    assert lanes.chat_history("ten_1", process.id) == []
    assert search.search_sessions("ten_1", "usr_1", "purged") == []


def test_a_long_line_shows_a_snippet_around_its_first_match(search: SessionSearch,
                                                           talk: Conversations) -> None:
    text = " ".join(["filler"] * 40) + " the budget " + " ".join(["tail"] * 60)
    talk.session(text)
    (hit,) = search.search_sessions("ten_1", "usr_1", "budget")
    shown = "".join(part.text for part in hit.snippet)
    assert hit.snippet[0].text == "…" and hit.snippet[-1].text == "…"
    assert "the budget" in shown and len(shown) <= 162
    assert _marked(hit) == ["budget"]
