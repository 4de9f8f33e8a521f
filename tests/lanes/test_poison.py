"""Turns that never complete (their worker dies each time): counted in the store, isolated,
dead-lettered after ``VANCETOPE_MAX_ATTEMPTS``, and the lane goes on.

A dying worker is played by a model that raises ``WorkerDied``, a ``BaseException`` the
runner lets through unwritten, as a SIGKILL would leave it: nothing committed, the lane
RUNNING. (The lease is released on the way out, which a real death would leave to expire:
here the next turn need not wait for it. ``tests/chaos/test_faults_of_a_turn.py`` kills
real worker processes.) No broker here: the test runs each turn itself, so it decides
exactly when a lane runs again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import server_env
from vancetope_brain.config import Config
from vancetope_brain.identity import IdentityService, Principal
from vancetope_brain.lanes import TurnOutcome
from vancetope_brain.llm import LlmMessage, ToolSpec
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    InboxMessage,
    ProcessEvent,
    ProcessStatus,
    ThinkProcess,
)
from vancetope_brain.models.inbox import InboxQuery, ItemType
from vancetope_brain.models.lifecycle import LifecycleCall
from vancetope_brain.models.steer import ProcessEventType
from vancetope_brain.store import (
    DeadLetterStore,
    LaneStore,
    SessionStore,
    UserInboxStore,
    open_store,
)
from workers.parts import Worker, build_worker

POISON = "POISON"


class WorkerDied(BaseException):  # noqa: N818 - plays a SIGKILL, not an error
    """The worker running the turn is gone."""


def _model(messages: list[LlmMessage], tools: list[ToolSpec]) -> str:
    """Dies on any input holding the marker; else echoes the last user line."""
    if any(POISON in m.content for m in messages if m.role == "user"):
        raise WorkerDied
    return f"echo: {next(m.content for m in reversed(messages) if m.role == 'user')}"


class Lane:
    """A worker's parts on a fresh SQLite store, with no broker: wakes go nowhere and the
    test runs each turn with ``turn``."""

    def __init__(self, data_dir: Path) -> None:
        self.config = Config.from_env(server_env(data_dir, VANCETOPE_MAX_ATTEMPTS="3"))
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self.model = FunctionModel(_model)
        self.worker: Worker = build_worker(self.config, lambda *_: None, lambda job: None,
                                           lambda job: None,
                                           model_for=lambda process: self.model)
        identity = IdentityService.on(self.worker.store)
        identity.create_tenant("acme", "acme")
        identity.create_user("acme", "ada", "ada")
        self.who = Principal("acme", "ada")
        self.lanes = self.worker.store.port(LaneStore)
        session = self.worker.sessions.create_interactive(self.who)
        assert session.chat_process_id is not None
        self.parent = session.chat_process_id
        assert self.turn(self.parent) is TurnOutcome.COMMITTED  # the chat's start

    def child(self) -> str:
        """A chat-like worker of the session's chat (so it has a parent), started."""
        parent = self.process(self.parent)
        child = self.worker.process_factory.child(parent, recipe="ford-chat", engine=None, siblings=(),
                                                  name="helper", goal="", params=None)
        self.worker.store.port(SessionStore).create_process(child)
        assert self.turn(child.id) is TurnOutcome.COMMITTED
        return child.id

    def turn(self, pid: str) -> TurnOutcome:
        return self.worker.runner.run("acme", pid)

    def dies(self, pid: str) -> None:
        with pytest.raises(WorkerDied):
            self.turn(pid)

    def steer(self, pid: str, content: str) -> InboxMessage:
        return self.worker.sessions.steer(self.who, pid, content)[0]

    def process(self, pid: str) -> ThinkProcess:
        return self.worker.store.port(SessionStore).get_process("acme", pid)

    def chat(self, pid: str) -> list[tuple[ChatRole, str]]:
        return [(line.role, line.content) for line in self.lanes.chat_history("acme", pid)]

    def attempts(self, pid: str) -> dict[str, int]:
        """Pending messages' attempts as a fresh store sees them: durable, not cached."""
        store = open_store(self.config.store_url)
        try:
            return {m.message.content: m.attempts  # type: ignore[union-attr]
                    for m in store.port(LaneStore).pending_messages("acme", pid)}
        finally:
            store.close()

    def items(self) -> list[tuple[ItemType, str, str]]:
        found = self.worker.store.port(UserInboxStore).list_inbox_items(
            "acme", InboxQuery(assigned_to="ada"))
        return [(i.type, i.title, i.body or "") for i in found]


@pytest.fixture
def lane(tmp_path: Path) -> Iterator[Lane]:
    made = Lane(tmp_path)
    yield made
    made.worker.close()


def test_a_message_that_kills_its_worker_is_dead_lettered_and_the_lane_goes_on(lane):
    pid = lane.child()
    assert lane.turn(pid) is TurnOutcome.NOTHING
    lane.steer(pid, "before")
    assert lane.turn(pid) is TurnOutcome.COMMITTED
    poison, after = lane.steer(pid, f"{POISON} pill"), lane.steer(pid, "after")

    lane.dies(pid)  # both in the batch: both counted
    assert lane.attempts(pid) == {f"{POISON} pill": 1, "after": 1}
    assert lane.process(pid).status is ProcessStatus.RUNNING
    lane.dies(pid)  # alone now: only the poison is counted
    lane.dies(pid)
    assert lane.attempts(pid) == {f"{POISON} pill": 3, "after": 1}
    assert [call.last_user_text for call in lane.model.calls[-3:]] == [
        "after", f"{POISON} pill", f"{POISON} pill"]

    assert lane.turn(pid) is TurnOutcome.COMMITTED  # the dead letter, no engine call
    assert len(lane.model.calls) == 4  # "before" + three deaths
    assert lane.attempts(pid) == {"after": 1}
    notice = (f'Your message "{POISON} pill" could not be processed after 3 attempts; it was '
              f"set aside (dead letter {poison.id}).")
    assert lane.chat(pid)[-1] == (ChatRole.ERROR, notice)
    (dead,) = lane.worker.store.port(DeadLetterStore).dead_letters("acme", pid)
    assert dead.id == poison.id and dead.dead_letter is not None
    assert dead.dead_letter.attempts == 3 and "died" in dead.dead_letter.reason
    # The parent hears of it (a ProcessEvent in its inbox), the user through the Inbox.
    (event,) = [m.message for m in lane.lanes.pending_messages("acme", lane.parent)]
    assert isinstance(event, ProcessEvent) and event.type is ProcessEventType.DEAD_LETTER
    assert event.payload == {"messageId": poison.id, "attempts": 3, "reason": dead.dead_letter.reason}
    ((kind, title, body),) = lane.items()
    assert kind is ItemType.OUTPUT_TEXT and title == "A message to helper was set aside"
    assert notice in body and f"dead-letter requeue --tenant acme {poison.id}" in body

    # The lane goes on: "after" (counted once with the poison) gets its isolated turn.
    assert lane.turn(pid) is TurnOutcome.COMMITTED
    assert lane.turn(pid) is TurnOutcome.NOTHING
    assert lane.chat(pid) == [(ChatRole.USER, "before"), (ChatRole.ASSISTANT, "echo: before"),
                              (ChatRole.ERROR, notice),
                              (ChatRole.USER, "after"), (ChatRole.ASSISTANT, "echo: after")]
    assert lane.process(pid).status is ProcessStatus.IDLE
    assert [t.lifecycle for t in lane.lanes.turn_records("acme", pid)] == [
        "start", "steer", "dead-letter", "steer"]
    assert lane.lanes.turn_records("acme", pid)[-1].drained_ids == [after.id]


def test_a_requeued_dead_letter_runs_again_first_in_line(lane):
    pid = lane.child()
    poison = lane.steer(pid, f"{POISON} once")
    for _ in range(3):
        lane.dies(pid)
    assert lane.turn(pid) is TurnOutcome.COMMITTED
    lane.steer(pid, "later")
    lane.model.fn = lambda messages, tools: "fixed"  # the bug is fixed; put it back
    lane.worker.store.port(DeadLetterStore).requeue_dead_letter("acme", poison.id)
    assert lane.turn(pid) is TurnOutcome.COMMITTED
    assert lane.chat(pid)[-3:] == [(ChatRole.USER, f"{POISON} once"), (ChatRole.USER, "later"),
                                   (ChatRole.ASSISTANT, "fixed")]


def test_a_start_that_kills_its_worker_closes_the_process_failed(lane):
    parent = lane.process(lane.parent)
    child = lane.worker.process_factory.child(parent, recipe="ford", engine=None, siblings=(),
                                              name="starter", goal=f"{POISON} goal", params=None)
    lane.worker.store.port(SessionStore).create_process(child)
    waiting = lane.steer(child.id, "are you up?")  # queued while it starts
    for _ in range(3):
        lane.dies(child.id)
    assert lane.process(child.id).turn_attempts == 3
    assert lane.turn(child.id) is TurnOutcome.COMMITTED
    process = lane.process(child.id)
    assert (process.status, process.close_reason) == (ProcessStatus.CLOSED, CloseReason.FAILED)
    assert "start was tried 3 times" in (process.last_error or "")
    assert len(lane.model.calls) == 3  # given up without a fourth call
    chat = lane.chat(child.id)
    assert chat[0][0] is ChatRole.ERROR and "could not start" in chat[0][1]
    assert chat[1] == (ChatRole.ERROR, 'Your message "are you up?" was not processed: the '
                                       f"process could not start ({process.last_error}).")
    assert lane.lanes.chat_history("acme", child.id)[1].source_message_id == waiting.id
    assert lane.lanes.pending_messages("acme", child.id) == []
    (event,) = [m.message for m in lane.lanes.pending_messages("acme", lane.parent)]
    assert isinstance(event, ProcessEvent) and event.type is ProcessEventType.FAILED
    assert [title for _, title, _ in lane.items()] == ["starter: start given up"]


def _pause_then_resume(lane: Lane, pid: str, *queued: str) -> None:
    lane.lanes.request_control("acme", pid, LifecycleCall.PAUSE.value,
                               frozenset({ProcessStatus.IDLE}))
    assert lane.turn(pid) is TurnOutcome.COMMITTED
    for content in queued:
        lane.steer(pid, content)
    lane.lanes.request_control("acme", pid, LifecycleCall.RESUME.value,
                               frozenset({ProcessStatus.PAUSED}))


def test_a_lifecycle_call_whose_turn_died_runs_alone(lane):
    """A resume steers what waited; when that kills the worker, the resume runs again
    without the messages, and the poison is found out on its own."""
    pid = lane.child()
    _pause_then_resume(lane, pid, f"{POISON} while paused", "also waiting")
    lane.dies(pid)  # the resume steered both
    assert lane.turn(pid) is TurnOutcome.COMMITTED  # the resume alone
    assert lane.process(pid).status is ProcessStatus.IDLE
    assert lane.attempts(pid) == {f"{POISON} while paused": 1, "also waiting": 1}
    lane.dies(pid)
    lane.dies(pid)
    assert lane.turn(pid) is TurnOutcome.COMMITTED  # the dead letter
    assert lane.turn(pid) is TurnOutcome.COMMITTED  # "also waiting", alone
    assert [role for role, _ in lane.chat(pid)][-3:] == [
        ChatRole.ERROR, ChatRole.USER, ChatRole.ASSISTANT]
    assert lane.chat(pid)[-1] == (ChatRole.ASSISTANT, "echo: also waiting")


def test_a_lifecycle_call_that_kills_its_worker_is_given_up_suspended(lane, monkeypatch):
    from vancetope_brain.engines.ford import FordEngine

    def resume(self, process, context):
        raise WorkerDied

    pid = lane.child()
    _pause_then_resume(lane, pid)
    monkeypatch.setattr(FordEngine, "resume", resume)
    for _ in range(3):
        lane.dies(pid)
        assert lane.process(pid).status is ProcessStatus.PAUSED
    assert lane.turn(pid) is TurnOutcome.COMMITTED
    process = lane.process(pid)
    assert (process.status, process.pending_control) == (ProcessStatus.SUSPENDED, None)
    assert "resume was tried 3 times" in (process.last_error or "")
    assert "SUSPENDED" in lane.chat(pid)[-1][1]
    assert [title for _, title, _ in lane.items()] == ["helper: resume given up"]
    assert lane.turn(pid) is TurnOutcome.HELD  # not RUNNING forever


def test_a_turn_that_commits_without_reading_a_message_does_not_count_it(lane):
    """A pause is given the pending messages but reads none: they keep no attempt, so a
    message is never dead-lettered for the pauses it waited through."""
    pid = lane.child()
    lane.steer(pid, "wait for me")
    lane.lanes.request_control("acme", pid, LifecycleCall.PAUSE.value,
                               frozenset({ProcessStatus.IDLE}))
    assert lane.turn(pid) is TurnOutcome.COMMITTED
    assert lane.process(pid).status is ProcessStatus.PAUSED
    assert lane.attempts(pid) == {"wait for me": 0}
