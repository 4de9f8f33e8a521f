"""vogon with real Redis, a gunicorn gateway and real Celery worker processes: a three-phase
strategy under Arthur blocks on an APPROVAL checkpoint (Arthur hears the item's title), the
user answers over the WebSocket and the next phase runs; every worker is SIGKILLed in each
phase (inside Vogon's turn that takes a phase's report, held just before its commit, and at
the checkpoint) and the strategy still runs each phase exactly once. A rejected approval loops to its
bound and then follows onFail; an invalid strategy is refused on save with a field-named
error."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.gateways import Stack, next_push, running_stack
from vancetope_brain.errors import VancetopeError
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, ThinkProcess
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore

S = ProcessStatus
STRATEGY = {"name": "three", "phases": [
    {"name": "a", "recipe": "ford", "goal": "A for {{ input }}"},
    {"name": "b", "recipe": "ford", "goal": "B after {{ phases.a.output }} #{{ iteration }}",
     "checkpoint": {"type": "approval", "title": "Approve b for {{ input }}?"},
     "maxIterations": 2},
    {"name": "c", "recipe": "ford", "goal": "C after {{ phases.b.output }}"}]}



class Flow:
    def __init__(self, stack: Stack) -> None:
        self.stack, self.cluster = stack, stack.cluster
        self.store = self.cluster.brain.store
        self.cluster.brain.settings.unset("acme", SettingScope.tenant(),
                                          "session.defaultChatEngine")  # arthur
        self.cluster.start_workers("vogon-flow", "vogon-flow")
        self.cluster.start_sweeper()
        (gateway,) = stack.start_gateways(1)
        self.client = stack.client(gateway)
        created = self.client.request("session-create", title="vogon", onDisconnect="KEEP_OPEN")
        self.sid, self.chat = created["session"]["id"], created["chatProcessId"]

    def processes(self) -> list[ThinkProcess]:
        return self.store.port(SessionStore).list_processes("acme", self.sid)

    def vogon(self) -> ThinkProcess | None:
        return next((p for p in self.processes() if p.name == "v"), None)

    def phases(self) -> list[str]:
        v = self.vogon()
        return [p.name for p in self.processes() if v and p.parent_process_id == v.id]

    def restart_workers(self, release: Path | None = None) -> None:
        """SIGKILL every worker process (then let later turns through ``release``), then
        start as many new ones."""
        alive = [w for w in self.cluster.workers if w.popen.poll() is None]
        for worker in alive:
            worker.signal(signal.SIGKILL)
        for worker in alive:
            worker.popen.wait(timeout=10)
        if release is not None:
            release.touch()
        self.cluster.start_workers(*["vogon-flow"] * len(alive))

    def arthur_heard(self, text: str) -> bool:
        return any(m.role is ChatRole.ASSISTANT and m.content == text
                   for m in self.store.port(LaneStore).chat_history("acme", self.chat))


@pytest.mark.slow
def test_three_phases_with_an_approval_survive_kills_in_every_phase(tmp_path: Path,
                                                                     redis_url: str):
    holds = tmp_path / "holds"
    holds.mkdir()
    with running_stack(tmp_path, redis_url, VT_TEST_VOGON_HOLD=str(holds)) as stack:
        flow = Flow(stack)

        def kill_in_turn(gate: int) -> None:
            """SIGKILL every worker while Vogon's turn after its ``gate``-th gate is held
            just before its commit (so the turn is undone), then restart them."""
            wait_for(lambda: (holds / f"h{gate}.held").exists(), timeout=60,
                     what=f"vogon's turn after gate {gate}")
            flow.restart_workers(release=holds / f"h{gate}.release")

        flow.client.request("process-steer", targetThinkProcessId=flow.chat,
                            content="run " + json.dumps({"strategy": STRATEGY}))
        kill_in_turn(1)  # phase a has reported; the undone turn had spawned b

        item = next_push(flow.client, "inbox-item-added", timeout=60)["item"]
        # The item is written before Vogon's turn commits: a kill now may undo the turn, and
        # its re-run finds the same item by its idempotency key.
        flow.restart_workers()  # phase b, at its checkpoint
        assert (item["type"], item["title"]) == ("APPROVAL", "Approve b for the launch?")
        vogon = flow.vogon()
        assert vogon is not None and item["originProcessId"] == vogon.id
        wait_for(lambda: flow.vogon().status is S.BLOCKED, timeout=30)
        wait_for(lambda: flow.arthur_heard("heard blocked: Approve b for the launch?"),
                 timeout=30, what="Arthur hearing the BLOCKED event with the item's title")
        assert [i["id"] for i in flow.client.request("inbox-list")["items"]] == [item["id"]]

        answered = flow.client.request("inbox-answer", itemId=item["id"], outcome="DECIDED",
                                       value={"approved": True})["item"]
        assert answered["status"] == "ANSWERED"
        kill_in_turn(2)  # the approval passed b's gate; the undone turn had spawned c
        kill_in_turn(3)  # phase c has reported; the undone turn had finished the strategy

        wait_for(lambda: flow.vogon().status is S.CLOSED, timeout=60, what="vogon to finish")
        done = flow.vogon()
        state = done.engine_state["strategyState"]
        assert done.close_reason is CloseReason.DONE and state["outcome"] == "completed"
        assert sorted(flow.phases()) == ["a", "b", "c"]  # no phase was run twice
        assert [(h["phase"], h["iteration"]) for h in state["history"]] == [
            ("a", 1), ("b", 1), ("c", 1)]
        assert state["results"]["c"]["output"] == \
            "out(C after out(B after out(A for the launch) #1))"
        wait_for(lambda: flow.arthur_heard("heard done: " + state["report"]), timeout=30,
                 what="Arthur hearing the phase synthesis")
        assert len([p for p in flow.processes() if p.name == "v"]) == 1


@pytest.mark.slow
def test_a_rejected_approval_loops_to_its_bound_then_follows_on_fail(tmp_path: Path,
                                                                     redis_url: str):
    with running_stack(tmp_path, redis_url) as stack:
        flow = Flow(stack)
        bad = {"name": "bad", "phases": [{"name": "a", "recipe": "ford", "goal": "g",
                                          "onFail": "nowhere"}]}
        with pytest.raises(VancetopeError, match="invalid_input: strategy: phases.0.onFail: "
                                                 "no phase named 'nowhere'"):
            flow.client.request("strategy-create", strategy=bad)
        flow.client.request("strategy-create", strategy=STRATEGY)
        assert "three" in [s["name"] for s in flow.client.request("strategy-list")["strategies"]]

        flow.client.request("process-steer", targetThinkProcessId=flow.chat,
                            content="run " + json.dumps({"strategy": "three"}))
        for _ in (1, 2):
            item = next_push(flow.client, "inbox-item-added", timeout=60)["item"]
            assert item["title"] == "Approve b for the launch?"
            flow.client.request("inbox-answer", itemId=item["id"], outcome="DECIDED",
                                value={"approved": False})
        wait_for(lambda: flow.vogon().status is S.CLOSED, timeout=60, what="vogon to stop")
        state = flow.vogon().engine_state["strategyState"]
        assert state["outcome"] == "stopped"  # onFail: stop (the default)
        assert [(h["phase"], h["iteration"], h["gate"]) for h in state["history"]] == [
            ("a", 1, "passed"), ("b", 1, "failed"), ("b", 2, "failed")]
        assert sorted(flow.phases()) == ["a", "b", "b"]
        assert "The gate of phase b failed after 2 runs." in state["report"]
