"""Chaos scenarios of one turn's faults, with the default settings (issue 11): a message
that kills every worker that runs it, and a worker killed between a side-effecting tool
call and the commit (the turn journal). Real prefork or solo Celery workers on the
suite's own Redis; the test plays the user."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.chaos.conftest import DEFAULTS, LEASE_TTL, report, since
from tests.chaos.oracle import Oracle
from tests.helpers import wait_for
from tests.integration.conftest import Cluster
from tests.integration.gateways import Stack
from tests.integration.scripts_poison import MARKER
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.models.inbox import InboxQuery, ItemStatus, ItemType, Outcome
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.store import DeadLetterStore, JournalStore, SessionStore, UserInboxStore

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
MAX_ATTEMPTS = 3  # the default VANCETOPE_MAX_ATTEMPTS


def test_a_message_that_kills_its_worker_is_dead_lettered(chaos: Stack) -> None:
    cluster = chaos.cluster
    cluster.start_workers("poison", "poison", sweeping=True, pool="prefork")
    brain = cluster.brain
    sessions = brain.store.port(SessionStore)
    parent = cluster.new_chat()
    child = brain.process_factory.child(sessions.get_process("acme", parent), recipe="ford-chat",
                                        siblings=(), engine=None, name="helper", goal="", params=None)
    sessions.create_process(child)
    brain.waker.wake("acme", child.id)
    wait_for(lambda: sessions.get_process("acme", child.id).status is ProcessStatus.IDLE,
             timeout=30, what="the child's start")
    oracle = Oracle(cluster)
    oracle.send(child.id, "before")
    wait_for(oracle.answered, timeout=30, what="the first answer")
    sent = time.monotonic()
    poison = cluster.steer(child.id, MARKER)  # kills the pool child that runs it, each time
    oracle.send(child.id, "after")
    dead = wait_for(lambda: brain.store.port(DeadLetterStore).dead_letters("acme", child.id),
                    timeout=MAX_ATTEMPTS * (LEASE_TTL + 10) + 30, interval=0.1,
                    what="the dead letter")
    dead_after = since(sent)
    wait_for(oracle.answered, timeout=LEASE_TTL + 30, what="the message sent after it")
    answered_after = since(sent)
    oracle.send(child.id, "later")
    wait_for(oracle.answered, timeout=30, what="a message sent once it was set aside")
    oracle.check()

    assert [(m.id, m.dead_letter and m.dead_letter.attempts) for m in dead] == \
        [(poison.id, MAX_ATTEMPTS)]
    notice = [line.content for line in cluster.chat(child.id) if line.role is ChatRole.ERROR]
    assert notice == [f'Your message "{MARKER}" could not be processed after {MAX_ATTEMPTS} '
                      f"attempts; it was set aside (dead letter {poison.id})."]
    items = brain.store.port(UserInboxStore).list_inbox_items("acme",
                                                              InboxQuery(assigned_to="ada"))
    assert [(i.title, i.origin_process_id) for i in items] == [
        ("A message to helper was set aside", child.id)]
    told = wait_for(lambda: [line for line in cluster.chat(parent)
                             if line.role is ChatRole.EVENT and 'type="dead-letter"' in
                             line.content], timeout=30, what="the parent's ProcessEvent")
    assert poison.id in told[0].content
    assert all(w.popen.poll() is None for w in cluster.workers), "a worker pod died"
    report("a message that SIGKILLs every worker running it (prefork pool children)",
           dead_lettered_after_s=dead_after, next_message_answered_after_s=answered_after,
           attempts=MAX_ATTEMPTS)


JOURNALED = """
name: journaled
engine: ford
category: worker
description: Sends, then charges.
allowedToolsAdd: [journal_send, journal_charge]
"""


def test_a_worker_killed_between_a_side_effecting_tool_call_and_the_commit(
        tmp_path: Path, own_redis) -> None:  # type: ignore[no-untyped-def]
    """The worker sends a message (``journal_send``), then charges a card
    (``journal_charge``), whose first run SIGKILLs its worker right after its effect. The
    other worker runs the turn again once the dead one's lease runs out: the recorded
    completions and the recorded send are replayed, the charge — started, never recorded —
    is in doubt, so it is not called again but reaches the user as an APPROVAL item, and
    the process waits BLOCKED. The user approves; the charge runs once more."""
    log = tmp_path / "tools.log"
    cluster = Cluster(tmp_path, own_redis.url, **DEFAULTS, VT_TEST_TOOL_LOG=str(log),
                      VT_TEST_KILL_ONCE=str(tmp_path / "killed"))
    try:
        cluster.brain.recipe_admin.put("acme", None, parse_recipe(JOURNALED, "journaled"))
        first, second = cluster.start_workers("journal-flow", "journal-flow", sweeping=True)
        processes = cluster.brain.store.port(SessionStore)
        session = cluster.brain.sessions.create(cluster.who)
        w = cluster.brain.sessions.create_process(cluster.who, session.id, recipe="journaled",
                                                  goal="pay the invoice", name="w")

        def lines() -> list[tuple[str, int]]:
            text = log.read_text() if log.exists() else ""
            return [(what, int(pid)) for what, pid in (row.split() for row in text.splitlines())]

        killer = wait_for(lambda: next((pid for what, pid in lines() if what == "charge:5"),
                                       None), timeout=30, what="the charge")
        victim = first if first.pid == killer else second
        victim.popen.wait(timeout=10)
        assert victim.popen.returncode == -signal.SIGKILL
        killed = time.monotonic()
        wait_for(lambda: processes.get_process("acme", w.id).status is ProcessStatus.BLOCKED,
                 timeout=LEASE_TTL + 30, what="the rerun to end BLOCKED")
        asked_after = since(killed)
        items = cluster.brain.inbox.list(cluster.who, statuses=[ItemStatus.PENDING])
        [item] = [i for i in items if i.origin_process_id == w.id]
        assert (item.type, item.title) == (ItemType.APPROVAL, "Run journal_charge again?")
        assert "journal_charge({\"amount\":5})" in (item.body or "")
        survivor = second if victim is first else first
        assert lines() == [("model:goal", killer), ("send:ada", killer),
                           ("model:sent", killer), ("charge:5", killer),
                           ("model:held", survivor.pid)]  # nothing ran twice

        cluster.brain.inbox.answer(cluster.who, item.id, Outcome.DECIDED,
                                   value={"approved": True})
        wait_for(lambda: processes.get_process("acme", w.id).status is ProcessStatus.CLOSED,
                 timeout=30, what="the approved charge")
        done = processes.get_process("acme", w.id)
        assert (done.close_reason, done.engine_state["lastReply"]) == (CloseReason.DONE,
                                                                       "charged")
        assert Counter(what for what, _ in lines()) == Counter({
            "model:goal": 1, "send:ada": 1, "model:sent": 1, "charge:5": 2, "model:held": 1,
            "model:answer": 1, "model:charged": 1})
        assert cluster.brain.store.port(JournalStore).journal("acme", w.id) == []
        report("a worker SIGKILLed between a side-effecting tool call and the commit",
               asked_the_user_after_s=asked_after, bound_s=LEASE_TTL + 3)
    finally:
        cluster.close()
