"""No template stalls the server (issue 12): through the protocol, the attack templates are
refused within 100 ms of the connection thread's CPU; over real sockets, while tenant A saves
them (and runs a process whose prompt blows up only with its params), tenant B's pings stay
under 50 ms."""

from __future__ import annotations

import json
import re
import statistics
import threading
import time

import pytest

from tests.gateway.wire import Client, wait_process
from tests.helpers import without_gc
from tests.recipes.attacks import ATTACKS, LATER
from vancetope_brain.identity import Principal
from vancetope_brain.models import ProcessStatus
from vancetope_brain.store import LaneStore
from vancetope_gateway.chat_client import WebSocketClient

CPU_BOUND_MS = 100
PING_BOUND_MS = 50
STALL_BOUND_MS = 1000
"""No ping of another tenant waits this long. Each attack, unbounded, would hold the
interpreter for seconds; the render budget stops it within 50 ms of CPU, and what a loaded
test machine adds to one ping on top (up to ~200 ms seen with the whole suite on 2 cores)
is not the attack's doing, so the typical ping is held to ``PING_BOUND_MS``."""


def _recipe(name: str, template: str, params: dict) -> dict:
    return {"name": name, "engine": "ford", "params": params, "promptPrefix": template}


def _cpu_ms(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident)) * 1000


@pytest.mark.parametrize("name", ATTACKS)
def test_an_attack_frame_is_refused_within_100_ms_of_cpu(client: Client, name: str) -> None:
    template, params = ATTACKS[name]
    client.request("ping")  # the hub's frame thread has served a frame: ``client.thread``
    with without_gc():
        before = _cpu_ms(client.thread)
        message = client.refused("recipe-create", "invalid_input",
                                 recipe=_recipe("attack", template, params))
        cpu_ms = _cpu_ms(client.thread) - before
    print(f"\n{name}: recipe-create refused in {cpu_ms:.1f} ms of the connection's CPU")
    assert cpu_ms < CPU_BOUND_MS
    assert "promptPrefix" in message and ("render budget" in message or "not allowed" in message)


def test_strategies_and_templates_are_test_rendered_on_save(client: Client) -> None:
    loop = ATTACKS["a 10^9-iteration loop"][0]
    message = client.refused("strategy-create", "invalid_input", strategy={
        "name": "slow", "phases": [{"name": "a", "recipe": "ford", "goal": loop}]})
    assert "phases.0.goal: template exceeded its render budget" in message
    message = client.refused("template-create", "invalid_input", template={
        "name": "slow", "aggregate": ATTACKS["power"][0], "steps": [{"goal": "{{ goal }}"}]})
    assert "aggregate: template exceeded its render budget" in message


def test_one_definition_over_the_tenant_cap_answers_limit_exceeded(
        emb, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emb.brain.recipe_admin, "max_per_tenant", 2)
    try:
        client.ok("recipe-create", recipe=_recipe("capped-1", "one", {}))
        client.ok("recipe-create", projectId="default", recipe=_recipe("capped-2", "two", {}))
        client.ok("recipe-update", recipe=_recipe("capped-1", "one, edited", {}))
        message = client.refused("recipe-create", "limit_exceeded",
                                 recipe=_recipe("capped-3", "three", {}))
        assert "already has 2 recipe definitions" in message
        assert "capped-3" not in {r["name"] for r in client.ok("recipe-list")["recipes"]}
    finally:
        client.ok("recipe-delete", name="capped-1")
        client.ok("recipe-delete", projectId="default", name="capped-2")


class _Socket:
    """A real WebSocket client of the served gateway, one request at a time."""

    def __init__(self, host: str, token: str) -> None:
        self.ws = WebSocketClient.connect(f"ws://{host}/ws?token={token}")
        self._n = 0

    def request(self, frame_type: str, **data) -> dict:
        self._n += 1
        rid = f"r{self._n}"
        self.ws.send(json.dumps({"type": frame_type, "id": rid, "data": data}))
        while True:  # welcome, inbox summary and events come in between
            frame = json.loads(self.ws.receive(timeout=10))
            if frame.get("replyTo") == rid:
                return frame

    def close(self) -> None:
        self.ws.close()


class _Pinger(threading.Thread):
    """Tenant B pinging in a loop; ``rtts`` in ms."""

    def __init__(self, host: str, token: str) -> None:
        super().__init__(daemon=True)
        self.socket = _Socket(host, token)
        self.socket.request("ping")  # connected and welcomed before the clock starts
        self.rtts: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            started = time.perf_counter()
            assert self.socket.request("ping")["type"] == "ping"
            self.rtts.append((time.perf_counter() - started) * 1000)
            time.sleep(0.002)

    def stop(self) -> list[float]:
        self.done.set()
        self.join(10)
        self.socket.close()
        return self.rtts


@pytest.fixture(scope="module")
def tenants(embedded, served):
    identity = embedded.brain.identity
    identity.create_tenant("globex", "globex")
    identity.create_user("globex", "gus", "gus")
    return served, identity.issue_token("acme", "ada"), identity.issue_token("globex", "gus")


def test_another_tenants_pings_stay_fast_while_attacks_are_saved_and_run(emb, tenants) -> None:
    host, token_a, token_b = tenants
    a = _Socket(host, token_a)
    pinger = _Pinger(host, token_b)
    pinger.start()
    try:
        for name, (template, params) in ATTACKS.items():
            started = time.perf_counter()
            reply = a.request("recipe-create", recipe=_recipe("attack", template, params))
            print(f"\n{name}: refused in {(time.perf_counter() - started) * 1000:.1f} ms")
            assert reply["data"]["code"] == "invalid_input", reply

        # Saved (harmless with its own params), then run with params that blow it up.
        template, params = LATER
        assert a.request("recipe-create", recipe=_recipe("later", template, params))[
            "type"] == "recipe-create"
        a.request("session-create", onDisconnect="KEEP_OPEN")
        process = a.request("process-create", recipe="later", goal="count",
                            params={"n": 100000})["data"]["process"]
        wait_process(emb, Principal("acme", "ada"), process["id"], ProcessStatus.CLOSED)
        errors = [m.content for m in emb.brain.store.port(LaneStore).chat_history(
            "acme", process["id"]) if m.role.value == "error"]
        # Its loops reach 10,000 iterations at about the time they reach 50 ms of CPU: on a
        # busy machine the CPU cap may stop it first. Either is the render budget.
        assert any(re.search(r"template exceeded its render budget: more than "
                             r"(10,000 loop iterations|50 ms of CPU)", e)
                   for e in errors), errors
    finally:
        rtts = pinger.stop()
        a.request("recipe-delete", name="later")
        a.close()
    print(f"\ntenant B: {len(rtts)} pings, max {max(rtts):.1f} ms, "
          f"p50 {statistics.median(rtts):.1f} ms")
    assert len(rtts) >= 10
    assert statistics.median(rtts) < PING_BOUND_MS
    assert max(rtts) < STALL_BOUND_MS
