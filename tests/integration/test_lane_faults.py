"""Lane faults across OS processes (ARCHITECTURE §3.3, §3.5, §3.6): a worker killed or
frozen mid-turn, and a message that lands while a turn is ending.

Every worker runs the solo pool, so the signalled process is the one running the
turn, holding the lease and renewing it. Lease TTL 2 s, sweep every 0.3 s for
messages pending longer than 0.5 s (``tests.helpers.FAST_LANES``): a lane whose
worker died is re-woken within about TTL + interval + age ≈ 3 s.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import Cluster, Worker
from vancetope_brain.events import EventType
from vancetope_brain.models import ChatRole, InboxMessage
from vancetope_brain.store import LaneStore, SessionStore

RECOVERY_BOUND = 15.0  # seconds; expected ≈ 3 s, generous for a loaded 2-core machine


def _in_flight(workers: list[Worker]) -> tuple[Worker, Worker]:
    """(the worker whose ``block`` model call has begun, the other one)."""
    busy = wait_for(lambda: next((w for w in workers if w.started.exists()), None),
                    timeout=15, what="a model call in flight")
    return busy, next(w for w in workers if w is not busy)


def _epochs_without_record(cluster: Cluster, pid: str) -> set[int]:
    records = cluster.brain.store.port(LaneStore).turn_records("acme", pid)
    return set(range(1, cluster.brain.store.port(SessionStore).get_process("acme", pid).epoch + 1)) - {
        r.epoch for r in records}


@pytest.mark.slow
def test_worker_killed_mid_turn_another_answers_the_message_once(cluster):
    workers = cluster.start_workers("block", "block")
    cluster.start_sweeper()
    pid = cluster.new_chat()
    first = cluster.steer(pid, "are you there?")
    victim, survivor = _in_flight(workers)
    survivor.release()  # the survivor's model answers at once

    victim.signal(signal.SIGKILL)
    killed = time.monotonic()
    victim.popen.wait(timeout=10)
    reply = cluster.wait_reply(pid, first.message.content, timeout=RECOVERY_BOUND)
    recovery = time.monotonic() - killed
    print(f"\nSIGKILL mid-turn: answered by the other worker {recovery:.2f}s after the kill "
          f"(bound {RECOVERY_BOUND}s; lease TTL {cluster.config.lease_ttl}s + sweep interval "
          f"{cluster.config.sweep_interval}s + age {cluster.config.sweep_age}s)")
    assert recovery < RECOVERY_BOUND

    # A later message is a sync point: after its reply nothing else can still be in flight.
    second = cluster.steer(pid, "still there?")
    cluster.wait_reply(pid, second.message.content)
    assert cluster.roles_and_contents(pid) == [
        ("user", "are you there?"), ("assistant", "echo: are you there?"),
        ("user", "still there?"), ("assistant", "echo: still there?")]
    assert reply.source_message_id == first.id
    took_over = [r for r in cluster.brain.store.port(LaneStore).turn_records("acme", pid)
                 if first.id in r.drained_ids]
    assert len(took_over) == 1 and took_over[0].worker == survivor.worker_id
    assert [d for _, _, d in victim.entries("start")] == ["are you there?"]
    assert not victim.entries("end")
    assert _epochs_without_record(cluster, pid) == {took_over[0].epoch - 1}  # the killed turn
    assert not cluster.brain.store.port(LaneStore).pending_messages("acme", pid)


@dataclass
class Frozen:
    pid: str
    frozen: Worker
    survivor: Worker
    first: InboxMessage
    second: InboxMessage
    takeover: float


def _freeze_mid_turn_take_over_and_resume(cluster: Cluster) -> Frozen:
    """Freeze the worker of a turn past its lease TTL; the other worker answers that message
    and the next; then the frozen one resumes, notices the lost lease and finishes its call.
    """
    workers = cluster.start_workers("block", "block")
    cluster.start_sweeper()
    pid = cluster.new_chat()
    first = cluster.steer(pid, "first")
    frozen, survivor = _in_flight(workers)
    survivor.release()

    frozen.signal(signal.SIGSTOP)
    stopped = time.monotonic()
    cluster.wait_reply(pid, "first", timeout=RECOVERY_BOUND)
    takeover = time.monotonic() - stopped
    second = cluster.steer(pid, "second")
    cluster.wait_reply(pid, "second")

    frozen.signal(signal.SIGCONT)
    wait_for(lambda: f"lane lease of {pid} lost" in frozen.output_path.read_text(), timeout=15,
             what="the resumed worker's heartbeat to notice the lost lease")
    frozen.release()  # only now does its model call return
    wait_for(lambda: frozen.outcomes()[-1:] == ["fenced"], timeout=15,
             what="the resumed worker's turn to end fenced")
    assert [d for _, _, d in frozen.entries("end")] == ["first"]  # it did finish the call
    return Frozen(pid, frozen, survivor, first, second, takeover)


@pytest.mark.slow
def test_worker_frozen_past_its_lease_is_fenced_when_it_resumes(cluster):
    run = _freeze_mid_turn_take_over_and_resume(cluster)
    pid = run.pid
    print(f"\nSIGSTOP mid-turn: the other worker answered {run.takeover:.2f}s after the stop; "
          f"the resumed worker was fenced")

    third = cluster.steer(pid, "third")  # the lane still works, on either worker
    cluster.wait_reply(pid, "third")
    assert cluster.roles_and_contents(pid) == [
        ("user", "first"), ("assistant", "echo: first"),
        ("user", "second"), ("assistant", "echo: second"),
        ("user", "third"), ("assistant", "echo: third")]
    records = cluster.brain.store.port(LaneStore).turn_records("acme", pid)
    by_message = {mid: r for r in records for mid in r.drained_ids}
    assert by_message[run.first.id].worker == run.survivor.worker_id
    assert by_message[run.second.id].worker == run.survivor.worker_id
    assert third.id in by_message
    # Exactly one epoch was taken without leaving a record: the frozen turn's, just
    # before the survivor's take-over.
    assert _epochs_without_record(cluster, pid) == {by_message[run.first.id].epoch - 1}
    assert len(records) == len({r.epoch for r in records})
    assert not cluster.brain.store.port(LaneStore).pending_messages("acme", pid)


@pytest.mark.slow
def test_turn_that_lost_its_lease_streams_no_tokens(cluster):
    """Clients render ``token`` events as the reply being written. A turn whose worker
    already knows its lease is lost (its heartbeat logged it) must not stream a reply
    nobody will commit: the session's tokens are exactly the committed replies.
    """
    run = _freeze_mid_turn_take_over_and_resume(cluster)
    session_id = cluster.brain.store.port(SessionStore).get_process("acme", run.pid).session_id
    events = cluster.brain.events.read(session_id, 0)
    streamed = "".join(e.data["text"] for e in events if e.type is EventType.TOKEN)
    replies = "".join(line.content for line in cluster.chat(run.pid)
                      if line.role is ChatRole.ASSISTANT)
    assert replies == "echo: firstecho: second"
    assert streamed == replies, (
        "the fenced turn streamed its tokens after the survivor had answered: "
        f"{[(e.type.value, e.data.get('text') or e.data.get('to')) for e in events[-4:]]}")


@pytest.mark.slow
@pytest.mark.parametrize("window", ["during-model-call", "after-commit-before-release"])
def test_message_arriving_while_a_turn_ends_is_processed_without_the_sweeper(cluster, window):
    """No sweeper runs here: only the runner's inbox re-check after release can wake the lane.

    The second message's wake-up goes to the idle worker, which finds the lane busy
    and returns; the turn holding the lane did not drain that message.
    """
    if window == "during-model-call":
        workers = cluster.start_workers("block", "block")
    else:
        workers = cluster.start_workers("echo", "echo", hold_commit=True)
    pid = cluster.new_chat()
    first = cluster.steer(pid, "first")
    if window == "during-model-call":
        holder, other = _in_flight(workers)
    else:
        holder = wait_for(lambda: next((w for w in workers if w.entries("committed")), None),
                          timeout=15, what="a turn holding after its commit")
        other = next(w for w in workers if w is not holder)
    other.release()
    other.release_commits()
    busy_before = other.outcomes().count("busy")

    second = cluster.steer(pid, "second")
    wait_for(lambda: other.outcomes().count("busy") > busy_before, timeout=15,
             what="the idle worker to find the lane busy")
    # Still pending; "first" too while its turn has not committed yet.
    pending = [m.id for m in cluster.brain.store.port(LaneStore).pending_messages("acme", pid)]
    assert pending == ([first.id, second.id] if window == "during-model-call" else [second.id])

    released = time.monotonic()
    holder.release()
    holder.release_commits()
    cluster.wait_reply(pid, "second", timeout=10)
    print(f"\n{window}: the late message was answered {time.monotonic() - released:.2f}s "
          f"after the holding turn was let go (no sweeper)")
    assert cluster.roles_and_contents(pid) == [
        ("user", "first"), ("assistant", "echo: first"),
        ("user", "second"), ("assistant", "echo: second")]
    assert cluster.sweeps == 0
