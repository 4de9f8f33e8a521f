"""SIGTERM, as a platform stops a pod: a worker finishes the turn it runs and exits without
taking another; a gateway closes its WebSockets with 1001 "going away" and its clients
resume on another gateway."""

from __future__ import annotations

import signal
import time

import pytest

from tests.helpers import wait_for
from tests.integration.gateways import running_stack, turn_done
from vancetope_brain.store import LaneStore


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_sigterm_on_a_worker_finishes_its_turn_and_takes_no_other(cluster):
    (first,) = cluster.start_workers("block", pool="prefork")  # a pod's pool, as the Procfile
    pid = cluster.new_chat()
    cluster.steer(pid, "one")
    wait_for(first.started.exists, timeout=30, what="the turn to reach the model")
    first.signal(signal.SIGTERM)
    time.sleep(1)  # time enough to take another task if it would
    cluster.steer(pid, "two")
    assert first.popen.poll() is None  # still finishing the turn
    first.release()
    assert first.popen.wait(timeout=60) == 0
    assert [line.content for line in cluster.chat(pid) if line.role.value == "assistant"] == \
        ["echo: one"]

    (second,) = cluster.start_workers("echo")
    cluster.wait_reply(pid, "two", timeout=30)
    answers = [line.content for line in cluster.chat(pid) if line.role.value == "assistant"]
    assert answers == ["echo: one", "echo: two"]  # nothing lost, nothing twice
    records = cluster.brain.store.port(LaneStore).turn_records("acme", pid)
    assert records[-1].worker == second.worker_id  # "two" waited for the next worker


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_sigterm_on_a_gateway_closes_its_sockets_with_going_away(tmp_path, redis_url):
    with running_stack(tmp_path, redis_url) as stack:
        stack.cluster.start_workers("echo")
        web_a, web_b = stack.start_gateways(2)
        client = stack.client(web_a)
        created = client.request("session-create", title="going away")
        sid, pid = created["session"]["id"], created["chatProcessId"]
        client.request("process-steer", targetThinkProcessId=pid, content="before")
        client.until(turn_done(pid, "echo: before"))
        web_a.popen.send_signal(signal.SIGTERM)  # gunicorn's arbiter, as a platform does
        client.until(lambda _: client.closed, timeout=30)
        assert client.chat._closed_with == (1001, "going away")
        assert web_a.popen.wait(timeout=30) == 0

        again = stack.client(web_b)
        last = client.events[-1]["seq"]
        again.request("session-resume", sessionId=sid, lastSeq=last)
        again.request("process-steer", targetThinkProcessId=pid, content="after")
        after = again.until(turn_done(pid, "echo: after"))
        assert after[0]["seq"] == last + 1 and again.gaps == []
