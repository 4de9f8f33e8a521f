"""Scale-out (issue 3 §6): two gateway processes (gunicorn), two Celery worker processes,
one Redis and one SQLite file. Stream events reach whichever gateway holds a session's
socket, wherever the turn ran; a client that reconnects to the other gateway with its last
``seq`` gets exactly what it missed, then live events — connected directly, and through
Debian's nginx running ``deploy/nginx/vancetope.conf`` (sticky-free round robin), where the
access log shows that the client came back on the other gateway.

The workers run ``worker_main``'s ``stream`` model: ``echo: <message>``, one token event
per word, 0.1 s apart, so a reply to a 20-word message streams for about 2 s; in
``held_stack`` a reply stops after ``HELD_AFTER`` words until the test releases the
workers, so a client really drops, and comes back, in the middle of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.gateways import (
    Events,
    Gateway,
    Stack,
    running_stack,
    transcript,
    turn_done,
)
from tests.integration.nginx import Nginx, nginx_binary
from vancetope_brain.store import LaneStore

TOKEN_DELAY = 0.1
HELD_AFTER = 6


@contextlib.contextmanager
def _stack(tmp_path: Path, redis_url: str, **env: str) -> Iterator[Stack]:
    with running_stack(tmp_path, redis_url, VT_TEST_DELAY=str(TOKEN_DELAY), **env) as s:
        s.cluster.start_workers("stream", "stream")
        s.start_gateways(2)
        yield s


@pytest.fixture
def stack(tmp_path: Path, redis_url: str) -> Iterator[Stack]:
    with _stack(tmp_path, redis_url) as s:
        yield s


@pytest.fixture(params=["direct", "nginx"])
def held_stack(request: pytest.FixtureRequest, tmp_path: Path,
               redis_url: str) -> Iterator[tuple[Stack, Nginx | None]]:
    if request.param == "nginx":
        nginx_binary()  # before anything starts: fail (CI) or skip without nginx
    with _stack(tmp_path, redis_url, VT_TEST_STREAM_HOLD=str(HELD_AFTER)) as s:
        if request.param == "direct":
            yield s, None
            return
        proxy = Nginx([gateway.port for gateway in s.gateways])
        try:
            yield s, proxy
        finally:
            proxy.stop()
            proxy.remove()


def _words(label: str, count: int = 20) -> str:
    return " ".join(f"{label}{i}" for i in range(count))


def _contiguous(events: Events) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs


def _tokens(events: Events, pid: str) -> list[str]:
    return [e["data"]["text"] for e in events if e["processId"] == pid and e["type"] == "token"]


def _answer_seq(events: Events, pid: str, answer: str) -> int:
    return next(e["seq"] for e in events if e["processId"] == pid and e["type"] == "chat-message"
                and e["data"]["role"] == "assistant" and e["data"]["content"] == answer)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_client_on_gateway_a_receives_the_stream_of_a_message_sent_through_gateway_b(stack):
    web_a, web_b = stack.gateways
    on_a = stack.client(web_a)
    created = on_a.request("session-create", title="scale-out")
    sid, pid = created["session"]["id"], created["chatProcessId"]
    on_b = stack.client(web_b)  # the same user's second connection, on the other gateway
    resumed = on_b.request("session-resume", sessionId=sid, lastSeq=created["lastSeq"])
    assert resumed["session"]["status"] == "OPEN" and resumed["chatProcessId"] == pid

    content = _words("w")
    steer = on_b.request("process-steer", targetThinkProcessId=pid, content=content)
    assert steer["seq"] == 1 and not steer["duplicate"]
    answer = f"echo: {content}"
    seen = on_a.until(turn_done(pid, answer), timeout=60)

    mine = [e for e in seen if e["type"] == "token"]
    assert len(mine) == len(answer.split()) >= 20
    assert "".join(_tokens(seen, pid)) == answer
    # Really streamed: the tokens were published over the model's run, one by one ...
    at = [datetime.fromisoformat(e["at"]) for e in mine]
    assert (at[-1] - at[0]).total_seconds() >= (len(mine) - 1) * TOKEN_DELAY * 0.8
    # ... before the committed lines (the user's message, then the answer).
    lines = [(e["data"]["role"], e["data"]["content"]) for e in seen if e["type"] == "chat-message"]
    assert lines == [("user", content), ("assistant", answer)]
    last_token = max(i for i, e in enumerate(seen) if e["type"] == "token")
    assert last_token < next(i for i, e in enumerate(seen)
                             if e["type"] == "chat-message" and e["data"]["role"] == "assistant")
    assert {e["sessionId"] for e in seen} == {sid}
    _contiguous(seen)
    # The sender's gateway streamed the very same events.
    on_b.until(turn_done(pid, answer), timeout=30)
    assert transcript(on_b.events) == transcript(
        [e for e in seen if e["seq"] > created["lastSeq"]])
    assert on_a.gaps == on_b.gaps == []
    # The turns ran in the worker processes, not in a gateway.
    workers = {r.worker for r in stack.cluster.brain.store.port(LaneStore).turn_records("acme", pid)}
    assert workers <= {w.worker_id for w in stack.cluster.workers}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_client_dropped_mid_stream_resumes_on_the_other_gateway_with_the_same_transcript(
        held_stack):
    stack, nginx = held_stack
    web_a, web_b = stack.gateways
    # Direct: watcher and dropper on A, the dropper back on B. Through nginx (round robin):
    # watcher on A, dropper on B, back on A — the access log says so below.
    def url(gateway: Gateway, tag: str) -> Gateway | str:
        return gateway if nginx is None else nginx.url(tag)

    watcher = stack.client(url(web_a, "watcher"))  # never drops
    created = watcher.request("session-create", title="drop and resume")
    sid, pid = created["session"]["id"], created["chatProcessId"]
    dropper = stack.client(url(web_a, "dropper"))
    dropper.request("session-resume", sessionId=sid, lastSeq=0)  # everything, like the watcher

    first = _words("a")
    watcher.request("process-steer", targetThinkProcessId=pid, content=first)
    dropper.until(lambda ev: len(_tokens(ev, pid)) >= 4, timeout=60)
    dropper.drop()  # the network goes: no close frame
    before = dropper.drain()  # every frame that did arrive before the drop
    last_seq = before[-1]["seq"]

    again = stack.client(url(web_b, "again"))  # the same client, back on the other gateway
    resumed = again.request("session-resume", sessionId=sid, lastSeq=last_seq)
    for worker in stack.cluster.workers:  # the reply goes on streaming
        worker.release()
    first_answer = f"echo: {first}"
    after = again.until(turn_done(pid, first_answer), timeout=60)
    # Mid-stream indeed: tokens of the first reply were still coming when the client left,
    # and the reply was not yet committed when it came back (replay, then live).
    assert 4 <= len(_tokens(before, pid)) <= HELD_AFTER < len(first_answer.split())
    assert resumed["lastSeq"] < _answer_seq(after, pid, first_answer)

    # A second message, sent through the other gateway, reaches both.
    second = _words("b", 8)
    again.request("process-steer", targetThinkProcessId=pid, content=second)
    second_answer = f"echo: {second}"
    again.until(turn_done(pid, second_answer), timeout=60)
    watched = watcher.until(turn_done(pid, second_answer), timeout=60)

    resumed_transcript = transcript(before) + transcript(after)
    assert resumed_transcript == transcript(watched)
    seqs = [seq for seq, *_ in resumed_transcript]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # contiguous, no duplicate
    # ... and it is the session's whole event log, from its first event on.
    log = stack.cluster.brain.events.read(sid, 0)
    assert resumed_transcript == [(e.seq, e.process_id, e.type.value, e.data) for e in log]
    assert after[0]["seq"] == last_seq + 1
    assert again.gaps == watcher.gaps == []
    assert "".join(_tokens(watched, pid)) == first_answer + second_answer
    history = again.request("chat-history", processId=pid)["messages"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", first), ("assistant", first_answer), ("user", second),
        ("assistant", second_answer)]
    if nginx is not None:  # which gateway nginx sent each connection to
        again.close()
        served = wait_for(lambda: (u := nginx.upstreams()).keys() >= {"dropper", "again"} and u,
                          timeout=15, what="nginx's access log of both connections")
        ports = {web_a.port, web_b.port}
        assert len(served["dropper"]) == len(served["again"]) == 1
        assert {served["dropper"][0], served["again"][0]} == ports  # back on the other one
