"""Stopping a reply in the distributed shape (issue 32 part 1, acceptance (c)): the lane
runs on a Celery worker in another OS process than the gateway's parts (this test
process), its model is the real ``openai`` client against the fake server streaming a
word every 50 ms. The interrupt goes through Redis (``vt:interrupts:{db}``) to the worker's
listener, which cuts the call on its model loop: no token is published more than 300 ms
after the request, the line is marked interrupted, and the next question is answered."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.gateway.test_interrupt import BOUND, LONG, answer
from tests.helpers import wait_for
from tests.integration.conftest import Cluster
from tests.llm.fake_openai_server import FakeOpenAiServer
from vancetope_brain.events import EventType
from vancetope_brain.models import ChatRole, utcnow
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import SessionStore


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str) -> Iterator[tuple[Cluster, FakeOpenAiServer]]:
    with FakeOpenAiServer() as fake:
        fake.respond_with(answer)
        c = Cluster(tmp_path, redis_url, OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="k",
                    VANCETOPE_LLM_MODEL="fake-model")
        try:
            c.brain.settings.set("acme", SettingScope.tenant(), "session.defaultChatEngine",
                                 "arthur")
            yield c, fake
        finally:
            c.close()


@pytest.mark.slow
@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_stop_reaches_the_worker_process_holding_the_lane(cluster, pool):
    c, fake = cluster
    c.start_workers("openai", pool=pool)
    pid = c.new_chat()
    session = c.brain.store.port(SessionStore).get_process("acme", pid).session_id
    c.steer(pid, "talk long")

    def tokens() -> list:
        return [e for e in c.brain.events.read(session, 0)
                if e.process_id == pid and e.type is EventType.TOKEN]

    wait_for(lambda: len(tokens()) >= 5, timeout=30, what="the reply streaming")
    sent = utcnow()
    process, running = c.brain.sessions.interrupt(c.who, pid)
    assert running and process.status.value == "RUNNING"
    line = wait_for(lambda: next((m for m in c.chat(pid) if m.role is ChatRole.ASSISTANT
                                  and m.meta.get("interrupted")), None),
                    timeout=10, what="the interrupted line")
    assert line.content and LONG.startswith(line.content) and len(line.content) < len(LONG) // 2
    late = [e.at - sent for e in tokens() if e.at - sent > timedelta(seconds=BOUND)]
    assert not late, late

    c.steer(pid, "and now?")
    wait_for(lambda: any(m.role is ChatRole.ASSISTANT and m.content == "A normal answer."
                         for m in c.chat(pid)), timeout=30, what="the next answer")
    assert [m.meta.get("interrupted") for m in c.chat(pid) if m.role is ChatRole.ASSISTANT] \
        == [None, True, None]  # the welcome, the cut reply, the answer
