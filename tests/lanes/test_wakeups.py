"""No lost wake-up without the sweeper: a message that arrives while its lane is busy, or
while its process holds messages (PAUSED) as the turn that resumes it begins."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Embedded
from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.engines.lifecycle import LifecycleCall
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus, ThinkProcess
from vancetope_brain.store import LaneStore


@pytest.fixture
def without_beat(tmp_path: Path) -> Iterator[Embedded]:
    """The embedded shape whose sweeper never runs within a test."""
    emb = Embedded(tmp_path, VANCETOPE_SWEEP_INTERVAL="3600",
                   VANCETOPE_HOUSEKEEPING_INTERVAL="3600")
    yield emb
    emb.stop()


def test_a_message_sent_during_a_turn_gets_a_turn_of_its_own(without_beat: Embedded) -> None:
    emb = without_beat
    entered, release = threading.Event(), threading.Event()

    def reply(messages, tools):  # type: ignore[no-untyped-def]
        if messages[-1].content == "slow":
            entered.set()
            assert release.wait(20)
        return f"re: {messages[-1].content}"

    emb.model = FunctionModel(reply)
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    assert pid is not None
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.IDLE)
    emb.brain.sessions.steer(emb.who, pid, "slow")
    assert entered.wait(20)
    emb.brain.sessions.steer(emb.who, pid, "quick")
    # Its task met the lease of the running turn and asked the holder to look again.
    wait_for(lambda: emb.brain.redis.exists(keys.recheck(pid)), what="a re-check request")
    release.set()
    wait_for(lambda: any(line.content == "re: quick" for line in
                         emb.brain.store.port(LaneStore).chat_history("acme", pid)),
             timeout=20, what="the reply to the message sent during the turn")
    assert not emb.brain.redis.exists(keys.recheck(pid))


def test_a_message_queued_while_paused_as_the_resume_turn_starts_is_not_stranded(
        without_beat: Embedded, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = without_beat
    emb.model = FunctionModel(lambda messages, tools: f"re: {messages[-1].content}")
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    assert pid is not None
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.IDLE)
    emb.brain.sessions.control(emb.who, pid, LifecycleCall.PAUSE)
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.PAUSED)
    lanes = emb.worker_parts.runner._lanes
    acquire = lanes.acquire_epoch

    def steer_first(tenant_id: str, process_id: str, message_ids=()) -> ThinkProcess:
        # After the resume turn read the inbox: queued without a wake, the process is PAUSED.
        monkeypatch.setattr(lanes, "acquire_epoch", acquire)
        emb.brain.sessions.steer(emb.who, pid, "late")
        return acquire(tenant_id, process_id, message_ids)

    monkeypatch.setattr(lanes, "acquire_epoch", steer_first)
    emb.brain.sessions.control(emb.who, pid, LifecycleCall.RESUME)
    wait_for(lambda: any(line.content == "re: late" for line in
                         emb.brain.store.port(LaneStore).chat_history("acme", pid)),
             timeout=20, what="the reply to the message queued while the resume began")
