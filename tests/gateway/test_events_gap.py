"""Connected clients hear when their session's event log is lost (a Redis restart) instead of
seeing their seq jump: every client on the session gets ``events-gap`` live, re-reads the chat
and goes on (issue 11 item 4b)."""

from __future__ import annotations

import io
import queue

import pytest

from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.events import EventType
from vancetope_gateway.chat_client import ChatClient
from vancetope_gateway.chat_view import PlainView, Printer


class WorkerDied(Exception):
    """Stands for a SIGKILL of the worker (see tests/lanes/test_event_outbox.py)."""


@pytest.fixture
def connect(emb, served):
    token = emb.brain.identity.issue_token("acme", "ada", label="gap test")
    opened: list[ChatClient] = []

    def open_client() -> ChatClient:
        opened.append(ChatClient(f"ws://{served}/ws", token))
        return opened[-1]
    yield open_client
    for client in opened:
        client.close()


def _lose_log(emb, session_id: str) -> None:
    """What Redis restarting empty does to a session's log."""
    emb.brain.redis.delete(keys.events(session_id), keys.event_seq(session_id),
                           keys.event_origin(session_id), keys.event_published(session_id))


class Pushed:
    """The frames pushed to one client, gathered as they come."""

    def __init__(self, client: ChatClient) -> None:
        self.client, self.frames = client, []

    def wait(self, match, what: str) -> dict:
        """The first frame gathered so far or arriving within 10 s that ``match`` holds for."""
        def found():
            while True:
                try:
                    self.frames.append(self.client.events.get_nowait())
                except queue.Empty:
                    break
            return next((f for f in self.frames if match(f)), None)
        return wait_for(found, what=what)

    def of(self, frame_type: str) -> list[dict]:
        return [f["data"] for f in self.frames if f["type"] == frame_type]


def _event(seq: int):
    return lambda f: f["type"] == "event" and f["data"]["seq"] == seq


def test_every_client_on_a_session_gets_events_gap_when_its_log_is_lost(emb, connect):
    first, second = connect(), connect()
    created = first.request("session-create", title="gap")
    sid, pid = created["session"]["id"], created["chatProcessId"]
    second.request("session-resume", sessionId=sid, lastSeq=created["lastSeq"])
    first.request("process-steer", targetThinkProcessId=pid, content="hi")
    emb.worker.join()
    last = emb.brain.events.last_seq(sid)
    pushed = [Pushed(first), Pushed(second)]
    for client in pushed:
        client.wait(_event(last), "the last event")

    _lose_log(emb, sid)
    for client in pushed:
        gap = client.wait(lambda f: f["type"] == "events-gap", "the gap")["data"]
        assert gap == {"sessionId": sid, "requestedAfter": last, "firstAvailable": 0}
    history = first.request("chat-history", processId=pid)["messages"]
    assert [line["content"] for line in history][-2:] == ["hi", "echo: hi"]

    # Then it goes on live, in the new log, without another gap.
    first.request("process-steer", targetThinkProcessId=pid, content="again")
    emb.worker.join()
    for client in pushed:
        client.wait(lambda f: f["type"] == "event" and f["data"]["type"] == "chat-message"
                    and f["data"]["data"]["content"] == "echo: again", "the next answer")
        assert len(client.of("events-gap")) == 1


def test_the_terminal_shows_an_answer_whose_events_were_lost(emb, connect, monkeypatch):
    """The worker dies between its commit and publishing the answer, and Redis restarts empty
    before anyone publishes it: the terminal gets ``events-gap``, re-reads the chat and
    shows the answer it never got as an event — once, also when the event comes later."""
    terminal = connect()
    created = terminal.request("session-create", title="gap")
    sid, pid = created["session"]["id"], created["chatProcessId"]
    out = io.StringIO()
    printer = Printer(PlainView(out), pid, created["lastSeq"], 0, history=lambda: terminal.request(
        "chat-history", processId=pid, limit=100)["messages"])
    emb.worker.join()  # the start turn: Arthur's welcome, shown once its event arrives
    wait_for(lambda: printer.drain(terminal.events) or "assistant> " in out.getvalue(),
             what="the welcome on the terminal")

    monkeypatch.setattr(emb.worker_parts.outbox, "sweep", lambda older_than: 0)
    real, died = emb.worker_parts.events.publish_many, []

    def dying(session_id, process_id, events):  # the outbox's publish of the turn's lines
        if not died and any(e.type is EventType.CHAT_MESSAGE for e in events):
            died.append(1)
            # Redis restarts empty as the worker dies: before anybody else can publish the
            # lines (on a busy machine the sweeper may have queued the lane's next turn,
            # which publishes what the dead worker left, as it should).
            _lose_log(emb, sid)
            raise WorkerDied("killed after the commit")
        return real(session_id, process_id, events)
    monkeypatch.setattr(emb.worker_parts.events, "publish_many", dying)
    printer.typed.append("hi")
    steered = terminal.request("process-steer", targetThinkProcessId=pid, content="hi")
    printer.expect_answer(steered["messageId"])
    wait_for(lambda: died, what="the worker to die after its commit")
    emb.worker.join()
    assert printer.pump(terminal.events, timeout=10)
    assert not printer.waiting, out.getvalue()
    shown = out.getvalue()
    assert "(some events were lost; reloading the conversation)\nassistant> echo: hi\n" in shown

    # The next turn publishes what the dead worker left, into the new log: not shown twice.
    printer.typed.append("again")
    steered = terminal.request("process-steer", targetThinkProcessId=pid, content="again")
    printer.expect_answer(steered["messageId"])
    assert printer.pump(terminal.events, timeout=10)
    assert out.getvalue().count("echo: hi") == shown.count("echo: hi")
    assert out.getvalue().endswith("assistant> echo: again\n")
