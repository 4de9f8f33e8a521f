"""The terminal client: how it prints a streamed turn, its short tool and worker lines, and
its Inbox (the pending summary, pushed items, /inbox, /answer, /dismiss)."""

from __future__ import annotations

import contextlib
import io
import threading
from xml.sax.saxutils import quoteattr

import pytest

from tests.helpers import wait_for
from vancetope_brain.errors import VancetopeError
from vancetope_brain.identity import Principal
from vancetope_brain.inbox.service import NewItem
from vancetope_brain.models.inbox import Criticality, ItemType, Outcome
from vancetope_brain.store import UserInboxStore
from vancetope_gateway import chat_client
from vancetope_gateway.chat_client import ChatClient, _Chat
from vancetope_gateway.chat_commands import command as _command
from vancetope_gateway.chat_view import PlainView, Printer, event_line, tool_line


@pytest.fixture
def terminal(emb, served):
    token = emb.brain.identity.issue_token("acme", "ada", label="terminal")
    client = ChatClient(f"ws://{served}/ws", token)
    yield client
    client.close()


def _new(emb, type_: ItemType, title: str, payload=None, **kw):
    return emb.brain.inbox.create("acme", "ada", NewItem(type=type_, title=title,
                                                         payload=payload, **kw))[0]


def test_items_are_shown_listed_answered_and_dismissed(emb, terminal):
    out = io.StringIO()
    view = PlainView(out)
    printer = Printer(view, "proc_none", 0, 0)
    summary = terminal.events.get(timeout=5)
    printer.handle(summary)
    assert summary["type"] == "inbox-pending-summary"

    decision = _new(emb, ItemType.DECISION, "Which region?",
                    {"options": [{"value": "eu", "label": "EU"}, {"value": "us", "label": "US"}]},
                    criticality=Criticality.CRITICAL)
    approval = _new(emb, ItemType.APPROVAL, "Ship it?")
    note = _new(emb, ItemType.OUTPUT_TEXT, "Weekly report")
    for _ in range(3):
        printer.handle(terminal.events.get(timeout=5))
    shown = out.getvalue()
    assert f"(inbox) {decision.id}  DECISION  CRITICAL  Which region?  [eu | us]" in shown
    assert f"(inbox) {approval.id}  APPROVAL  NORMAL  Ship it?" in shown

    _command(terminal, "/inbox", view)
    assert f"{note.id}  OUTPUT_TEXT  NORMAL  Weekly report" in out.getvalue()
    _command(terminal, f"/answer {decision.id} us", view)
    _command(terminal, f"/answer {approval.id} ?which build", view)
    _command(terminal, f"/dismiss {note.id}", view)
    store = emb.brain.store
    assert store.port(UserInboxStore).get_inbox_item("acme", decision.id).answer.value == {"chosen": "us"}
    answer = store.port(UserInboxStore).get_inbox_item("acme", approval.id).answer
    assert (answer.outcome.value, answer.reason) == ("INSUFFICIENT_INFO", "which build")
    assert store.port(UserInboxStore).get_inbox_item("acme", note.id).status.value == "DISMISSED"
    with pytest.raises(VancetopeError, match="yes or no"):
        _command(terminal, f"/answer {_new(emb, ItemType.APPROVAL, 'Again?').id} maybe", view)
    _command(terminal, "/help", view)
    assert "/answer ITEM VALUE" in out.getvalue()
    _command(terminal, "/frobnicate", view)
    assert out.getvalue().endswith("(unknown command /frobnicate; /help lists the commands)\n")


def test_what_happens_to_an_item_elsewhere_is_shown_as_one_line(emb, terminal):
    """Delegated away or to me, answered in another client, answered automatically,
    dismissed: each ``inbox-item-updated`` is one short line."""
    with contextlib.suppress(Exception):
        emb.brain.identity.create_user("acme", "bob", "bob")
    ada, bob = Principal("acme", "ada"), Principal("acme", "bob")
    out = io.StringIO()
    printer = Printer(PlainView(out), "proc_none", 0, 0, me="ada")
    handed = _new(emb, ItemType.APPROVAL, "Ship it?")
    emb.brain.inbox.delegate(ada, handed.id, "bob")
    asked = emb.brain.inbox.create("acme", "bob", NewItem(
        type=ItemType.DECISION, title="Which region?", assigned_to="bob",
        payload={"options": [{"value": "eu", "label": "EU"}, {"value": "us", "label": "US"}]}))[0]
    emb.brain.inbox.delegate(bob, asked.id, "ada")
    emb.brain.inbox.answer(ada, asked.id, Outcome.DECIDED, value={"chosen": "eu"})
    notes = _new(emb, ItemType.FEEDBACK, "Notes?")
    emb.brain.inbox.answer(ada, notes.id, Outcome.UNDECIDABLE, reason="not my area")
    _new(emb, ItemType.APPROVAL, "Use the cache?", {"default": "yes"},
         criticality=Criticality.LOW)
    gone = _new(emb, ItemType.OUTPUT_TEXT, "Weekly report")
    emb.brain.inbox.dismiss(ada, gone.id)

    def shown() -> str:
        while not terminal.events.empty():
            printer.handle(terminal.events.get_nowait())
        return out.getvalue()

    wait_for(lambda: "(inbox) dismissed by you: Weekly report\n" in shown(), timeout=10)
    lines = shown().splitlines()
    for line in ["(inbox) delegated to bob by you: Ship it?",
                 "(inbox) delegated to you by bob: Which region?",
                 "(inbox) answered by you: Which region? — eu",
                 "(inbox) answered by you: Notes? — cannot decide: not my area",
                 "(inbox) answered with its default (LOW): Use the cache? — approved"]:
        assert line in lines, lines
    # Delegated to me, it is new to me too.
    assert f"(inbox) {asked.id}  DECISION  NORMAL  Which region?  [eu | us]" in lines


def _event(seq: int, type_: str, data: dict) -> dict:
    return {"type": "event", "data": {"seq": seq, "processId": "proc_1", "type": type_,
                                      "data": data}}


class Recorded:
    """A view that records its lines and the previews it was asked to show."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.previews: list[str] = []

    def line(self, kind: str, text: str) -> None:
        self.lines.append((kind, text))

    def preview(self, text: str) -> None:
        self.previews.append(text)


TOOL = ('process_create({"recipe": "marvin", "name": "demo-research", "goal": "research tea"})'
        ' → success: {"result": {"processId": "proc_9", "name": "demo-research", "status": '
        '"STARTING", "engine": "marvin", "recipe": "marvin", "goal": "research tea"}}')
TITLE = 'Ship "it" & go?'
REPORT = ('<process-event sourceProcessId="proc_9" type="done">**Report on “tea”** (demo).\n'
          '- **Gather the facts** — found them &amp; more</process-event>')


def test_a_turn_streams_into_the_preview_and_its_lines_print_in_chat_order():
    """Tokens only feed the preview; the committed lines print in their order — the tool
    line before the reply — and the reply, printed whole, clears the preview. The user's
    own typed line is not printed again."""
    view = Recorded()
    printer = Printer(view, "proc_1", 0, 0)
    printer.typed.append("start w")
    printer.expect_answer("msg_1")
    for frame in (_event(1, "token", {"text": "Started "}), _event(2, "token", {"text": "w."}),
                  _event(3, "chat-message", {"seq": 4, "role": "user", "content": "start w",
                                             "sourceMessageId": "msg_1"}),
                  _event(4, "chat-message", {"seq": 5, "role": "tool", "content": TOOL,
                                             "meta": {"toolName": "process_create",
                                                      "status": "success"}}),
                  _event(5, "chat-message", {"seq": 6, "role": "assistant",
                                             "content": "Started w."})):
        printer.handle(frame)
    assert view.previews == ["Started ", "Started w.", ""]
    assert view.lines == [("tool", "⚙ process_create demo-research (marvin) → STARTING"),
                          ("assistant", "Started w.")]
    assert not printer.waiting
    # The worker's report later uses the name process_create gave it; /details has it whole.
    printer.handle(_event(6, "chat-message", {"seq": 7, "role": "event", "content": REPORT}))
    assert view.lines[-1] == ("event", "◆ worker demo-research DONE: Report on “tea” (demo).")
    assert "found them & more" in printer.details


def test_an_attempt_that_was_reset_never_shows_as_the_answer():
    view = Recorded()
    printer = Printer(view, "proc_1", 0, 0)
    for frame in (_event(1, "token", {"text": "Reply 0"}),
                  _event(2, "stream-reset", {"reason": "respond-required"}),
                  _event(3, "token", {"text": "Reply 1"}),
                  _event(4, "chat-message", {"seq": 1, "role": "assistant",
                                             "content": "Reply 1"})):
        printer.handle(frame)
    assert view.previews == ["Reply 0", "", "Reply 1", ""]
    assert view.lines == [("assistant", "Reply 1")]


@pytest.mark.parametrize(("line", "shown"), [
    ({"content": TOOL, "meta": {"toolName": "process_create", "status": "success"}},
     "⚙ process_create demo-research (marvin) → STARTING"),
    ({"content": 'process_stop({"processId": "proc_9"}) → error: {"error": "no such process: '
                 'proc_9"}', "meta": {"toolName": "process_stop", "status": "error"}},
     "⚙ process_stop processId=proc_9 → error: no such process: proc_9"),
    ({"content": 'recipe_list({}) → success: {"result": [{"name": "ford"}', "meta": {
        "toolName": "recipe_list", "status": "success"}},  # a result cut at 2,000 characters
     "⚙ recipe_list → success"),
    ({"content": 'inbox_post({"type": "OUTPUT_IMAGE", "title": "A plot", "attachment": '
                 '{"attachment_id": "att_0123456789abcdef", "filename": "plot.png", '
                 '"mime_type": "image/png", "size_bytes": 2150}}) → success: {"result": '
                 '{"itemId": "item_1", "status": "PENDING"}}',
      "meta": {"toolName": "inbox_post", "status": "success"}},
     "⚙ inbox_post OUTPUT_IMAGE “A plot” + plot.png (image/png, 2.1 KiB) → PENDING"),
])
def test_a_tool_line_is_one_short_line(line, shown):
    assert tool_line(line) == shown


@pytest.mark.parametrize(("content", "shown"), [
    (REPORT, "◆ worker w1 DONE: Report on “tea” (demo)."),
    ('<process-event sourceProcessId="proc_x" type="blocked">Which region?<payload>{}</payload>'
     '</process-event>', "◆ worker proc_x BLOCKED: Which region?"),
    ('<process-event sourceProcessId="proc_y" sourceName=\'a "b" &amp; c\' type="done">ok'
     '</process-event>', '◆ worker a "b" & c DONE: ok'),
    (f'<inbox-answer itemId="inb_1" type="APPROVAL" title={quoteattr(TITLE)}>{{"approved": '
     'true}</inbox-answer>', '✉ answered: Ship "it" & go? — {"approved": true}'),
    ('<inbox-answer itemId="inb_1" type="APPROVAL" title="Ship?">{"outcome": "DECIDED", '
     '"value": {"approved": false}, "reason": null, "answeredBy": "ada"}</inbox-answer>',
     "✉ answered: Ship? — declined"),
    ('<tool-result toolCallId="c1" tool="mcp_search" status="success">{"hits": 3}</tool-result>',
     "⚙ mcp_search → success (later result)"),
    ("<process-event " + "x" * 500, "<process-event " + "x" * 84 + "…"),
])
def test_an_event_line_is_one_short_line(content, shown):
    assert event_line(content, {"proc_9": "w1"}) == shown


def test_an_answer_given_here_is_said_once_not_again_by_its_update(emb, terminal):
    out = io.StringIO()
    chat = _Chat(terminal, "ws://unused", "token", emb.brain.config.data_dir / "unused.json")
    chat.printer = Printer(view := PlainView(out), "proc_none", 0, 0, me="ada")
    mine = _new(emb, ItemType.APPROVAL, "Answered here?")
    elsewhere = _new(emb, ItemType.APPROVAL, "Answered elsewhere?")
    chat_client._run_command(chat, f"/answer {mine.id} yes", view)
    emb.brain.inbox.answer(Principal("acme", "ada"), elsewhere.id, Outcome.DECIDED,
                           value={"approved": False})

    def shown() -> str:
        while not terminal.events.empty():
            chat.printer.handle(terminal.events.get_nowait())
        return out.getvalue()

    wait_for(lambda: "Answered elsewhere? — declined" in shown(), timeout=10)
    assert "(answered)" in shown() and "Answered here? — approved" not in shown()
    assert not chat.printer.acting


def test_a_welcome_committed_after_the_users_message_was_sent_is_not_its_answer():
    out = io.StringIO()
    printer = Printer(PlainView(out), "proc_1", 0, 0)
    printer.typed.append("hello")
    printer.expect_answer("msg_1")
    printer.handle(_event(1, "chat-message", {"seq": 1, "role": "assistant", "content": "Hi."}))
    assert printer.waiting
    printer.handle(_event(2, "chat-message", {"seq": 2, "role": "user", "content": "hello",
                                              "sourceMessageId": "msg_1"}))
    printer.handle(_event(3, "chat-message", {"seq": 3, "role": "assistant",
                                              "content": "echo: hello"}))
    assert out.getvalue() == "assistant> Hi.\nassistant> echo: hello\n"
    assert not printer.waiting


def test_an_events_gap_mid_answer_reloads_the_chat_and_prints_what_was_missed():
    """The stream broke off in the middle of a streamed answer (a Redis restart): the printer
    drops the preview, re-reads the chat, prints the lines it had not shown (not the user's
    own, already on screen) — the whole answer among them — and stops waiting."""
    out = io.StringIO()
    history = [{"seq": 1, "role": "assistant", "content": "Hi."},
               {"seq": 2, "role": "user", "content": "tell me", "sourceMessageId": "msg_1"},
               {"seq": 3, "role": "assistant", "content": "A long story."}]
    printer = Printer(PlainView(out), "proc_1", 0, 1, history=lambda: history)
    printer.typed.append("tell me")
    printer.expect_answer("msg_1")
    printer.handle(_event(10, "token", {"text": "A lo"}))
    printer.handle({"type": "events-gap", "data": {"sessionId": "ses_1", "requestedAfter": 10,
                                                   "firstAvailable": 0}})
    assert out.getvalue() == ("(some events were lost; reloading the "
                              "conversation)\nassistant> A long story.\n")
    assert not printer.waiting
    assert printer.last_seq == 0  # a later resume replays the new log from its start
    # The lost events, published again into the new log later, are not printed twice.
    printer.handle(_event(7, "chat-message", {**history[2], "processId": "proc_1"}))
    assert out.getvalue().count("A long story.") == 1


def test_a_server_that_stays_away_is_said_so(monkeypatch, tmp_path):
    monkeypatch.setattr(chat_client, "RECONNECT_DELAYS", (0.01, 0.01))
    class Lost:
        close_reason = "1006 connection lost"

    chat = _Chat(Lost(), "ws://127.0.0.1:9/ws", "vt_x", tmp_path / "state.json")  # type: ignore[arg-type]
    chat.printer = Printer(view := Recorded(), "proc_1", 0, 0)
    assert not chat.reconnect(threading.Event())
    assert view.lines[0] == ("note", "lost the connection to ws://127.0.0.1:9/ws (1006 "
                                     "connection lost); reconnecting…")
    assert view.lines[-1][1].startswith("cannot reach the server (cannot reach ws://127.0.0.1:9")
    assert view.lines[-1][1].endswith("run `vancetope chat` again when it is back")


def test_a_server_back_on_another_port_is_found_again(monkeypatch, emb, served, tmp_path):
    """The connection was to a server now gone; where the server is now (what ``serve``
    recorded) is looked up on each attempt, and the session resumes there."""
    monkeypatch.setattr(chat_client, "RECONNECT_DELAYS", (0.01, 0.01))
    token = emb.brain.identity.issue_token("acme", "ada", label="moved")
    first = ChatClient(f"ws://{served}/ws", token)
    chat = _Chat(first, "ws://127.0.0.1:9/ws", token, tmp_path / "state.json",
                 find_url=lambda: f"ws://{served}/ws")
    chat.printer = Printer(view := Recorded(), "", 0, 0)
    chat.open(view, None, True)
    first.close()
    try:
        assert chat.reconnect(threading.Event())
        assert view.lines[-1] == ("note", f"reconnected to ws://{served}/ws")
        assert chat.url == f"ws://{served}/ws" and chat.client.connected
    finally:
        chat.client.close()


def test_a_terminal_session_is_titled_from_its_first_message_and_listed(emb, served, tmp_path):
    """``chat`` creates its session untitled (not "terminal chat"), so the server titles it
    from the first message; ``/sessions`` lists the user's sessions with their titles."""
    token = emb.brain.identity.issue_token("acme", "ada", label="titles")
    chat = _Chat(ChatClient(f"ws://{served}/ws", token), f"ws://{served}/ws", token,
                 tmp_path / "state.json")
    chat.printer = Printer(view := Recorded(), "", 0, 0)
    try:
        chat.open(view, None, True)
        chat.send("What is   green tea?")
        out = io.StringIO()
        _command(chat.client, "/sessions", PlainView(out))
        assert f"{chat.session_id}  OPEN       What is green tea?\n" in out.getvalue()
        other = ChatClient(f"ws://{served}/ws", token)
        try:
            resumed = _Chat(other, f"ws://{served}/ws", token, tmp_path / "state.json")
            resumed.printer = Printer(again := Recorded(), "", 0, 0)
            resumed.open(again, chat.session_id, False)
            assert ("note", f"resumed session {chat.session_id} “What is green tea?”") in \
                again.lines
        finally:
            other.close()
    finally:
        chat.client.close()
