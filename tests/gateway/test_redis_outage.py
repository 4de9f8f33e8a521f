"""A request that meets a Redis outage is answered with the stable code ``runtime_failure``
and told to send again, instead of ``internal``; sent again with its idempotency key once
Redis is back, the message is stored and answered once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import wait_for
from vancetope_brain import runtime
from vancetope_brain.errors import REDIS_DOWN, VancetopeError
from vancetope_brain.models import ChatRole
from vancetope_brain.store import LaneStore
from vancetope_gateway.chat_client import ChatClient


@pytest.fixture
def client(emb, served) -> Iterator[ChatClient]:
    opened = ChatClient(f"ws://{served}/ws",
                        emb.brain.identity.issue_token("acme", "ada", label="outage test"))
    yield opened
    opened.close()


def test_a_steer_that_meets_a_redis_outage_says_so_and_a_retry_lands_once(emb, client):
    pid = client.request("session-create", title="outage")["chatProcessId"]
    emb.worker.join()
    server = runtime._embedded_server
    assert server is not None
    server.connected = False  # Redis is down (fakeredis raises ConnectionError)
    try:
        with pytest.raises(VancetopeError) as refused:
            client.request("process-steer", targetThinkProcessId=pid, content="hello",
                           idempotencyKey="k-1")
    finally:
        server.connected = True
    assert (refused.value.code, str(refused.value)) == ("runtime_failure",
                                                        f"runtime_failure: {REDIS_DOWN}")
    client.request("process-steer", targetThinkProcessId=pid, content="hello",
                   idempotencyKey="k-1")
    lanes = emb.brain.store.port(LaneStore)
    wait_for(lambda: any(line.role is ChatRole.ASSISTANT and "hello" in line.content
                         for line in lanes.chat_history("acme", pid)), what="the answer")
    assert [line.content for line in lanes.chat_history("acme", pid)
            if line.role is ChatRole.USER] == ["hello"]
