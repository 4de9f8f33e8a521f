"""``vancetope chat --find TEXT``: the user's own sessions holding the words, numbered, with
the words highlighted and the conversation's text never read as markup; picking one opens it
at the line found."""

from __future__ import annotations

import io
import uuid

from rich.console import Console

from tests.gateway.test_chat_client import Recorded
from tests.helpers import wait_for
from vancetope_brain.config import Config
from vancetope_brain.store import LaneStore
from vancetope_gateway import chat_client
from vancetope_gateway.chat_client import ChatClient, _Chat
from vancetope_gateway.chat_find import MATCH_STYLE, hit_text, pick
from vancetope_gateway.chat_view import Printer
from vancetope_gateway.discovery import Token

HIT = {"sessionId": "ses_1", "title": "[bold]Plans[/bold]", "processId": "proc_1", "seq": 7,
       "role": "assistant", "at": "2026-12-03T10:00:00Z",
       "snippet": [{"text": "…the ", "match": False}, {"text": "budget", "match": True},
                   {"text": " is [red]x[/red]\x1b[2J\nok", "match": False}]}


def test_a_hit_shows_title_place_and_snippet_as_text_with_the_words_highlighted():
    text = hit_text(3, HIT)
    assert text.plain.startswith(" 3. [bold]Plans[/bold]  · ")
    assert text.plain.endswith("· assistant, line 7\n    …the budget is [red]x[/red]\\x1b[2J ok")
    assert [text.plain[s.start:s.end] for s in text.spans if s.style == MATCH_STYLE] == \
        ["budget"]
    out = io.StringIO()
    Console(file=out, width=200).print(text)
    assert "[red]x[/red]" in out.getvalue() and "\x1b" not in out.getvalue()


def test_pick_asks_until_a_number_of_the_list_or_nothing():
    answers = iter(["9", "two", " 2 "])
    assert pick([HIT, {**HIT, "seq": 8}], lambda _: next(answers))["seq"] == 8
    assert pick([HIT], lambda _: "") is None


def test_find_lists_the_users_sessions_and_opening_one_shows_the_line_found(
        emb, served, tmp_path, capsys):
    url = f"ws://{served}/ws"
    token = emb.brain.identity.issue_token("acme", "ada", label="find")
    word = f"zq{uuid.uuid4().hex[:8]}"
    lanes = emb.brain.store.port(LaneStore)
    chat = _Chat(ChatClient(url, token), url, Token(token, "--token"), tmp_path / "s.json")
    chat.printer = Printer(view := Recorded(), "", 0, 0)
    try:
        chat.open(view, None, True)
        # The line to find, then more than the 20 lines a resume shows.
        for text in (f"the {word} budget", *(f"filler {n}" for n in range(11))):
            chat.send(text)
            wait_for(lambda text=text: [m for m in lanes.chat_history("acme", chat.pid)
                                        if m.content == f"echo: {text}"], what=text)
    finally:
        chat.client.close()
    (seq,) = [m.seq for m in lanes.chat_history("acme", chat.pid)
              if m.content == f"the {word} budget"]

    config = Config.from_env({"VANCETOPE_DATA_DIR": str(tmp_path / "data")})
    assert chat_client.run_chat(config, url=url, token=token, session_id=None, new=False,
                                find=f"BUDGET {word}") == 0
    listed = capsys.readouterr().out
    # Titled from its first message: the title first, then the lines, newest first.
    assert [line.split("  · ")[0] for line in listed.splitlines()[::2]] == \
        [f"{n:>2}. the {word} budget" for n in (1, 2, 3)]
    assert [line.rsplit(" · ", 1)[1] for line in listed.splitlines()[::2]] == \
        ["title", f"assistant, line {seq + 1}", f"user, line {seq}"]
    assert listed.splitlines()[5] == f"    the {word} budget"
    assert chat_client.run_chat(config, url=url, token=token, session_id=None, new=False,
                                find=f"{word} nowhere") == 1
    assert "no session of yours holds every word" in capsys.readouterr().out

    again = _Chat(ChatClient(url, token), url, Token(token, "--token"), tmp_path / "s.json")
    again.printer = Printer(shown := Recorded(), "", 0, 0)
    try:
        again.open(shown, chat.session_id, False, around=seq)
        at = shown.lines.index(("note", f"found, line {seq}:"))
        assert shown.lines[at + 1] == ("user", f"the {word} budget")
        assert shown.lines[at + 2] != ("assistant", f"echo: the {word} budget")  # the last 20
    finally:
        again.client.close()
