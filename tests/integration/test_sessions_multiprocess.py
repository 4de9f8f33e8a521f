"""The session lifecycle across OS processes (issue 3, think-engines §5-§6): ``onDisconnect``
SUSPEND / KEEP_OPEN / CLOSE applied when a session's last client goes away, and no turn on
a suspended process until it is resumed.

Real Redis, a gunicorn gateway process (``vancetope_gateway.wsgi:app``), a Celery worker
process (``worker_main``, ``echo`` model) and one SQLite file. The test process plays
beat (a worker's ``sweep()`` every 0.3 s) and the store-level sender (``brain.sessions.steer``).
The presence TTL is 2 s (``VANCETOPE_PRESENCE_TTL``) so a killed gateway's connections
expire quickly.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for
from tests.integration.gateways import Client, Stack, running_stack, turn_done
from vancetope_brain import keys
from vancetope_brain.errors import Conflict
from vancetope_brain.models import (
    ProcessStatus,
    Session,
    SessionStatus,
    SuspendCause,
    ThinkProcess,
    TurnRecord,
)
from vancetope_brain.store import LaneStore, SessionStore

PRESENCE_TTL = 2.0
SETTLE = 20.0  # seconds a lane may take to apply a requested lifecycle call (≈ 0.1 s here)

IDLE = ("IDLE", None, False)
SUSPENDED = ("SUSPENDED", None, False)
DRIFTED = ("SUSPENDED", None, True)
STOPPED = ("CLOSED", "STOPPED", False)


@pytest.fixture
def stack(tmp_path: Path, redis_url: str) -> Iterator[Stack]:
    with running_stack(tmp_path, redis_url, VANCETOPE_PRESENCE_TTL=str(PRESENCE_TTL)) as s:
        s.cluster.start_workers("echo")
        s.start_gateways(1)
        s.cluster.start_sweeper()
        yield s


class Opened:
    """A session created over the WebSocket with its chat process and one more (ford)."""

    def __init__(self, stack: Stack, client: Client, policy: str,
                 fingerprint: dict[str, str] | None = None) -> None:
        extra: dict[str, Any] = {"fingerprint": fingerprint} if fingerprint else {}
        created = client.request("session-create", title=f"on-disconnect {policy}",
                                 onDisconnect=policy, **extra)
        assert created["session"]["onDisconnect"] == policy
        self.sid: str = created["session"]["id"]
        self.chat: str = created["chatProcessId"]
        process = client.request("process-create", engine="ford", name="helper")["process"]
        assert process["sessionId"] == self.sid and process["engine"] == "ford"
        self.helper: str = process["id"]
        self.pids = (self.chat, self.helper)
        # A turn on each process, through the gateway: steered, streamed, committed.
        for pid in self.pids:
            client.request("process-steer", targetThinkProcessId=pid, content=f"hi {pid}")
        for pid in self.pids:
            client.until(turn_done(pid, f"echo: hi {pid}"))
        assert stack.statuses(self.sid) == {pid: IDLE for pid in self.pids}
        self.stack = stack
        self.before = self.lifecycles()

    def lifecycles(self) -> dict[str, list[str]]:
        """The lifecycle call of each turn so far, per process."""
        return {pid: _lifecycles(self.stack, pid) for pid in self.pids}

    def ran_since_opened(self, *calls: str) -> bool:
        """Whether each process ran exactly ``calls`` after it was opened, and nothing else."""
        return self.lifecycles() == {pid: self.before[pid] + list(calls) for pid in self.pids}


def _turns(stack: Stack, pid: str) -> list[TurnRecord]:
    return stack.cluster.brain.store.port(LaneStore).turn_records("acme", pid)


def _lifecycles(stack: Stack, pid: str) -> list[str]:
    return [r.lifecycle for r in _turns(stack, pid)]


def _wait_statuses(stack: Stack, sid: str, expected: dict[str, tuple[str, str | None, bool]],
                   what: str) -> None:
    def reached() -> bool:
        return stack.statuses(sid) == expected and not any(
            p.pending_control for p in stack.cluster.brain.store.port(SessionStore).list_processes("acme", sid))

    try:
        wait_for(reached, timeout=SETTLE, interval=0.05, what=what)
    except AssertionError:
        raise AssertionError(f"{what}: statuses {stack.statuses(sid)}, "
                             f"expected {expected}") from None


def _session(stack: Stack, sid: str) -> Session:
    return stack.cluster.brain.store.port(SessionStore).get_session("acme", sid)


def _held_quietly(stack: Stack, pid: str, content: str) -> None:
    """The message for the SUSPENDED ``pid`` is pending and stays so: a stray wake-up reaches
    the worker, which holds the lane, and for two sweep intervals (plus the sweeper's
    message age) no turn record appears and the model is never called."""
    cluster = stack.cluster
    worker = cluster.workers[0]
    turns = len(_turns(stack, pid))
    held = worker.outcomes().count("held")
    cluster.brain.waker.wake("acme", pid)  # as a redelivered broker message would (or coalesced)
    wait_for(lambda: worker.outcomes().count("held") > held, timeout=10,
             what="the worker to take the lane task and hold it")
    time.sleep(2 * cluster.config.sweep_interval + cluster.config.sweep_age)
    assert len(_turns(stack, pid)) == turns
    assert [m.message.content for m in cluster.brain.store.port(LaneStore).pending_messages("acme", pid)] == [
        content]
    assert content not in [detail for _, _, detail in worker.entries("start")]
    assert stack.statuses(_process(stack, pid).session_id)[pid][0] == "SUSPENDED"


def _process(stack: Stack, pid: str) -> ThinkProcess:
    return stack.cluster.brain.store.port(SessionStore).get_process("acme", pid)


@pytest.mark.slow
def test_suspend_policy_suspends_every_process_and_queued_input_waits_for_resume(stack):
    cluster = stack.cluster
    web = stack.gateways[0]
    client = stack.client(web)
    opened = Opened(stack, client, "SUSPEND")
    before = opened.before

    client.close()  # the session's last client
    _wait_statuses(stack, opened.sid, {pid: SUSPENDED for pid in opened.pids},
                   "the suspend cascade")
    session = _session(stack, opened.sid)
    assert (session.status, session.suspend_cause) == (SessionStatus.SUSPENDED,
                                                       SuspendCause.DISCONNECT)
    # Each process executed exactly one suspend on its own lane, and nothing else.
    assert opened.ran_since_opened("suspend")

    # Input sent meanwhile (store-level service, as any sender would) waits in the inbox.
    message, created = cluster.brain.sessions.steer(cluster.who, opened.helper, "while away")
    assert created
    _held_quietly(stack, opened.helper, "while away")
    assert len(_turns(stack, opened.chat)) == len(before[opened.chat]) + 1

    # The client comes back (another connection): the session resumes, every process goes
    # back to IDLE, and only the one with pending input runs a turn that answers it.
    again = stack.client(web)
    resumed = again.request("session-resume", sessionId=opened.sid)
    assert resumed["session"]["status"] == "OPEN" and not resumed["contextDrift"]
    cluster.wait_reply(opened.helper, "while away", timeout=SETTLE)
    _wait_statuses(stack, opened.sid, {pid: IDLE for pid in opened.pids}, "the resume")
    assert cluster.brain.store.port(LaneStore).pending_messages("acme", opened.helper) == []
    after = _turns(stack, opened.helper)[len(before[opened.helper]) + 1:]
    assert [r.lifecycle for r in after][0] == "resume"
    assert [m for r in after for m in r.drained_ids] == [message.id]
    # The chat process had nothing pending: resumed, and no engine turn ran on it.
    assert _lifecycles(stack, opened.chat) == before[opened.chat] + ["suspend", "resume"]
    assert [r.drained_ids for r in _turns(stack, opened.chat)][-1] == []
    assert _session(stack, opened.sid).status is SessionStatus.OPEN


@pytest.mark.slow
def test_keep_open_policy_leaves_every_process_idle_and_answering(stack):
    cluster = stack.cluster
    client = stack.client(stack.gateways[0])
    opened = Opened(stack, client, "KEEP_OPEN")
    client.close()
    # The gateway unbinds at once; wait until the session left the presence index, then
    # past one presence TTL and two sweeps, so neither path can still change it.
    member = f"acme/{opened.sid}"
    wait_for(lambda: cluster.brain.redis.zscore(keys.PRESENCE_INDEX, member) is None,
             timeout=10, what="the gateway to unbind the last client")
    time.sleep(PRESENCE_TTL + 2 * cluster.config.sweep_interval)
    session = _session(stack, opened.sid)
    assert (session.status, session.suspend_cause) == (SessionStatus.OPEN, None)
    assert stack.statuses(opened.sid) == {pid: IDLE for pid in opened.pids}
    assert opened.ran_since_opened()

    # Nobody is connected, and both processes still answer what a sender steers to them.
    for pid in opened.pids:
        cluster.steer(pid, f"unattended {pid}")
    for pid in opened.pids:
        cluster.wait_reply(pid, f"unattended {pid}", timeout=SETTLE)
    _wait_statuses(stack, opened.sid, {pid: IDLE for pid in opened.pids}, "the turns")
    assert opened.ran_since_opened("steer")


@pytest.mark.slow
def test_close_policy_stops_every_process(stack):
    cluster = stack.cluster
    web = stack.gateways[0]
    client = stack.client(web)
    opened = Opened(stack, client, "CLOSE")
    client.close()
    _wait_statuses(stack, opened.sid, {pid: STOPPED for pid in opened.pids}, "the stop cascade")
    assert _session(stack, opened.sid).status is SessionStatus.CLOSED
    assert opened.ran_since_opened("stop")
    # CLOSED is final: no input is taken, and the session cannot be resumed.
    for pid in opened.pids:
        with pytest.raises(Conflict):
            cluster.brain.sessions.steer(cluster.who, pid, "too late")
        assert cluster.brain.store.port(LaneStore).pending_messages("acme", pid) == []
    again = stack.client(web)
    with pytest.raises(Exception, match="conflict") as refused:
        again.request("session-resume", sessionId=opened.sid)
    assert refused.value.code == "conflict"  # type: ignore[attr-defined]


@pytest.mark.slow
def test_context_drift_leaves_processes_suspended_until_each_gets_process_resume(stack):
    web = stack.gateways[0]
    client = stack.client(web)
    here = {"machineId": "m-1", "workingDir": "/work/a"}
    opened = Opened(stack, client, "SUSPEND", fingerprint=here)
    client.close()
    _wait_statuses(stack, opened.sid, {pid: SUSPENDED for pid in opened.pids}, "the suspend")
    before = opened.lifecycles()

    # Same machine, another working directory: the session opens, its processes do not.
    again = stack.client(web)
    resumed = again.request("session-resume", sessionId=opened.sid,
                            fingerprint={**here, "workingDir": "/work/b"})
    assert resumed["contextDrift"] is True and resumed["session"]["status"] == "OPEN"
    assert stack.statuses(opened.sid) == {pid: DRIFTED for pid in opened.pids}
    steer = again.request("process-steer", targetThinkProcessId=opened.helper,
                          content="after the move")
    assert not steer["duplicate"]
    _held_quietly(stack, opened.helper, "after the move")
    assert stack.statuses(opened.sid) == {pid: DRIFTED for pid in opened.pids}
    assert opened.lifecycles() == before

    # The user's explicit decision for one process resumes that one only, and its turn
    # answers the waiting message.
    reply = again.request("process-resume", processId=opened.helper)["process"]
    assert reply["id"] == opened.helper and reply["contextDrift"] is False
    again.until(turn_done(opened.helper, "echo: after the move"), timeout=SETTLE)
    assert stack.statuses(opened.sid) == {opened.helper: IDLE, opened.chat: DRIFTED}
    assert _lifecycles(stack, opened.helper)[len(before[opened.helper])] == "resume"
    assert _lifecycles(stack, opened.chat) == before[opened.chat]

    # The chat process, resumed with nothing pending, goes back to IDLE without an engine turn.
    again.request("process-resume", processId=opened.chat)
    _wait_statuses(stack, opened.sid, {pid: IDLE for pid in opened.pids}, "the second resume")
    assert _lifecycles(stack, opened.chat) == before[opened.chat] + ["resume"]
    assert _turns(stack, opened.chat)[-1].drained_ids == []


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_gateway_killed_holding_connections_the_sweeper_applies_each_policy(stack):
    """SIGKILL: nobody unbinds. The connections' presence expires after the TTL (renewed
    every TTL/3 while the gateway lived), and the next sweep applies each session's policy.
    """
    cluster = stack.cluster
    victim = stack.gateways[0]
    sessions: dict[str, Opened] = {}
    for policy in ("SUSPEND", "KEEP_OPEN", "CLOSE"):
        sessions[policy] = Opened(stack, stack.client(victim), policy)
    # Live presence is renewed: after more than a TTL every session is still OPEN.
    time.sleep(PRESENCE_TTL * 1.2)
    assert {p: _session(stack, o.sid).status for p, o in sessions.items()} == {
        p: SessionStatus.OPEN for p in sessions}

    victim.kill()
    killed = time.monotonic()
    # Before the presence could have expired, nothing happens.
    time.sleep(PRESENCE_TTL / 3)
    assert {p: _session(stack, o.sid).status for p, o in sessions.items()} == {
        p: SessionStatus.OPEN for p in sessions}

    suspend, keep, close = sessions["SUSPEND"], sessions["KEEP_OPEN"], sessions["CLOSE"]
    wait_for(lambda: _session(stack, suspend.sid).status is SessionStatus.SUSPENDED,
             timeout=SETTLE, interval=0.02, what="the sweeper to suspend the session")
    applied = time.monotonic() - killed
    _wait_statuses(stack, suspend.sid, {pid: SUSPENDED for pid in suspend.pids},
                   "the suspend cascade")
    assert _session(stack, suspend.sid).suspend_cause is SuspendCause.DISCONNECT
    _wait_statuses(stack, close.sid, {pid: STOPPED for pid in close.pids}, "the stop cascade")
    assert _session(stack, close.sid).status is SessionStatus.CLOSED
    wait_for(lambda: cluster.brain.redis.zscore(keys.PRESENCE_INDEX, f"acme/{keep.sid}") is None,
             timeout=SETTLE, what="the sweeper to drop the KEEP_OPEN session's presence")
    assert _session(stack, keep.sid).status is SessionStatus.OPEN
    assert stack.statuses(keep.sid) == {pid: IDLE for pid in keep.pids}
    cluster.steer(keep.helper, "still here?")
    cluster.wait_reply(keep.helper, "still here?", timeout=SETTLE)

    bound = PRESENCE_TTL + cluster.config.sweep_interval
    print(f"\ngateway SIGKILL → onDisconnect applied after {applied:.2f}s (presence TTL "
          f"{PRESENCE_TTL}s renewed every {PRESENCE_TTL / 3:.2f}s, sweep every "
          f"{cluster.config.sweep_interval}s: expected {PRESENCE_TTL * 2 / 3:.2f}–{bound:.2f}s)")
    assert applied <= bound + 3.0  # (and > TTL / 3: checked above)
    for client in stack.clients:  # the kill took their sockets with it
        client.until(lambda _, c=client: c.closed, timeout=10)
    assert (stack.statuses(suspend.sid), _session(stack, suspend.sid).status) == (
        {pid: SUSPENDED for pid in suspend.pids}, SessionStatus.SUSPENDED)
    assert all(p.status is not ProcessStatus.RUNNING
               for p in cluster.brain.store.port(SessionStore).list_processes("acme", suspend.sid))
