"""Prometheus metrics of the distributed shape (issue 15): a gunicorn gateway's ``/metrics``
and a prefork worker pod's ``VANCETOPE_METRICS_PORT``, each in multiprocess mode with a
``PROMETHEUS_MULTIPROC_DIR`` of its own, scraped before and after 50 turns."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import wait_for
from tests.integration.conftest import Worker
from tests.integration.gateways import Gateway, Stack, running_stack

TURNS = 50
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def scrape(port: int, token: str | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics",
                     headers={"Authorization": f"Bearer {token}"} if token else {})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def stack(tmp_path: Path, redis_url: str) -> Iterator[Stack]:
    with running_stack(tmp_path, redis_url, VANCETOPE_METRICS_TOKEN="scrape-me") as stack:
        yield stack


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_metrics_move_by_the_right_amounts_over_50_turns(stack: Stack, tmp_path: Path) -> None:
    cluster = stack.cluster
    gateway_dir, worker_dir = tmp_path / "prom-web", tmp_path / "prom-worker"
    gateway_dir.mkdir()
    worker_dir.mkdir()
    web = Gateway("web1", {**cluster.env, "PROMETHEUS_MULTIPROC_DIR": str(gateway_dir)},
                  cluster.tmp)
    stack.gateways.append(web)
    web.wait_ready()

    def gateway() -> Samples:
        status, body = scrape(web.port, "scrape-me")
        assert status == 200, body
        return parse(body)

    assert scrape(web.port)[0] == 401  # VANCETOPE_METRICS_TOKEN is set
    assert value(gateway(), "vancetope_open_websockets") == 0
    client = stack.client(web)
    assert value(gateway(), "vancetope_open_websockets") == 1

    # No worker yet: the chat's start turn and a first message wait in the broker.
    created = client.request("session-create", title="metrics")
    pid = created["chatProcessId"]
    client.request("process-steer", targetThinkProcessId=pid, content="first")
    time.sleep(1.2)
    waiting = gateway()
    assert total(waiting, "vancetope_lane_queue_depth") == 1  # coalesced into one wake
    assert total(waiting, "vancetope_lanes_ready") == 1  # one process waits for both
    assert value(waiting, "vancetope_oldest_pending_message_age_seconds") >= 1.0

    metrics_port = free_port()
    worker = Worker("w1", cluster.tmp / "w1",
                    {**cluster.env, "PROMETHEUS_MULTIPROC_DIR": str(worker_dir),
                     "VANCETOPE_METRICS_PORT": str(metrics_port),
                     "VANCETOPE_LOG_FORMAT": "json"},
                    "echo", hold_commit=False, sweeping=False, pool="prefork")
    cluster.workers.append(worker)
    worker.wait_ready()
    cluster.wait_reply(pid, "first", timeout=60)

    def pod() -> Samples:
        status, body = scrape(metrics_port)
        assert status == 200, body
        return parse(body)

    def settled(committed: int) -> tuple[Samples, list[str]] | None:
        """The pod's scrape and the outcomes the worker logged, once it logged ``committed``
        committed turns and the pod counted every lane-turn task it logged as ended. The
        outcomes are read before the scrape: ``postrun`` is logged after the task returned,
        so after it counted, and equal totals then mean the two hold the same tasks (a task
        that ends later, say a wake that found nothing to do, is in neither)."""
        outcomes = worker.outcomes()
        if outcomes.count("committed") < committed:
            return None
        samples = pod()
        return (samples, outcomes) \
            if total(samples, "vancetope_turns_total") == len(outcomes) else None

    # Committed so far: the chat's start, then the turn that answered "first".
    before, ran_before = wait_for(lambda: settled(2), timeout=30, what="a settled scrape")

    def drained() -> Samples | None:
        """The gateway's scrape once no lane task waits in the broker and no message in a
        lane (a spare wake, queued after the turn it would have run, may still be there)."""
        samples = gateway()
        return samples if total(samples, "vancetope_lane_queue_depth") == 0 and value(
            samples, "vancetope_oldest_pending_message_age_seconds") == 0 else None

    wait_for(drained, timeout=30, what="the lane queues drained")

    contents = [f"m{i}-{uuid.uuid4().hex[:6]}" for i in range(TURNS)]
    for content in contents:
        client.request("process-steer", targetThinkProcessId=pid, content=content)
        cluster.wait_reply(pid, content, timeout=60)
    time.sleep(0.5)  # a task that found the last turn's lease taken ends meanwhile
    after, ran_after = wait_for(lambda: settled(2 + TURNS), timeout=30,
                                what="the turns counted")
    web_after = wait_for(drained, timeout=30, what="the lane queues drained")
    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # Turns ran in the pool's child processes; the pod's one port counts them all.
    assert moved("vancetope_turns_total", outcome="committed") == TURNS
    # Every other task (busy: it met the lease of a turn still running) counted as it ended.
    ran = ran_after[len(ran_before):]
    for outcome in set(ran):
        assert moved("vancetope_turns_total", outcome=outcome) == ran.count(outcome), outcome
    assert moved("vancetope_turn_duration_seconds_count", lifecycle="steer") == TURNS
    assert moved("vancetope_llm_request_duration_seconds_count", model="test-echo",
                 result="success") == TURNS
    assert moved("vancetope_events_published_total", type="chat-message") == 2 * TURNS
    assert moved("vancetope_fenced_commits_total") == moved("vancetope_dead_letters_total") == 0
    assert total(web_after, "vancetope_lanes_ready") == 0
    # The gateway counts its sockets, and holds no turn metrics of the workers.
    assert total(web_after, "vancetope_turns_total") == 0
    second = stack.client(web)
    assert value(gateway(), "vancetope_open_websockets") == 2
    second.close()
    client.close()
    wait_for(lambda: value(gateway(), "vancetope_open_websockets") == 0, timeout=15,
             what="the sockets counted closed")
    # The pod logged JSON lines only, its pool children too (Celery's start banner is
    # printed, not logged); the lane turns' own lines (Celery's, outside the turn) name
    # their task.
    output = worker.output_path.read_text().splitlines()
    assert not [line for line in output if re.match(r"\d{4}-\d\d-\d\d[ T]\d\d:", line)
                or re.match(r"\[\d{4}-", line)]
    lines = [json.loads(line) for line in output if line.startswith("{")]
    done = [r for r in lines if r["logger"] == "celery.app.trace"
            and r["data"]["name"] in ("vancetope.lane_shard", "vancetope.lane_turn")]
    assert done and all(r["level"] == "INFO" for r in done)
    # Tokens are counted by tenant and model when each turn commits (the echo model reports
    # no usage: estimated from the characters), so every turn moved both directions.
    for direction in ("in", "out"):
        assert moved("vancetope_llm_tokens_total", tenant="acme", model="test-echo",
                     direction=direction) >= TURNS
    # No label carries a user, session or process id; the tenant only the tokens' counter.
    text = scrape(web.port, "scrape-me")[1] + scrape(metrics_port)[1]
    for secret in ("ada", pid, created["session"]["id"]):
        assert f'"{secret}"' not in text
    assert [line for line in text.splitlines() if '"acme"' in line
            and not line.startswith("vancetope_llm_tokens_total{")] == []
