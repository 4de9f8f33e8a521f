"""The terminal client: how it prints a streamed turn, and its Inbox (the pending summary,
pushed items, /inbox, /answer, /dismiss)."""

from __future__ import annotations

import io

import pytest

from vancetope_brain.errors import VancetopeError
from vancetope_brain.inbox.service import NewItem
from vancetope_brain.models.inbox import Criticality, ItemType
from vancetope_brain.store import UserInboxStore
from vancetope_gateway.chat_client import ChatClient, _command, _Printer


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
    printer = _Printer(out, "proc_none", 0, 0)
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

    _command(terminal, "/inbox", out)
    assert f"{note.id}  OUTPUT_TEXT  NORMAL  Weekly report" in out.getvalue()
    _command(terminal, f"/answer {decision.id} us", out)
    _command(terminal, f"/answer {approval.id} ?which build", out)
    _command(terminal, f"/dismiss {note.id}", out)
    store = emb.brain.store
    assert store.port(UserInboxStore).get_inbox_item("acme", decision.id).answer.value == {"chosen": "us"}
    answer = store.port(UserInboxStore).get_inbox_item("acme", approval.id).answer
    assert (answer.outcome.value, answer.reason) == ("INSUFFICIENT_INFO", "which build")
    assert store.port(UserInboxStore).get_inbox_item("acme", note.id).status.value == "DISMISSED"
    with pytest.raises(VancetopeError, match="yes or no"):
        _command(terminal, f"/answer {_new(emb, ItemType.APPROVAL, 'Again?').id} maybe", out)
    _command(terminal, "/help", out)
    assert "/answer ITEM VALUE" in out.getvalue()


def _event(seq: int, type_: str, data: dict) -> dict:
    return {"type": "event", "data": {"seq": seq, "processId": "proc_1", "type": type_,
                                      "data": data}}


def test_a_streamed_answer_after_a_tool_line_is_printed_once():
    out = io.StringIO()
    printer = _Printer(out, "proc_1", 0, 0)
    printer.expect_answer("msg_1")
    for frame in (_event(1, "token", {"text": "Started "}), _event(2, "token", {"text": "w."}),
                  _event(3, "chat-message", {"seq": 4, "role": "user", "content": "start w",
                                             "sourceMessageId": "msg_1"}),
                  _event(4, "chat-message", {"seq": 5, "role": "tool",
                                             "content": "process_create(…) → success"}),
                  _event(5, "chat-message", {"seq": 6, "role": "assistant",
                                             "content": "Started w."})):
        printer.handle(frame)
    assert out.getvalue() == "assistant> Started w.\ntool> process_create(…) → success\n"
    assert not printer.waiting


def test_a_stream_cut_short_by_a_turn_restart_is_marked_and_the_reply_printed_whole():
    out = io.StringIO()
    printer = _Printer(out, "proc_1", 0, 0)
    printer.expect_answer("msg_1")
    for frame in (_event(1, "token", {"text": "Hel"}), _event(2, "turn-restarted", {"epoch": 3}),
                  _event(3, "token", {"text": "Hello."}),
                  _event(4, "chat-message", {"seq": 1, "role": "user", "content": "hi",
                                             "sourceMessageId": "msg_1"}),
                  _event(5, "chat-message", {"seq": 2, "role": "assistant",
                                             "content": "Hello."})):
        printer.handle(frame)
    assert out.getvalue() == ("assistant> Hel [interrupted: the server restarted this turn]\n"
                              "assistant> Hello.\n")
    assert not printer.waiting


def test_a_restart_before_anything_streamed_prints_the_reply_once():
    out = io.StringIO()
    printer = _Printer(out, "proc_1", 0, 0)
    for frame in (_event(1, "turn-restarted", {"epoch": 2}),
                  _event(2, "chat-message", {"seq": 1, "role": "assistant", "content": "Hi."})):
        printer.handle(frame)
    assert out.getvalue() == "assistant> Hi.\n"


def test_a_welcome_committed_after_the_users_message_was_sent_is_not_its_answer():
    out = io.StringIO()
    printer = _Printer(out, "proc_1", 0, 0)
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
    ends the cut line, re-reads the chat, prints the lines it had not shown (not the user's
    own, already on screen) — the whole answer among them — and stops waiting."""
    out = io.StringIO()
    history = [{"seq": 1, "role": "assistant", "content": "Hi."},
               {"seq": 2, "role": "user", "content": "tell me", "sourceMessageId": "msg_1"},
               {"seq": 3, "role": "assistant", "content": "A long story."}]
    printer = _Printer(out, "proc_1", 0, 1, history=lambda: history)
    printer.expect_answer("msg_1")
    printer.handle(_event(10, "token", {"text": "A lo"}))
    printer.handle({"type": "events-gap", "data": {"sessionId": "ses_1", "requestedAfter": 10,
                                                   "firstAvailable": 0}})
    assert out.getvalue() == ("assistant> A lo\n(some events were lost; reloading the "
                              "conversation)\nassistant> A long story.\n")
    assert not printer.waiting
    assert printer.last_seq == 0  # a later resume replays the new log from its start
    # The lost events, published again into the new log later, are not printed twice.
    printer.handle(_event(7, "chat-message", {**history[2], "processId": "proc_1"}))
    assert out.getvalue().count("A long story.") == 1
