"""``/readyz`` of a gateway (gunicorn, as the Procfile runs it) says whether a lane turn it
enqueues would run: 503 naming the cause while no worker consumes the lane queues (or the
broker cannot be reached), 200 once a real Celery worker process does, 503 again as soon
as that worker stops. The worker's liveness file answers ``vancetope health``.
"""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest

from tests.helpers import wait_for
from tests.integration.gateways import Gateway, running_stack
from vancetope_brain import keys
from vancetope_brain.lanes import consumers
from vancetope_brain.runtime import redis_client
from vancetope_gateway.cli import main


def _ready(gateway: Gateway) -> tuple[int, dict]:
    status, body = gateway.get("/readyz")
    return status, json.loads(body) if body else {}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_readyz_follows_whether_a_worker_consumes_the_lanes(tmp_path, redis_url):
    alive = tmp_path / "worker-alive"
    with running_stack(tmp_path, redis_url, VANCETOPE_HEALTH_FILE=str(alive)) as stack:
        (gateway,) = stack.start_gateways(1)
        status, body = _ready(gateway)
        assert status == 503 and set(body["failures"]) == {"workers"}
        assert "no worker consumes any lane queue" in body["failures"]["workers"]
        assert "start a worker" in body["failures"]["workers"]
        assert main(["health", str(alive)]) == 1  # no worker has touched it

        (worker,) = stack.cluster.start_workers("echo")
        status, body = wait_for(lambda: (r := _ready(gateway))[0] == 200 and r, timeout=30,
                                interval=0.1, what="/readyz 200 with a worker")
        assert body == {"status": "ready", "workers": ["w1@localhost"]}
        assert main(["health", str(alive), "--max-age", "30"]) == 0

        worker.signal(signal.SIGTERM)  # warm shutdown: it stops consuming, then exits
        worker.popen.wait(timeout=60)
        status, body = _ready(gateway)
        assert status == 503 and "no worker consumes any lane queue" in body["failures"]["workers"]


def test_a_worker_that_died_without_a_word_stops_counting_after_its_ttl(redis_url, tmp_path):
    from tests.helpers import server_env
    from vancetope_brain.config import Config

    client = redis_client(Config.from_env(server_env(tmp_path, VANCETOPE_REDIS_URL=redis_url)))
    consumers.beat(client, "alive@host", ["lanes.0", "maintenance"])
    client.hset(keys.WORKERS, "killed@host",
                json.dumps({"queues": ["lanes.1"], "until": time.time() - 1}))
    live = consumers.live(client)
    assert live == {"alive@host": ["lanes.0", "maintenance"]}
    assert client.hkeys(keys.WORKERS) == [b"alive@host"]  # the stale entry is gone
    assert consumers.uncovered(live, ["lanes.0", "lanes.1"]) == ["lanes.1"]
    assert 0 < client.ttl(keys.WORKERS) <= consumers.HEARTBEAT_TTL + 1


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_readyz_names_a_broker_that_does_not_answer(tmp_path, redis_url):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens here once the socket is closed
    with running_stack(tmp_path, redis_url,
                       VANCETOPE_BROKER_URL=f"redis://127.0.0.1:{closed}/0") as stack:
        (gateway,) = stack.start_gateways(1)
        status, body = _ready(gateway)
        assert status == 503
        assert "the Celery broker does not answer" in body["failures"]["broker"]
        assert "VANCETOPE_BROKER_URL" in body["failures"]["broker"]
