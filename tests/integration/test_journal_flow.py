"""The turn journal across OS processes (issue 11): a worker SIGKILLed between a
side-effecting tool call and the commit. Real Redis, two real Celery worker processes, one
SQLite file; the test plays the user (through the gateway's services) and beat.

The worker ``w`` sends a message (``journal_send``), then charges a card
(``journal_charge``), whose first run SIGKILLs its worker process right after its effect.
The other worker runs the turn again once the dead one's lease expires: the recorded
completions and the recorded send are replayed, the charge — started, never recorded — is
in doubt, so it is not called again but reaches the user as an APPROVAL in their Inbox, and
the process waits BLOCKED. The user approves; the charge runs once more, in a new turn.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import Cluster
from vancetope_brain.models import CloseReason, ProcessStatus
from vancetope_brain.models.inbox import ItemStatus, ItemType, Outcome
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.store import JournalStore, SessionStore

S = ProcessStatus
JOURNALED = """
name: journaled
engine: ford
category: worker
description: Sends, then charges.
allowedToolsAdd: [journal_send, journal_charge]
"""
RECOVERY_BOUND = 30.0  # seconds; expected ≈ lease TTL 2 s + sweep 0.3 s + age 0.5 s


@pytest.mark.slow
def test_a_worker_killed_between_a_tool_call_and_the_commit(tmp_path: Path, redis_url: str):
    log = tmp_path / "tools.log"
    cluster = Cluster(tmp_path, redis_url, VT_TEST_TOOL_LOG=str(log),
                      VT_TEST_KILL_ONCE=str(tmp_path / "killed"))
    try:
        cluster.brain.recipe_admin.put("acme", None, parse_recipe(JOURNALED, "journaled"))
        first, second = cluster.start_workers("journal-flow", "journal-flow")
        cluster.start_sweeper()
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
        killed = time.monotonic()
        wait_for(lambda: processes.get_process("acme", w.id).status is S.BLOCKED,
                 timeout=RECOVERY_BOUND, what="the rerun to end BLOCKED")
        print(f"\nSIGKILL between a tool call and the commit: the rerun asked the user "
              f"{time.monotonic() - killed:.2f}s after the kill")
        items = cluster.brain.inbox.list(cluster.who, statuses=[ItemStatus.PENDING])
        [item] = [i for i in items if i.origin_process_id == w.id]
        assert (item.type, item.title) == (ItemType.APPROVAL, "Run journal_charge again?")
        assert "journal_charge({\"amount\":5})" in (item.body or "")
        # Nothing ran twice, and the recorded steps were replayed rather than asked again.
        survivor = second if victim is first else first
        assert lines() == [("model:goal", killer), ("send:ada", killer),
                           ("model:sent", killer), ("charge:5", killer),
                           ("model:held", survivor.pid)]
        assert processes.get_process("acme", w.id).engine_state["lastReply"] == \
            "held back: in doubt"

        cluster.brain.inbox.answer(cluster.who, item.id, Outcome.DECIDED,
                                   value={"approved": True})
        wait_for(lambda: processes.get_process("acme", w.id).status is S.CLOSED,
                 timeout=30, what="the approved charge")
        done = processes.get_process("acme", w.id)
        assert (done.close_reason, done.engine_state["lastReply"]) == (CloseReason.DONE,
                                                                       "charged")
        assert Counter(what for what, _ in lines()) == Counter({
            "model:goal": 1, "send:ada": 1, "model:sent": 1, "charge:5": 2, "model:held": 1,
            "model:answer": 1, "model:charged": 1})
        assert cluster.brain.store.port(JournalStore).journal("acme", w.id) == []
    finally:
        cluster.close()
