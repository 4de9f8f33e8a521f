"""The distributed shape end to end, started as the Procfile starts it: two gateway processes
(gunicorn, gthread) and a worker (``celery -A workers.main worker``, the offline demo
model; solo, or gevent as ``WORKER_POOL=gevent`` runs it), one Redis, one SQLite file; clients are ``vancetope_gateway.chat_client.ChatClient``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import queue
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from simple_websocket import ConnectionClosed

from tests.integration.conftest import Cluster, tail
from tests.integration.gateways import Client, CoalescingProxy, Gateway, Proc
from vancetope_brain.errors import Unauthorized
from vancetope_brain.llm import LlmMessage
from vancetope_brain.llm.demo import demo_answer
from vancetope_brain.models import ChatRole
from vancetope_brain.store import LaneStore
from vancetope_gateway.chat_client import ChatClient

MAX_FRAME_BYTES = 4096


class Distributed:
    def __init__(self, cluster: Cluster, pool: tuple[str, int] = ("solo", 1)) -> None:
        self.cluster = cluster
        self.pool = pool
        self.procs: list[Proc] = []
        self.token = cluster.brain.identity.issue_token("acme", "ada", label="e2e")

    def start(self) -> None:
        self.gateways = [self._start(Gateway(f"web{i}", self.cluster.env, self.cluster.tmp))
                         for i in (1, 2)]
        # ``-m celery`` runs the ``celery`` command's entry point, which monkey-patches a
        # gevent worker before it imports the app.
        self.worker = self._start(Proc("worker", [
            sys.executable, "-m", "celery", "-A", "workers.main", "worker",
            f"--pool={self.pool[0]}", f"--concurrency={self.pool[1]}", "--loglevel=WARNING",
            "-n", "e2e@localhost", "--without-mingle", "--without-gossip"],
            self.cluster.env, self.cluster.tmp))
        for gateway in self.gateways:
            gateway.wait_ready()

    def _start(self, proc: Proc) -> Any:
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            proc.stop()
        for proc in self.procs:
            print(f"--- {proc.name} output:\n{tail(proc.output_path)}")


@pytest.fixture
def dist(tmp_path: Path, redis_url: str) -> Iterator[Distributed]:
    # The demo pauses between words longer than the worker's token flush, as `serve`'s
    # does, so the reply arrives as several token events.
    cluster = Cluster(tmp_path, redis_url, VANCETOPE_MAX_FRAME_BYTES=str(MAX_FRAME_BYTES),
                      VANCETOPE_DEMO_TOKEN_DELAY="0.01")
    try:
        d = Distributed(cluster)
        try:
            d.start()
            yield d
        finally:
            d.stop()
    finally:
        cluster.close()


@pytest.fixture
def gevent_dist(tmp_path: Path, redis_url: str) -> Iterator[Distributed]:
    """The distributed shape with its worker on the gevent pool (``WORKER_POOL=gevent``)."""
    cluster = Cluster(tmp_path, redis_url, VANCETOPE_DEMO_TOKEN_DELAY="0.01")
    try:
        d = Distributed(cluster, pool=("gevent", 20))
        try:
            d.start()
            yield d
        finally:
            d.stop()
    finally:
        cluster.close()


def _answer(content: str) -> str:
    """What the offline demo model answers to a conversation whose last user line is this."""
    return demo_answer([LlmMessage("user", content)])


def _turn_done(content: str) -> Callable[[list[dict[str, Any]]], bool]:
    """True once the assistant answered ``content`` and the process went back to IDLE."""
    def done(events: list[dict[str, Any]]) -> bool:
        answered = [i for i, e in enumerate(events) if e["type"] == "chat-message"
                    and e["data"]["role"] == "assistant"
                    and e["data"]["content"] == _answer(content)]
        return bool(answered) and any(
            e["type"] == "status-changed" and e["data"]["to"] == "IDLE"
            for e in events[answered[0]:])
    return done


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_streamed_reply_through_gunicorn_and_a_celery_worker_reaches_both_gateways(dist):
    web1, web2 = dist.gateways
    alice = Client(web1.url, dist.token)
    watcher = None
    try:
        assert alice.chat.welcome["type"] == "welcome"
        assert alice.chat.welcome["data"]["maxFrameBytes"] == MAX_FRAME_BYTES
        created = alice.request("session-create", title="e2e")
        pid, sid = created["chatProcessId"], created["session"]["id"]
        steer = alice.request("process-steer", targetThinkProcessId=pid, content="hello")
        assert steer["seq"] == 1 and not steer["duplicate"]
        events = alice.until(_turn_done("hello"))

        expected = _answer("hello")
        first = events[0]["seq"]
        assert [e["seq"] for e in events] == list(range(first, first + len(events)))
        assert {e["sessionId"] for e in events} == {sid}
        mine = [e for e in events if e["processId"] == pid]
        tokens = [e["data"]["text"] for e in mine if e["type"] == "token"]
        assert len(tokens) > 1 and "".join(tokens) == expected
        lines = [e["data"] for e in mine if e["type"] == "chat-message"]
        assert [(x["role"], x["content"]) for x in lines] == [
            ("user", "hello"), ("assistant", expected)]
        last_token = max(i for i, e in enumerate(events) if e["type"] == "token")
        answer = next(i for i, e in enumerate(events) if e["type"] == "chat-message"
                      and e["data"]["role"] == "assistant")
        assert last_token < answer  # streamed first, committed after

        # The other gateway process replays exactly what a client missed, then goes live.
        cut = len(events) // 2
        watcher = Client(web2.url, dist.token)
        resumed = watcher.request("session-resume", sessionId=sid, lastSeq=events[cut - 1]["seq"])
        assert resumed["chatProcessId"] == pid and resumed["lastSeq"] == events[-1]["seq"]
        assert watcher.until(lambda ev: len(ev) >= len(events) - cut) == events[cut:]
        alice.request("process-steer", targetThinkProcessId=pid, content="again")
        both = alice.until(_turn_done("again"))
        watched = watcher.until(lambda ev: len(ev) >= len(both) - cut)
        assert watched == both[cut:]
        assert watcher.gaps == []
        assert [e["seq"] for e in both] == list(range(first, first + len(both)))
        history = watcher.request("chat-history", processId=pid)["messages"]
        assert [(m["role"], m["content"]) for m in history] == [
            ("user", "hello"), ("assistant", expected),
            ("user", "again"), ("assistant", _answer("again"))]
    finally:
        alice.close()
        if watcher is not None:
            watcher.close()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_gevent_worker_streams_concurrent_turns_with_their_tokens_in_order(gevent_dist):
    """Four sessions steered at once: their turns run side by side in the worker's greenlets
    (the demo model sleeps between words, which only yields under the patched ``time``), each
    streams its reply's tokens in order, before its chat lines."""
    web = gevent_dist.gateways[0]
    clients = [Client(web.url, gevent_dist.token) for _ in range(4)]
    try:
        pids = [c.request("session-create", title=f"g{i}")["chatProcessId"]
                for i, c in enumerate(clients)]
        contents = [f"hello from {i}, streaming" for i in range(4)]
        for client, pid, content in zip(clients, pids, contents, strict=True):
            client.request("process-steer", targetThinkProcessId=pid, content=content)
        runs = [client.until(_turn_done(content))
                for client, content in zip(clients, contents, strict=True)]
        for events, pid, content in zip(runs, pids, contents, strict=True):
            mine = [e for e in events if e["processId"] == pid]
            tokens = [e["data"]["text"] for e in mine if e["type"] == "token"]
            assert len(tokens) > 1 and "".join(tokens) == _answer(content)
            last_token = max(i for i, e in enumerate(mine) if e["type"] == "token")
            lines = [(i, e["data"]) for i, e in enumerate(mine) if e["type"] == "chat-message"]
            assert [(x["role"], x["content"]) for _, x in lines] == [
                ("user", content), ("assistant", _answer(content))]
            assert last_token < lines[-1][0]  # streamed first, committed after
        # Side by side, not one after another: each turn's RUNNING came before the last
        # turn's reply was committed.
        running = [next(datetime.fromisoformat(e["at"]) for e in ev
                        if e["type"] == "status-changed" and e["data"]["to"] == "RUNNING")
                   for ev in runs]
        replied = [next(datetime.fromisoformat(e["at"]) for e in ev
                        if e["type"] == "chat-message" and e["data"]["role"] == "assistant")
                   for ev in runs]
        assert max(running) < min(replied)
        assert "(gevent)" in gevent_dist.worker.output_path.read_text()
    finally:
        for client in clients:
            client.close()


@pytest.mark.slow
def test_resume_from_scratch_replays_the_whole_kept_log_without_an_events_gap(dist):
    """A client that saw no event yet (``lastSeq`` 0) missed nothing while the whole log is
    kept; docs/protocol.md promises ``events-gap`` only when asked-for events are gone.
    """
    alice = Client(dist.gateways[0].url, dist.token)
    bob = None
    try:
        created = alice.request("session-create")
        pid, sid = created["chatProcessId"], created["session"]["id"]
        alice.request("process-steer", targetThinkProcessId=pid, content="hello")
        events = alice.until(_turn_done("hello"))
        bob = Client(dist.gateways[1].url, dist.token)
        bob.request("session-resume", sessionId=sid, lastSeq=0)
        assert bob.until(lambda ev: len(ev) >= len(events)) == events
        assert bob.gaps == [], "events-gap although every event of the session is still kept"
    finally:
        alice.close()
        if bob is not None:
            bob.close()


def _upgrade_headers(**extra: str) -> dict[str, str]:
    return {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", **extra}


@pytest.mark.slow
def test_unauthenticated_websocket_is_refused_with_401_before_the_upgrade(dist):
    web = dist.gateways[0]
    for path, headers in [("/ws", {}), ("/ws", {"Authorization": "Bearer vt_not-a-token"}),
                          ("/ws?token=vt_not-a-token", {}), ("/ws", {"Authorization": "Basic x"})]:
        status, body = web.get(path, _upgrade_headers(**headers))
        assert status == 401, (path, headers, status, body)
        assert json.loads(body)["code"] == "unauthorized"
    # The same upgrade with a real token is accepted, so the 401s are about the token.
    ok = Client(web.url, dist.token)
    assert ok.chat.welcome["data"]["userId"] == "ada"
    ok.close()


@pytest.mark.slow
def test_chat_client_reports_a_refused_token_as_unauthorized_and_leaks_no_socket(dist):
    """``vancetope chat`` with a wrong token should say so, not print a traceback.

    simple_websocket raises its ``ConnectionError`` (a RuntimeError, not an OSError
    and not ``ConnectionClosed``) for a rejected handshake, and leaves that socket open.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        try:
            ChatClient(dist.gateways[0].url, "vt_not-a-token")
        except Unauthorized:
            escaped = None
        except Exception as e:  # reported below; the traceback dies with this block
            escaped = repr(e)
        else:
            pytest.fail("ChatClient connected with a token the gateway does not know")
        gc.collect()  # a socket the refused handshake left open warns here
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert (escaped, leaked) == (None, []), (
        f"ChatClient let {escaped} escape instead of raising Unauthorized; leaked: {leaked}")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_frame_over_the_limit_closes_with_1009_and_stores_nothing(dist):
    web1, web2 = dist.gateways
    client = Client(web1.url, dist.token)
    other = None
    try:
        created = client.request("session-create")
        pid, sid = created["chatProcessId"], created["session"]["id"]
        steer = client.request("process-steer", targetThinkProcessId=pid, content="small")
        assert steer["seq"] == 1
        client.until(_turn_done("small"))
        huge = "x" * (MAX_FRAME_BYTES + 1000)
        client.chat._ws.send(json.dumps({"type": "process-steer", "id": "big", "data": {
            "targetThinkProcessId": pid, "content": huge}}))
        client.until(lambda _: client.closed, timeout=15)
        assert client.chat._ws.close_reason == 1009

        # The next message on the process gets seq 2 and is answered: the big one never
        # reached the inbox, the chat or the worker.
        other = Client(web2.url, dist.token)
        other.request("session-resume", sessionId=sid, lastSeq=0)
        assert other.request("process-steer", targetThinkProcessId=pid, content="after")["seq"] == 2
        other.until(_turn_done("after"))
        store = dist.cluster.brain.store
        assert [(x.role, x.content) for x in store.port(LaneStore).chat_history("acme", pid)] == [
            (ChatRole.USER, "small"), (ChatRole.ASSISTANT, _answer("small")),
            (ChatRole.USER, "after"), (ChatRole.ASSISTANT, _answer("after"))]
        assert not store.port(LaneStore).pending_messages("acme", pid)
    finally:
        client.close()
        if other is not None:
            other.close()


def _connect_in_time(make: Callable[[], Any], within: float) -> tuple[float | None, Any]:
    """(seconds until ``make()`` returned, or None if it did not within ``within``; result)."""
    done: queue.Queue[tuple[float, Any]] = queue.Queue()
    started = time.monotonic()

    def run() -> None:
        try:
            result = make()
        except Exception as e:  # the proxy was closed under it
            result = e
        done.put((time.monotonic() - started, result))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        took, result = done.get(timeout=within)
    except queue.Empty:
        return None, None
    return took, result


@pytest.mark.slow
def test_chat_client_gets_a_welcome_that_arrives_with_the_101_at_once(dist):
    """simple_websocket 1.1's client reads the handshake's 101 with one ``recv``; a frame that
    arrives in the same read (the gateway's ``welcome``, sent right behind the 101) stayed in
    wsproto's buffer until the next read returned — the server's ping, 25 s later — so
    ``ChatClient()`` and ``vancetope chat`` hung for 25 s now and then on a loaded machine.
    The proxy makes the coalescing certain; ``ChatClient`` must not wait for the ping.
    """
    proxy = CoalescingProxy(dist.gateways[0].port)
    try:
        took, client = _connect_in_time(lambda: ChatClient(proxy.url, dist.token), 5)
    finally:
        proxy.close()  # also ends a ChatClient still waiting for its welcome
    if isinstance(client, ChatClient):
        with contextlib.suppress(ConnectionClosed):
            client.close()
        client._ws.thread.join(timeout=10)
    assert took is not None, "ChatClient() got no welcome within 5 s (it would arrive with " \
        "the server's ping after 25 s)"
    assert isinstance(client, ChatClient) and client.welcome["type"] == "welcome", client
