"""After a client connects, runs a turn and disconnects, exactly the keys documented in
``vancetope_brain/keys.py`` are left in the real Redis, each with its TTL (STYLE.md 5).

A gateway's and a worker's parts run on the real Redis with the lane turns driven
through the worker's runner (the tasks a broker would carry are kept in a list),
so every key in the db is Vancetope's: no Celery broker shares it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.gateway.wire import Client, echo
from tests.helpers import server_env, wait_for
from tests.redis_claim import CLAIM_KEY, MARKER_KEY
from vancetope_brain import keys
from vancetope_brain.config import Config
from vancetope_brain.identity import Principal
from vancetope_brain.models import ProcessStatus, SessionStatus
from vancetope_brain.store import LaneStore, SessionStore, open_store
from vancetope_gateway.parts import Gateway, build_gateway
from workers.parts import build_worker


class Lanes:
    """A gateway and a worker whose lane tasks (a shard's, or one process's) queue up here
    until ``run_until_idle`` runs them."""

    def __init__(self, tmp_path: Path, redis_url: str) -> None:
        self.tasks: list[int | tuple[str, str]] = []
        config = Config.from_env(server_env(
            tmp_path / "data", VANCETOPE_REDIS_URL=redis_url,
            VANCETOPE_STORE_URL=f"sqlite:///{tmp_path / 'v.db'}"))
        model = echo()
        store = open_store(config.store_url)

        def enqueue(shard: int, process: tuple[str, str] | None = None,
                    delay: float = 0.0) -> None:
            self.tasks.append(shard if process is None else process)

        self.brain = build_gateway(config, enqueue, enqueue_index=lambda job: None, store=store)
        self.worker = build_worker(config, enqueue, lambda job: None, lambda job: None,
                                   model_for=lambda process: model, store=store)
        self.brain.identity.create_tenant("acme", "acme")
        self.brain.identity.create_user("acme", "ada", "ada")

    def run_until_idle(self) -> None:
        while self.tasks:
            task = self.tasks.pop(0)
            if isinstance(task, int):
                self.worker.runner.drain(task)
            else:
                self.worker.runner.run(*task)


@pytest.fixture
def lanes(tmp_path: Path, redis_url: str) -> Iterator[Lanes]:
    opened = Lanes(tmp_path, redis_url)
    yield opened
    opened.brain.redis.close()
    opened.worker.redis.close()
    opened.worker.close()


def _all_keys(brain: Gateway) -> set[str]:
    """Every key in the db but the test run's claim on it (``tests/redis_claim.py``)."""
    return {k.decode() for k in brain.redis.keys("*")} - {CLAIM_KEY, MARKER_KEY}


def test_connect_turn_disconnect_leaves_exactly_the_documented_keys(lanes):
    brain = lanes.brain
    client = Client(SimpleNamespace(brain=brain), Principal("acme", "ada"))
    try:
        created = client.ok("session-create")
        sid, pid = created["session"]["id"], created["chatProcessId"]
        client.ok("client-tools-register", tools=[{"name": "fs_read"}])
        lanes.run_until_idle()  # the chat process's start turn
        client.ok("process-steer", targetThinkProcessId=pid, content="hello")
        lanes.run_until_idle()
        assert [m.content for m in brain.store.port(LaneStore).chat_history("acme", pid)][-1] == "echo: hello"
        assert _all_keys(brain) == {
            keys.event_seq(sid), keys.event_origin(sid), keys.events(sid),
            keys.event_published(sid), keys.ACTIVITY, keys.presence(sid), keys.PRESENCE_INDEX, keys.client_tools(sid),
            keys.user_presence("acme", "ada")}
    finally:
        client.close()
    # The connection is released after its writer ends (``Outbound.finish``): the last
    # client's leaving asks for the session's suspend (onDisconnect), a lane task.
    wait_for(lambda: lanes.tasks, what="the suspend's lane task")
    lanes.run_until_idle()
    assert brain.store.port(SessionStore).get_session("acme", sid).status is SessionStatus.SUSPENDED
    assert brain.store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.SUSPENDED

    everything = _all_keys(brain)
    assert everything == {keys.event_seq(sid), keys.event_origin(sid), keys.events(sid),
                          keys.event_published(sid), keys.ACTIVITY}
    for key in everything - {keys.ACTIVITY}:
        assert 0 < brain.redis.ttl(key) <= brain.config.event_log_ttl, key
    # The session's idle deadline stays until the sweeper drops it (or the session closes).
    (member, deadline), = brain.redis.zrange(keys.ACTIVITY, 0, -1, withscores=True)
    assert member.decode() == f"acme/{sid}"
    assert 0 < deadline - time.time() <= 1800
