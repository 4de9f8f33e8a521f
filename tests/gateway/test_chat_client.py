"""The terminal client: how it prints a streamed turn, its short tool and worker lines, and
its Inbox (the pending summary, pushed items, /inbox, /details, /answer, /dismiss); what
``/details`` shows; that no worker text drives the terminal; lines typed while the
connection is down; and what it says when the server refuses or revokes its token."""

from __future__ import annotations

import contextlib
import io
import re
import threading
import urllib.request
import uuid
from datetime import timedelta
from xml.sax.saxutils import quoteattr

import pytest
from rich.console import Console

from tests.conftest import Embedded
from tests.helpers import wait_for
from vancetope_brain.config import Config
from vancetope_brain.errors import Unauthorized, VancetopeError
from vancetope_brain.identity import Principal
from vancetope_brain.models import Session, SessionStatus, new_id, utcnow
from vancetope_brain.models.inbox import Criticality, ItemType, NewItem, Outcome
from vancetope_brain.store import LaneStore, SessionStore, UserInboxStore
from vancetope_gateway import chat_client
from vancetope_gateway.chat_client import ChatClient, _Chat
from vancetope_gateway.chat_commands import SESSIONS_PAGE
from vancetope_gateway.chat_commands import command as _command
from vancetope_gateway.chat_details import line_details
from vancetope_gateway.chat_view import PlainView, Printer, TerminalView, event_line, tool_line
from vancetope_gateway.discovery import Token
from vancetope_gateway.protocol import REVOKED, REVOKED_MESSAGE

RECHECK = 0.5


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """The module's embedded brain: a revoked token closes its sockets within ``RECHECK``."""
    emb = Embedded(tmp_path_factory.mktemp("chat"), VANCETOPE_TOKEN_RECHECK=str(RECHECK))
    yield emb
    emb.stop()


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
    assert "found them & more" in line_details(printer.detailed, printer.names)


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
    ('<process-event sourceProcessId="proc_v" type="done">## Strategy draft-review: completed\n\n'
     "Phase finalize passed its gate.</process-event>",
     "◆ worker proc_v DONE: Strategy draft-review: completed"),
    ('<process-event sourceProcessId="proc_y" sourceName=\'a "b" &amp; c\' type="done">ok'
     '</process-event>', '◆ worker a "b" & c DONE: ok'),
    (f'<inbox-answer itemId="inb_1" type="APPROVAL" title={quoteattr(TITLE)}>{{"approved": '
     'true}</inbox-answer>', '✉ answered: Ship "it" & go? — approved'),
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
    chat = _Chat(terminal, "ws://unused", Token("unused", "--token"),
                 emb.brain.config.data_dir / "unused.json")
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

    chat = _Chat(Lost(), "ws://127.0.0.1:9/ws", Token("vt_x", "--token"), tmp_path / "state.json")  # type: ignore[arg-type]
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
    chat = _Chat(first, "ws://127.0.0.1:9/ws", Token(token, "--token"), tmp_path / "state.json",
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


def _msg(seq: int, role: str, content: str, **extra) -> dict:
    return _event(seq, "chat-message", {"seq": seq, "role": role, "content": content, **extra})


def test_a_piped_message_comes_before_the_inbox_item_it_caused():
    """A turn's item is pushed as its tool posts it, before the turn commits the user's line:
    the transcript shows the user's line first, then the item, the tool line and the reply."""
    out = io.StringIO()
    printer = Printer(PlainView(out), "proc_1", 0, 0)
    printer.expect_answer("msg_1")
    item = {"id": "item_1", "type": "APPROVAL", "criticality": "NORMAL", "title": "Ship it?",
            "payload": {}}
    for frame in ({"type": "inbox-item-added", "data": {"item": item}},
                  _msg(1, "user", "ask me for approval", sourceMessageId="msg_1"),
                  _msg(2, "tool", 'inbox_post({"type": "APPROVAL", "title": "Ship it?"}) → '
                                  'success: {"result": {"itemId": "item_1", "status": "PENDING"}}',
                       meta={"toolName": "inbox_post", "status": "success"}),
                  _msg(3, "assistant", "I put an item into your Inbox.")):
        printer.handle(frame)
    assert out.getvalue().splitlines() == [
        "you> ask me for approval",
        "(inbox) item_1  APPROVAL  NORMAL  Ship it?",
        "⚙ inbox_post APPROVAL “Ship it?” → PENDING",
        "assistant> I put an item into your Inbox."]
    assert not printer.waiting and not printer.held


def _chat_on(emb, served, tmp_path, view) -> _Chat:
    token = emb.brain.identity.issue_token("acme", "ada", label="details")
    chat = _Chat(ChatClient(f"ws://{served}/ws", token), f"ws://{served}/ws",
                 Token(token, "--token"), tmp_path / "state.json",
                 find_url=lambda: f"ws://{served}/ws")
    chat.printer = Printer(view, "", 0, 0, me="ada")
    chat.open(view, None, True)
    return chat


def test_details_of_an_item_show_its_text_what_it_asks_and_how_to_answer(emb, served,
                                                                         tmp_path):
    """``/details ITEM`` shows that item — a worker's draft is read before it is approved."""
    out = io.StringIO()
    chat = _chat_on(emb, served, tmp_path, PlainView(out))
    draft = _new(emb, ItemType.APPROVAL, "Approve the draft?",
                 body="**Draft:** green tea, *gently* steeped.", payload={"default": "no"})
    region = _new(emb, ItemType.DECISION, "Which region?", payload={
        "options": [{"value": "eu", "label": "EU", "description": "Frankfurt"},
                    {"value": "us", "label": "US"}], "default": "eu", "allowFreeText": True})
    try:
        chat_client._run_command(chat, f"/details {draft.id}", chat.printer.view)
        chat_client._run_command(chat, f"/details {region.id}", chat.printer.view)
        chat_client._run_command(chat, "/details item_0000000000000000", chat.printer.view)
    finally:
        chat.client.close()
    shown = out.getvalue()
    assert "**✉ Approve the draft?**\n\nAPPROVAL · NORMAL · PENDING" in shown
    assert "**Draft:** green tea, *gently* steeped." in shown
    assert "Default: no" in shown
    assert f"Answer with `/answer {draft.id} yes` or `/answer {draft.id} no`" in shown
    assert "- **eu** — EU: Frankfurt (default)\n- **us** — US\n- or an answer in your own words" \
        in shown
    assert "(not_found: " in shown  # an unknown id is said so


def test_an_attachment_opens_from_the_link_details_prints(emb, served, tmp_path):
    """The signed link names the server's configured address; the terminal prints it at the
    address it reached the server at, on a line of its own, and the link opens the file."""
    png = b"\x89PNG\r\n\x1a\n a plot"
    meta = emb.brain.inbox.attach("acme", png, "plot.png", "image/png")
    image = _new(emb, ItemType.OUTPUT_IMAGE, "A plot", payload={
        "attachmentId": meta["id"], "mimeType": "image/png", "caption": "Sales by month"})
    out = io.StringIO()
    chat = _chat_on(emb, served, tmp_path, PlainView(out))
    try:
        chat_client._run_command(chat, f"/details {image.id}", chat.printer.view)
    finally:
        chat.client.close()
    shown = out.getvalue().splitlines()
    assert "Sales by month" in shown
    assert "Open the attachment (image/png) with the link below; it works for a few minutes " \
           f"(`/details {image.id}` gives a new one)." in shown
    link = shown[-1]
    assert link.startswith(f"http://{served}/attachments/acme/{meta['id']}?exp=")
    with urllib.request.urlopen(link, timeout=5) as got:
        assert (got.status, got.read()) == (200, png)


REPORT_WITH_PAYLOAD = (
    '<process-event sourceProcessId="proc_9" sourceName="demo-strategy" type="blocked">'
    'Approve the draft for “tea”?\n<payload>{&quot;itemId&quot;: &quot;item_7&quot;, '
    '&quot;itemType&quot;: &quot;APPROVAL&quot;, &quot;phase&quot;: &quot;draft&quot;}</payload>'
    '</process-event>').replace("&quot;", '"')


@pytest.mark.parametrize(("line", "shown"), [
    ({"role": "event", "content": REPORT_WITH_PAYLOAD},
     "**◆ worker demo-strategy: blocked**\n\nApprove the draft for “tea”?\n\nData:\n\n"
     "- **item id**: item_7\n- **item type**: APPROVAL\n- **phase**: draft\n\n"
     "`/details item_7` shows the Inbox item."),
    ({"role": "event", "content": REPORT},
     "**◆ worker w1: done**\n\n**Report on “tea”** (demo).\n"
     "- **Gather the facts** — found them & more"),
    ({"role": "event", "content": '<process-event sourceProcessId="proc_9" type="done">Done.'
                                  '\n<payload>{"phases": {"draft": {"status": "done", "answer": '
                                  '{"outcome": "DECIDED", "value": {"approved": true}, "reason": '
                                  'null, "answeredBy": "ada"}}}}</payload></process-event>'},
     "**◆ worker w1: done**\n\nDone.\n\nData:\n\n- **phases**:\n  - **draft**:\n"
     "    - **status**: done\n    - **answer**: approved (by ada)"),
    ({"role": "event", "content": '<inbox-answer itemId="item_3" type="APPROVAL" title="Ship?">'
                                  '{"outcome": "DECIDED", "value": {"approved": false}, '
                                  '"reason": null, "answeredBy": "ada"}</inbox-answer>'},
     "**✉ answered: Ship?** (APPROVAL, item_3)\n\n- **answer**: declined\n- **by**: ada"),
    ({"role": "tool", "content": TOOL, "meta": {"toolName": "process_create",
                                                 "status": "success"}},
     "**⚙ process_create → success**\n\nArguments:\n\n- **recipe**: marvin\n"
     "- **name**: demo-research\n- **goal**: research tea\n\nResult:\n\n"
     "- **process id**: proc_9\n- **name**: demo-research\n- **status**: STARTING\n"
     "- **engine**: marvin\n- **recipe**: marvin\n- **goal**: research tea"),
])
def test_details_of_a_report_or_a_tool_call_read_as_text_not_xml_or_json(line, shown):
    """``/details`` (the last tool or worker line) reads as a person reads it: a worker's
    report as its text with its data as a list, an answer as the terminal says answers, a
    tool call's arguments and result as lists — no ``<process-event>``, no JSON."""
    out = io.StringIO()
    chat = _Chat(None, "ws://unused", Token("unused", "--token"), None)  # type: ignore[arg-type]
    chat.printer = printer = Printer(PlainView(out), "proc_1", 0, 0)
    printer.names["proc_9"] = "w1"
    printer.show({"seq": 1, **line})
    out.truncate(0)
    out.seek(0)
    chat_client._run_command(chat, "/details", printer.view)
    assert out.getvalue() == shown + "\n"
    assert "<" not in out.getvalue() and '{"' not in out.getvalue()


HOSTILE = "Done [bold red]now[/bold red] \x1b]0;pwned\x07\x1b[2J\x1b[31mred\r\x9b2J"


@pytest.mark.parametrize("kind", ["assistant", "event", "tool", "details", "inbox", "note",
                                  "user", "error"])
def test_worker_text_never_drives_the_terminal(kind):
    """Whatever a worker or a model writes is shown, never read as rich markup or sent to the
    terminal as an escape sequence (a title change, a cleared screen, a fake colour)."""
    out = io.StringIO()
    view = TerminalView(Console(file=out, force_terminal=True, width=200), lambda: None)
    view.line(kind, HOSTILE)
    PlainView(plain := io.StringIO()).line(kind, HOSTILE)
    for shown in (out.getvalue(), plain.getvalue()):
        assert "[bold red]now[/bold red]" in shown
        assert not re.search(r"\x1b\]|\x1b\[2J|\x1b\[31m|\x07|\r|\x9b", shown), repr(shown)
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in shown  # shown, inert
    view.preview(HOSTILE)
    assert not re.search(r"\x1b\]|\x1b\[2J|\x1b\[31m|\x07|\r|\x9b",
                         view.rendered_preview(200, 6))


def test_a_streaming_reply_is_previewed_as_rendered_markdown():
    """The preview above the prompt shows the partial reply as the transcript will (bold, a
    bullet), not its raw ``**`` and ``- ``; its newest lines, at the terminal's width."""
    view = TerminalView(Console(file=io.StringIO(), force_terminal=True), lambda: None)
    view.preview("**Report on tea**\n\n- **Gather the facts** — found them\n- **Weigh the")
    shown = view.rendered_preview(60, 6)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown)
    assert "\x1b[1m" in shown  # bold
    assert "**" not in plain and "- " not in plain  # the open ``**`` too
    assert [line.rstrip() for line in plain.splitlines()] == [
        "assistant ▸", "Report on tea", "", " • Gather the facts — found them", " • Weigh the"]
    assert all(len(line) <= 60 for line in plain.splitlines())
    for partial in ("Run `vancetope ch", "- **Gather ", "- **Gather the facts** and **"):
        view.preview(partial)
        assert not re.search(r"[`*]", re.sub(r"\x1b\[[0-9;]*m", "", view.rendered_preview(
            60, 6))), partial
    view.preview("\n".join(f"- item {n}" for n in range(20)))
    assert [line.rstrip() for line in re.sub(r"\x1b\[[0-9;]*m", "", view.rendered_preview(
        60, 6)).splitlines()] == [f" • item {n}" for n in range(14, 20)]


def test_a_line_typed_while_the_connection_is_down_is_sent_after_the_reconnect(
        monkeypatch, emb, served, tmp_path):
    """It waits (and says so), is sent once the connection is back, once even when the
    server had stored it before its reply was lost; the queue is bounded."""
    monkeypatch.setattr(chat_client, "RECONNECT_DELAYS", (0.01, 0.01))
    monkeypatch.setattr(chat_client, "UNSENT_LINES", 2)
    chat = _chat_on(emb, served, tmp_path, view := Recorded())
    chat.client.close()
    wait_for(lambda: not chat.client.connected, what="the connection to close")
    chat.say("typed while down")
    assert view.lines[-1] == ("note", "not connected: the line waits and is sent once the "
                                      "connection is back")
    chat.say("and another")
    with pytest.raises(VancetopeError, match="not connected, and 2 lines wait to be sent"):
        chat.say("one too many")
    # The server stored the second before its reply was lost: the resend stores nothing new.
    other = ChatClient(f"ws://{served}/ws", chat.token.secret)
    try:
        other.request("session-resume", sessionId=chat.session_id, lastSeq=0,
                      fingerprint=chat_client.fingerprint())
        other.request("process-steer", targetThinkProcessId=chat.pid, content="and another",
                      idempotencyKey=chat.unsent[1][1])
    finally:
        other.close()
    try:
        assert chat.lost(threading.Event())
        assert view.lines[-2:] == [
            ("note", "reconnected"),
            ("note", "sent 2 lines typed while the connection was down")]
        assert not chat.unsent
        emb.worker.join()
        said = [m.content for m in emb.brain.store.port(LaneStore).chat_history("acme", chat.pid)
                if m.role.value == "user"]
        assert said == ["and another", "typed while down"]  # once each
    finally:
        chat.client.close()


def test_a_revoked_token_is_said_so_not_that_the_server_is_away(emb, served, tmp_path):
    """The gateway closes a revoked token's socket with 1008 ``token revoked``; the client
    does not try to reconnect with it, says what happened and what to do, and names the
    lines it could not send."""
    assert (REVOKED, REVOKED_MESSAGE) == chat_client.REVOKED
    record, secret = emb.brain.identity.create_token("acme", "ada", "doomed")
    view = Recorded()
    chat = _Chat(ChatClient(f"ws://{served}/ws", secret), f"ws://{served}/ws",
                 Token(secret, "VANCETOPE_TOKEN", tmp_path / "token"), tmp_path / "state.json",
                 find_url=lambda: f"ws://{served}/ws")
    chat.printer = Printer(view, "", 0, 0, me="ada")
    chat.open(view, None, True)
    emb.brain.identity.revoke_token("acme", record.id)
    wait_for(lambda: not chat.client.connected, timeout=10 * RECHECK,
             what="the revoked token's socket to close")
    chat.unsent.append(("typed too late", "k1"))
    assert not chat.lost(threading.Event())
    assert view.lines[-2:] == [
        ("note", "your token was revoked (the server closed the connection: 1008 token "
                 "revoked); the token comes from the VANCETOPE_TOKEN variable: replace it, or "
                 f"unset it to use the local user's token in {tmp_path / 'token'}"),
        ("note", "not sent: “typed too late”")]
    # Refused at a reconnect (revoked while the server was away): said so too.
    chat.client.close()
    chat.reconnect(threading.Event())
    assert view.lines[-1] == (
        "note", f"the server at ws://{served}/ws refused the token (HTTP 401: unknown or "
                "revoked); the token comes from the VANCETOPE_TOKEN variable: check or "
                f"replace it, or unset it to use the local user's token in {tmp_path / 'token'}")


@pytest.mark.parametrize(("source", "advice"), [
    ("option", "check the token passed with --token"),
    ("env", "the token comes from the VANCETOPE_TOKEN variable: check or replace it, or unset "
            "it to use the local user's token in {data}/token"),
    ("file", "the token comes from {data}/token, which `vancetope serve` writes when it starts "
             "(restart it if that token was revoked; is this the server that wrote it?), or "
             "pass --token or set VANCETOPE_TOKEN"),
])
def test_a_refused_token_says_where_it_came_from(monkeypatch, served, tmp_path, source, advice):
    data = tmp_path / "data"
    data.mkdir()
    (data / "token").write_text("vt_from_the_file\n")
    monkeypatch.delenv("VANCETOPE_TOKEN", raising=False)
    if source == "env":
        monkeypatch.setenv("VANCETOPE_TOKEN", "vt_from_the_variable")
    config = Config.from_env({"VANCETOPE_DATA_DIR": str(data)})
    with pytest.raises(Unauthorized) as refused:
        chat_client.run_chat(config, url=f"ws://{served}/ws", session_id=None, new=True,
                             token="vt_from_the_option" if source == "option" else None)
    assert str(refused.value) == (f"the server at ws://{served}/ws refused the token (HTTP 401: "
                                  f"unknown or revoked); {advice.format(data=data)}")


def test_a_terminal_session_is_titled_from_its_first_message_and_listed(emb, served, tmp_path):
    """``chat`` creates its session untitled (not "terminal chat"), so the server titles it
    from the first message; ``/sessions`` lists the user's sessions with their titles."""
    token = emb.brain.identity.issue_token("acme", "ada", label="titles")
    chat = _Chat(ChatClient(f"ws://{served}/ws", token), f"ws://{served}/ws",
                 Token(token, "--token"), tmp_path / "state.json",
                 find_url=lambda: f"ws://{served}/ws")
    chat.printer = Printer(view := Recorded(), "", 0, 0)
    try:
        chat.open(view, None, True)
        chat.send("What is   green tea?")
        out = io.StringIO()
        _command(chat.client, "/sessions", PlainView(out))
        assert f"{chat.session_id}  OPEN       What is green tea?\n" in out.getvalue()
        other = ChatClient(f"ws://{served}/ws", token)
        try:
            resumed = _Chat(other, f"ws://{served}/ws", Token(token, "--token"),
                            tmp_path / "state.json", find_url=lambda: f"ws://{served}/ws")
            resumed.printer = Printer(again := Recorded(), "", 0, 0)
            resumed.open(again, chat.session_id, False)
            assert ("note", f"resumed session {chat.session_id} “What is green tea?”") in \
                again.lines
        finally:
            other.close()
    finally:
        chat.client.close()


def test_sessions_shows_a_page_and_more_shows_the_next(emb, served):
    """``/sessions`` shows the newest ``SESSIONS_PAGE`` and says how to see more; ``/sessions
    more`` the next page, and at the end that there is no more."""
    user = f"pager{uuid.uuid4().hex[:8]}"
    emb.brain.identity.create_user("acme", user, user)
    start = utcnow()
    store = emb.brain.store.port(SessionStore)
    ids = []
    for i in range(SESSIONS_PAGE + 2):
        session = Session(id=new_id("ses"), tenant_id="acme", user_id=user, title=f"s{i}",
                          status=SessionStatus.CLOSED, created_at=start + timedelta(seconds=i))
        store.create_session(session)
        ids.insert(0, session.id)
    client = ChatClient(f"ws://{served}/ws", emb.brain.identity.issue_token("acme", user))
    try:
        pages = []
        for line in ("/sessions", "/sessions more", "/sessions more"):
            out = io.StringIO()
            _command(client, line, PlainView(out))
            pages.append(out.getvalue())
    finally:
        client.close()
    assert [ln.split()[0] for ln in pages[0].splitlines()[:-1]] == ids[:SESSIONS_PAGE]
    assert pages[0].endswith("(older sessions: /sessions more)\n")
    assert [ln.split()[0] for ln in pages[1].splitlines()] == ids[SESSIONS_PAGE:]
    assert "no more sessions" in pages[2]


def test_a_reply_lists_its_sources_under_it_as_plain_lines():
    """A reply that used documents: each source one line after it, as text (a document's
    name is data: its markup and control characters are printed inert)."""
    out = io.StringIO()
    printer = Printer(PlainView(out), "proc_1", 0, 0)
    sources = [{"documentId": "doc_1", "documentName": "refunds.md", "section": "Policies",
                "page": None, "lineStart": 13, "lineEnd": 14},
               {"documentId": "doc_2", "documentName": "[x](javascript:1)\x1b[2J.pdf",
                "section": "", "page": 4, "lineStart": None, "lineEnd": None},
               {"documentId": "doc_3", "documentName": "one.txt", "section": "",
                "page": None, "lineStart": 7, "lineEnd": 7}]
    printer.handle(_event(1, "chat-message", {"seq": 2, "role": "assistant",
                                              "content": "14 days.", "sources": sources}))
    printer.handle(_event(2, "chat-message", {"seq": 3, "role": "assistant",
                                              "content": "No sources here."}))
    assert out.getvalue().splitlines() == [
        "assistant> 14 days.",
        "source> refunds.md › Policies, lines 13-14",
        "source> [x](javascript:1)\\x1b[2J.pdf, p. 4",
        "source> one.txt, line 7",
        "assistant> No sources here."]
