"""No lost wake-up without the sweeper: a message that arrives while its lane is busy."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Embedded
from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus
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
