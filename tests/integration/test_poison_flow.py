"""A message that SIGKILLs whichever worker runs it (issue 11, poison messages), on real Celery
worker processes: it is dead-lettered after ``VANCETOPE_MAX_ATTEMPTS`` (2 here) turns, the
process's messages before and after it are answered, the user gets an Inbox item and the
parent a ProcessEvent.

Three solo workers run the ``poison`` model (tests/integration/scripts_poison.py); each
attempt kills one, so the third is left to dead-letter it. Lease TTL 2 s and a sweep every
0.3 s (``tests.helpers.FAST_LANES``): each death costs about TTL + interval.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import Cluster
from tests.integration.scripts_poison import MARKER
from vancetope_brain.models import ChatRole, ProcessStatus
from vancetope_brain.models.inbox import InboxQuery
from vancetope_brain.store import DeadLetterStore, LaneStore, SessionStore, UserInboxStore

BOUND = 45.0  # seconds; expected ≈ 2 × (TTL + sweep interval) ≈ 5 s


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str) -> Iterator[Cluster]:
    c = Cluster(tmp_path, redis_url, VANCETOPE_MAX_ATTEMPTS="2")
    try:
        yield c
    finally:
        c.close()


@pytest.mark.slow
def test_a_message_that_kills_its_worker_is_dead_lettered_and_the_lane_goes_on(cluster):
    workers = cluster.start_workers("poison", "poison", "poison")
    cluster.start_sweeper()
    parent = cluster.new_chat()
    brain = cluster.brain
    sessions, lanes = brain.store.port(SessionStore), brain.store.port(LaneStore)
    child = brain.process_factory.child(sessions.get_process("acme", parent), recipe="ford-chat",
                                        engine=None, name="helper", goal="", params=None)
    sessions.create_process(child)
    brain.waker.wake("acme", child.id)
    wait_for(lambda: sessions.get_process("acme", child.id).status is ProcessStatus.IDLE,
             timeout=30, what="the child's start")

    cluster.steer(child.id, "before")
    cluster.wait_reply(child.id, "before")
    sent = time.monotonic()
    poison = cluster.steer(child.id, MARKER)
    cluster.steer(child.id, "after")
    dead = wait_for(lambda: brain.store.port(DeadLetterStore).dead_letters("acme", child.id),
                    timeout=BOUND, interval=0.05, what="the dead letter")
    took = time.monotonic() - sent
    cluster.wait_reply(child.id, "after", timeout=BOUND)
    cluster.steer(child.id, "later")
    cluster.wait_reply(child.id, "later")
    print(f"\npoison message: dead-lettered {took:.2f}s after it was sent, after 2 SIGKILLed "
          f"turns (bound {BOUND}s; lease TTL {cluster.config.lease_ttl}s + sweep interval "
          f"{cluster.config.sweep_interval}s per attempt)")

    assert [m.id for m in dead] == [poison.id]
    assert dead[0].dead_letter is not None and dead[0].dead_letter.attempts == 2
    killed = [w for w in workers if w.popen.poll() == -signal.SIGKILL]
    assert len(killed) == 2 and all(w.entries("kill") for w in killed)
    notice = (f'Your message "{MARKER}" could not be processed after 2 attempts; it was set '
              f"aside (dead letter {poison.id}).")
    assert cluster.roles_and_contents(child.id) == [
        ("user", "before"), ("assistant", "echo: before"), ("error", notice),
        ("user", "after"), ("assistant", "echo: after"),
        ("user", "later"), ("assistant", "echo: later")]
    assert not lanes.pending_messages("acme", child.id)
    assert sessions.get_process("acme", child.id).status is ProcessStatus.IDLE

    items = brain.store.port(UserInboxStore).list_inbox_items("acme",
                                                              InboxQuery(assigned_to="ada"))
    assert [(i.title, i.origin_process_id) for i in items] == [
        ("A message to helper was set aside", child.id)]
    told = wait_for(lambda: [line for line in cluster.chat(parent)
                             if line.role is ChatRole.EVENT and 'type="dead-letter"' in
                             line.content], timeout=15, what="the parent's ProcessEvent")
    assert poison.id in told[0].content
