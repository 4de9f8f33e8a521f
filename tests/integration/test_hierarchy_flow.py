"""The hierarchy of think-engines §7a on real Redis and real Celery worker processes: Arthur
→ arthur-sub → two ford workers in parallel. The sub-Arthur is a sub because of its recipe
(the spawner picked ``arthur-sub`` for a child named only by engine): it has no
``inbox_post``, and it reports one combined result, after both workers, even when the worker
running its combining turn is SIGKILLed."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from tests.helpers import wait_for
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore

S = ProcessStatus


@pytest.mark.slow
def test_a_sub_arthur_reports_once_after_its_workers_even_when_killed(cluster):
    cluster.env["VT_TEST_DELAY"] = "1.5"
    workers = cluster.start_workers("hier-flow", "hier-flow")
    cluster.start_sweeper()
    cluster.brain.settings.unset("acme", SettingScope.tenant(), "session.defaultChatEngine")
    brain, who = cluster.brain, cluster.who
    session = brain.sessions.create(who, title="report")
    top = session.chat_process_id
    processes = brain.store.port(SessionStore)

    def by_name():
        return {p.name: p for p in processes.list_processes("acme", session.id)}

    wait_for(lambda: by_name()["chat"].status is S.IDLE, timeout=30)
    brain.sessions.steer(who, top, "Write the report")
    victim = wait_for(lambda: next((w for w in workers if w.started.exists()), None),
                      timeout=30, what="the sub-Arthur's combining turn")
    victim.signal(signal.SIGKILL)
    victim.popen.wait(timeout=10)

    wait_for(lambda: brain.store.port(LaneStore).chat_history("acme", top)[-1].content
             == "The report: Combined: part A + part B", timeout=60,
             what="Arthur relaying the combined report")
    found = by_name()
    names = Counter(p.name for p in processes.list_processes("acme", session.id))
    assert names == {"chat": 1, "sub": 1, "part-a": 1, "part-b": 1}  # nothing spawned twice
    sub = found["sub"]
    assert (sub.recipe_name, sub.close_reason, sub.parent_process_id) == (
        "arthur-sub", CloseReason.DONE, top)
    assert "inbox_post" in sub.recipe["allowedToolsRemove"]
    for part in ("part-a", "part-b"):
        assert (found[part].parent_process_id, found[part].close_reason) == (
            sub.id, CloseReason.DONE)
    # The top heard the sub exactly once, with its final respond, not "Started …".
    events = [m.content for m in brain.store.port(LaneStore).chat_history("acme", top)
              if m.role is ChatRole.EVENT]
    assert len(events) == 1 and "Combined: part A + part B" in events[0]
    # The killed turn committed nothing; another worker ran it again.
    sub_turns = brain.store.port(LaneStore).turn_records("acme", sub.id)
    assert victim.worker_id not in {t.worker for t in sub_turns if t.status_after is S.CLOSED}
