"""A turn's committed events reach its session's stream once, in order, even when its worker dies
between the commit and the publishing (issue 11 item 4): the lane's next turn or the sweeper
publishes what the commit left in the event outbox, and a repeated publish adds nothing."""

from __future__ import annotations

import pytest

from tests.helpers import wait_for
from vancetope_brain.events import EventType
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.store import EventOutboxStore, LaneStore


class WorkerDied(Exception):
    """Stands for a SIGKILL: nothing in the runner handles it, so nothing after it runs (a
    BaseException would also take the embedded Celery worker's bookkeeping down with it)."""


@pytest.fixture
def emb(embedded):
    embedded.worker.join()
    embedded.model = FunctionModel(lambda messages, tools: f"echo: {messages[-1].content}")
    return embedded


def _chat_session(emb):
    session = emb.brain.sessions.create_interactive(emb.who)
    emb.worker.join()  # the chat process's start turn
    return session, session.chat_process_id


def _die_once(monkeypatch, target, name: str, when=lambda *a, **kw: True) -> list[int]:
    """Make ``target.name`` raise ``WorkerDied`` the first time ``when`` holds for its call."""
    real, died = getattr(target, name), []

    def dying(*args, **kwargs):
        if not died and when(*args, **kwargs):
            died.append(1)
            raise WorkerDied(f"killed in {name}")
        return real(*args, **kwargs)
    monkeypatch.setattr(target, name, dying)
    return died


def _chat_events(emb, session_id: str) -> list:
    return [e for e in emb.brain.events.read(session_id, 0)
            if e.type is EventType.CHAT_MESSAGE]


def _published_once_in_order(emb, session_id: str, pid: str, last: str) -> list:
    """Wait until the process's chat ends with ``last`` and every line of it is in the
    stream; then each must be there exactly once, in chat order."""
    def all_there():
        lines = emb.brain.store.port(LaneStore).chat_history("acme", pid, limit=1000)
        ids = {e.data["id"] for e in _chat_events(emb, session_id)}
        return lines[-1].content == last and {line.id for line in lines} <= ids and lines
    lines = wait_for(all_there, what="every chat line in the stream")
    assert [e.data["id"] for e in _chat_events(emb, session_id)] == [line.id for line in lines]
    return lines


def _chat_line_published(session_id: str):
    """The outbox's publish (``publish_many``) of a chat line into ``session_id``."""
    def when(sid, pid, events):
        return sid == session_id and any(e.type is EventType.CHAT_MESSAGE for e in events)
    return when


def test_a_worker_dead_after_its_commit_has_its_lines_published_by_the_next_turn(
        emb, monkeypatch):
    session, pid = _chat_session(emb)
    # Leave it to the next turn: the sweeper publishes nothing during this test.
    monkeypatch.setattr(emb.worker_parts.outbox, "sweep", lambda older_than: 0)
    died = _die_once(monkeypatch, emb.worker_parts.events, "publish_many",
                     _chat_line_published(session.id))
    emb.brain.sessions.steer(emb.who, pid, "one")
    wait_for(lambda: died, what="the worker to die after its commit")
    emb.worker.join()
    answered = [line.content for line in
                emb.brain.store.port(LaneStore).chat_history("acme", pid)]
    assert answered[-1] == "echo: one"  # committed, unpublished
    assert "echo: one" not in [e.data["content"] for e in _chat_events(emb, session.id)]

    emb.brain.sessions.steer(emb.who, pid, "two")
    lines = _published_once_in_order(emb, session.id, pid, "echo: two")
    assert [line.content for line in lines][-4:] == ["one", "echo: one", "two", "echo: two"]
    # The leftovers went out before anything of the next turn: its RUNNING comes after them.
    events = emb.brain.events.read(session.id, 0)
    where = {e.data.get("content"): i for i, e in enumerate(events)}
    running = [i for i, e in enumerate(events) if e.type is EventType.STATUS_CHANGED
               and e.data["to"] == "RUNNING"]
    assert where["echo: one"] < running[-1] < where["two"]
    wait_for(lambda: not emb.brain.store.port(EventOutboxStore).pending_events("acme", pid),
             what="the outbox to empty (rows go once published)")


def test_the_sweeper_publishes_what_a_dead_worker_left_once_it_is_old(emb, monkeypatch):
    session, pid = _chat_session(emb)
    died = _die_once(monkeypatch, emb.worker_parts.events, "publish_many",
                     _chat_line_published(session.id))
    emb.brain.sessions.steer(emb.who, pid, "alone")
    wait_for(lambda: died, what="the worker to die after its commit")
    # No further turn: only the embedded beat's sweep can publish it.
    lines = _published_once_in_order(emb, session.id, pid, "echo: alone")
    assert [line.content for line in lines][-2:] == ["alone", "echo: alone"]
    wait_for(lambda: not emb.brain.store.port(EventOutboxStore).pending_events("acme", pid),
             what="the outbox to empty")
    # The status the dead turn committed went out too, after its lines.
    last = emb.brain.events.read(session.id, 0)[-1]
    assert (last.type, last.data) == (EventType.STATUS_CHANGED, {"from": "RUNNING",
                                                                 "to": "IDLE"})


def test_a_worker_dead_after_publishing_but_before_removing_publishes_nothing_twice(
        emb, monkeypatch):
    session, pid = _chat_session(emb)
    died = _die_once(monkeypatch, emb.worker_parts.store.port(EventOutboxStore),
                     "remove_events", lambda tenant_id, ids: bool(list(ids)))
    emb.brain.sessions.steer(emb.who, pid, "one")
    wait_for(lambda: died, what="the worker to die before removing its events")
    emb.worker.join()
    assert emb.brain.store.port(EventOutboxStore).pending_events("acme", pid)  # still there
    emb.brain.sessions.steer(emb.who, pid, "two")  # its turn publishes them again, first
    lines = _published_once_in_order(emb, session.id, pid, "echo: two")
    assert [line.content for line in lines][-4:] == ["one", "echo: one", "two", "echo: two"]
    statuses = [(e.data["from"], e.data["to"]) for e in emb.brain.events.read(session.id, 0)
                if e.type is EventType.STATUS_CHANGED]
    assert statuses[-4:] == [("IDLE", "RUNNING"), ("RUNNING", "IDLE"),
                             ("IDLE", "RUNNING"), ("RUNNING", "IDLE")]


def test_a_turn_publishes_what_its_commit_enqueued_without_reading_it_back(emb, monkeypatch):
    """The commit returns its events; the outbox is read once per turn, before it (what an
    earlier turn left, in the turn's first read), and found empty after: nothing is left
    behind by the shortcut."""
    session, pid = _chat_session(emb)
    lanes = emb.worker_parts.store.port(LaneStore)
    store = emb.worker_parts.store.port(EventOutboxStore)
    start, real, reads, starting = lanes.turn_start, store.pending_events, [], []

    def counted_start(tenant_id, process_id, **kwargs):
        starting.append(process_id)  # an adapter may read its events with pending_events
        try:
            found = start(tenant_id, process_id, **kwargs)
        finally:
            starting.pop()
        if process_id == pid:
            reads.append(len(found.events))
        return found

    def counted(tenant_id, process_id, *args, **kwargs):
        found = real(tenant_id, process_id, *args, **kwargs)
        if process_id == pid and not starting:
            reads.append(len(found))
        return found
    monkeypatch.setattr(lanes, "turn_start", counted_start)
    monkeypatch.setattr(store, "pending_events", counted)
    emb.brain.sessions.steer(emb.who, pid, "one")
    lines = _published_once_in_order(emb, session.id, pid, "echo: one")
    emb.worker.join()
    assert [line.content for line in lines][-2:] == ["one", "echo: one"]
    assert reads == [0]  # the flush before the turn; none after its commit
    assert real("acme", pid) == []
    last = emb.brain.events.read(session.id, 0)[-1]
    assert (last.type, last.data) == (EventType.STATUS_CHANGED, {"from": "RUNNING",
                                                                 "to": "IDLE"})
