"""Four levels on real Redis and real Celery worker processes (issue 10): Arthur → vogon
(inline strategy, one phase on the recipe ``marvin``) → marvin → ford (recipe
``marvin-worker``). marvin's plan asks the user first: the question goes up (marvin and
vogon BLOCKED, Arthur asks in its chat), the answer comes down (Arthur → vogon → marvin),
and marvin starts the ford, which is still thinking (its model call waits for the test).
Stopping the top of the worker hierarchy (Arthur's ``process_stop`` on vogon) stops every
level beneath it, the ford in the middle of its turn included, and Arthur hears it; closing
the session stops all four, Arthur included. No stopped process calls the model again.

A question of a marvin *worker* does not travel up: marvin stops a worker that asks and
counts it as a failed attempt (docs/engines.md, marvin); a question reaches the parent as
marvin's USER_INPUT step."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import Cluster, Worker
from tests.integration.scripts_nest import QUESTION
from vancetope_brain.errors import Conflict
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, ThinkProcess
from vancetope_brain.models.lifecycle import LifecycleCall
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore

S = ProcessStatus
STOPPED = (S.CLOSED, CloseReason.STOPPED)


class Nest:
    """A session whose Arthur was told to plan, with the four levels open and the ford's
    model call held (its worker process is ``busy``)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        cluster.brain.settings.unset("acme", SettingScope.tenant(), "session.defaultChatEngine")
        self.workers = cluster.start_workers("nest-flow", "nest-flow")
        cluster.start_sweeper()
        self.session = cluster.brain.sessions.create(cluster.who, title="nest")
        assert self.session.chat_process_id is not None
        self.arthur = self.session.chat_process_id
        wait_for(lambda: self.get(self.arthur).status is S.IDLE, timeout=30, what="Arthur's start")
        cluster.steer(self.arthur, "plan the launch")
        # marvin's question travels up: marvin and vogon BLOCKED, Arthur asks the user.
        wait_for(lambda: self.get(self.arthur).status is S.BLOCKED, timeout=30,
                 what="Arthur asking marvin's question")
        self.asked = [p for p in self.processes() if p.status is S.BLOCKED]
        self.chat_at_question = cluster.roles_and_contents(self.arthur)
        cluster.steer(self.arthur, "answer: the EU market")
        self.busy: Worker = wait_for(
            lambda: next((w for w in self.workers if w.started.exists()), None),
            timeout=30, what="the ford worker thinking")
        self.levels = wait_for(self._four_levels, timeout=30, what="four open levels")

    def processes(self) -> list[ThinkProcess]:
        return self.cluster.brain.store.port(SessionStore).list_processes("acme", self.session.id)

    def get(self, pid: str) -> ThinkProcess:
        return self.cluster.brain.store.port(SessionStore).get_process("acme", pid)

    def _four_levels(self) -> list[ThinkProcess] | None:
        chain, parent = [], None
        for _ in range(4):
            level = next((p for p in self.processes() if p.parent_process_id == parent), None)
            if level is None:
                return None
            chain.append(level)
            parent = level.id
        return chain if all(p.status is not S.CLOSED for p in chain) else None

    def ended(self, pid: str) -> tuple[S, CloseReason | None]:
        p = self.get(pid)
        return p.status, p.close_reason

    def calls(self) -> Counter[str]:
        return Counter(detail for w in self.workers for _, _, detail in w.entries("call"))

    def heard(self, text: str) -> bool:
        return any(m.role is ChatRole.ASSISTANT and m.content == text
                   for m in self.cluster.chat(self.arthur))

    def finished_last(self, pid: str) -> bool:
        """The process's last committed turn was its stop: nothing ran after it."""
        records = self.cluster.brain.store.port(LaneStore).turn_records("acme", pid)
        return records[-1].lifecycle == "stop" and \
            sum(r.status_after is S.CLOSED for r in records) == 1


@pytest.fixture
def nest(cluster: Cluster) -> Nest:
    return Nest(cluster)


def _assert_the_nest(nest: Nest) -> None:
    arthur, vogon, marvin, ford = nest.levels
    assert arthur.id == nest.arthur
    assert [(p.engine, p.recipe_name) for p in nest.levels] == [
        ("arthur", "arthur"), ("vogon", "vogon"), ("marvin", "marvin"), ("ford", "marvin-worker")]
    assert [p.parent_process_id for p in nest.levels] == [None, arthur.id, vogon.id, marvin.id]
    assert len(nest.processes()) == 4  # nothing spawned twice
    # The question went up level by level and reached Arthur's chat as a process-event ...
    assert sorted(p.id for p in nest.asked) == sorted([arthur.id, vogon.id, marvin.id])
    events = [c for r, c in nest.chat_at_question if r == "event"]
    assert events[-1] == (f'<process-event sourceProcessId="{vogon.id}" '
                          f'sourceName="{vogon.name}" type="blocked">'
                          f'Phase think: a worker asks: {QUESTION}\n'
                          '<payload>{"phase": "think"}</payload></process-event>')
    assert nest.chat_at_question[-1] == ("assistant", QUESTION)
    # ... and the answer came down to marvin, which then started the ford.
    assert vogon.engine_state["strategyState"]["workers"]["think"]["processId"] == marvin.id
    nodes = list(marvin.engine_state["tree"]["nodes"].values())
    asking = next(n for n in nodes if n["kind"] == "USER_INPUT")
    assert (asking["status"], asking["result"]["summary"]) == ("DONE", "the EU market")
    worker = next(n for n in nodes if n["kind"] == "WORKER")
    assert (worker["childProcessId"], worker["status"]) == (ford.id, "RUNNING")
    assert "the EU market" in ford.goal
    assert ford.status is S.RUNNING  # inside its model call


@pytest.mark.slow
def test_stopping_the_top_worker_stops_every_level_beneath_it(nest: Nest):
    _assert_the_nest(nest)
    _, vogon, marvin, ford = nest.levels
    nest.cluster.steer(nest.arthur, "stop it")

    for pid in (vogon.id, marvin.id):
        wait_for(lambda pid=pid: nest.ended(pid) == STOPPED, timeout=20, what=f"{pid} stopped")
    # The ford is still inside its turn: the stop waits on its lane, then ends it.
    wait_for(lambda: nest.get(ford.id).pending_control == "stop", timeout=20,
             what="the stop reaching the ford")
    nest.busy.release()
    wait_for(lambda: nest.ended(ford.id) == STOPPED, timeout=20, what="the ford stopped")
    wait_for(lambda: nest.heard("heard stopped: Process v (vogon) is stopped."),
             timeout=20, what="Arthur hearing the stop")

    assert nest.get(nest.arthur).status is S.IDLE
    for pid in (vogon.id, marvin.id, ford.id):
        assert nest.finished_last(pid)
    # One plan, one worker call; Arthur: create + its result, the question, steer + its
    # result, list + stop + its result, the stop event.
    assert nest.calls() == {"marvin": 1, "ford": 1, "arthur": 9}


@pytest.mark.slow
def test_closing_the_session_stops_all_four_levels(nest: Nest):
    _assert_the_nest(nest)
    brain, who = nest.cluster.brain, nest.cluster.who
    with pytest.raises(Conflict, match=r"close the session \(session-close\) to stop it"):
        brain.sessions.control(who, nest.arthur, LifecycleCall.STOP)  # not on its own
    brain.lifecycle.close(who, nest.session.id)
    for p in nest.levels[:3]:
        wait_for(lambda p=p: nest.ended(p.id) == STOPPED, timeout=20, what=f"{p.name} stopped")
    nest.busy.release()
    ford = nest.levels[3]
    wait_for(lambda: nest.ended(ford.id) == STOPPED, timeout=20, what="the ford stopped")
    for p in nest.levels:
        assert nest.finished_last(p.id)
    assert nest.calls() == {"marvin": 1, "ford": 1, "arthur": 5}
