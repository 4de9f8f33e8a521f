"""A catastrophic pattern in a STRUCTURE_EDIT schema cannot stall the gateway (issue 12):
real server in a thread, real sockets. While Ada answers an item whose schema has the pattern
``^(a+)+$`` with 10,000 characters, another tenant's ping round trips stay fast.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time

from vancetope_brain.models.inbox import ItemType, NewItem
from vancetope_gateway.chat_client import WebSocketClient

ROUNDS = 20


def _connect(host: str, token: str) -> WebSocketClient:
    ws = WebSocketClient.connect(f"ws://{host}/ws?token={token}")
    assert json.loads(ws.receive(timeout=5))["type"] == "welcome"
    return ws


def _request(ws: WebSocketClient, frame_id: str, frame_type: str, **data) -> dict:
    ws.send(json.dumps({"type": frame_type, "id": frame_id, "data": data}))
    while True:  # pushes (the pending summary, new items) may come first
        frame = json.loads(ws.receive(timeout=5))
        if frame.get("replyTo") == frame_id:
            return frame


def test_a_catastrophic_pattern_answered_over_the_socket_leaves_other_tenants_fast(
        embedded, served):
    brain = embedded.brain
    with contextlib.suppress(Exception):
        brain.identity.create_tenant("initech", "initech")
        brain.identity.create_user("initech", "peter", "peter")
    item, _ = brain.inbox.create("acme", "ada", NewItem(
        type=ItemType.STRUCTURE_EDIT, title="evil pattern",
        payload={"schema": {"type": "string", "pattern": "^(a+)+$"}, "value": "a"}))
    ada = _connect(served, brain.identity.issue_token("acme", "ada"))
    peter = _connect(served, brain.identity.issue_token("initech", "peter"))
    _request(peter, "warm", "ping")  # the first frame of a connection pays for its set-up
    round_trips: list[float] = []
    answering = threading.Event()
    done = threading.Event()

    def ping() -> None:
        count = 0
        while not done.is_set():
            count += 1
            start = time.perf_counter()
            assert _request(peter, f"p{count}", "ping")["type"] == "ping"
            if answering.is_set():
                round_trips.append((time.perf_counter() - start) * 1000)
            time.sleep(0.002)

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    try:
        answering.set()
        started = time.perf_counter()
        for n in range(ROUNDS):
            refused = _request(ada, f"a{n}", "inbox-answer", itemId=item.id, outcome="DECIDED",
                               value={"value": "a" * 9999 + "b"})
            assert refused["type"] == "error" and refused["data"]["code"] == "invalid_input"
            assert "does not match '^(a+)+$'" in refused["data"]["message"]
        answered = _request(ada, "ok", "inbox-answer", itemId=item.id, outcome="DECIDED",
                            value={"value": "a" * 10_000})
        answer_ms = (time.perf_counter() - started) * 1000
        time.sleep(0.05)  # a few pings after the last answer as well
    finally:
        done.set()
        pinger.join(10)
        for ws in (ada, peter):
            ws.close()
    assert answered["data"]["item"]["status"] == "ANSWERED"
    print(f"\n{ROUNDS} refused + 1 accepted 10,000-character answers over the socket in "
          f"{answer_ms:.0f} ms wall; other tenant's ping round trip over {len(round_trips)} "
          f"pings: max {max(round_trips):.1f} ms, p50 {statistics.median(round_trips):.1f} ms")
    assert len(round_trips) >= 5
    assert max(round_trips) < 50
