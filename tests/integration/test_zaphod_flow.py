"""zaphod with real Redis and real Celery worker processes: Arthur convenes a council,
three heads run in parallel on different worker processes, one fails; the synthesis has
consensus, differences and conclusion, names the missing head, and reaches Arthur."""

from __future__ import annotations

import signal

import pytest

from tests.helpers import wait_for
from tests.integration.scripts_zaphod import CRASH, QUESTION
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore


@pytest.mark.slow
def test_three_heads_in_parallel_one_fails_and_the_parent_gets_the_synthesis(cluster):
    workers = cluster.start_workers("zaphod-flow", "zaphod-flow", "zaphod-flow")
    cluster.start_sweeper()
    cluster.brain.settings.unset("acme", SettingScope.tenant(), "session.defaultChatEngine")
    brain, who = cluster.brain, cluster.who
    session = brain.sessions.create(who)
    pid = session.chat_process_id
    brain.sessions.steer(who, pid, "Convene the council")

    def processes():
        return {p.name: p for p in brain.store.port(SessionStore).list_processes("acme",
                                                                              session.id)}

    wait_for(lambda: (c := processes().get("council")) is not None
             and c.status is ProcessStatus.CLOSED, timeout=60, what="the council to close")
    wait_for(lambda: brain.store.port(LaneStore).chat_history("acme", pid)[-1].content
             == "The council has reported.", timeout=30, what="Arthur's answer")
    found = processes()
    council = found["council"]
    heads = {name: p for name, p in found.items() if name.startswith("council-")}
    assert council.parent_process_id == pid and council.close_reason is CloseReason.DONE
    assert {n: (p.close_reason, p.parent_process_id) for n, p in heads.items()} == {
        "council-optimist": (CloseReason.DONE, council.id),
        "council-skeptic": (CloseReason.FAILED, council.id),
        "council-pragmatist": (CloseReason.DONE, council.id)}

    # Overlap, from the worker logs: every head started before any head ended, on at
    # least two worker processes.
    entries = [(kind, pid_, at, persona) for w in workers
               for kind, at, persona in w.entries() if kind.startswith("head-")
               for pid_ in [w.pid]]
    starts = [at for kind, _, at, _ in entries if kind == "head-start"]
    ends = [at for kind, _, at, _ in entries if kind == "head-end"]
    assert len(starts) == len(ends) == 3 and max(starts) < min(ends)
    assert len({p for kind, p, _, _ in entries if kind == "head-start"}) >= 2

    synthesis = council.engine_state["synthesis"]
    assert synthesis == {"consensus": "optimist and pragmatist favour a pilot.",
                         "differences": ["optimist stresses its own angle",
                                         "pragmatist stresses its own angle"],
                         "conclusion": "Run a three-month pilot.",
                         "missingHeads": ["skeptic"]}

    # The parent got the report: Markdown plus the payload with the heads' answers.
    (event,) = [m.content for m in brain.store.port(LaneStore).chat_history("acme", pid)
                if m.role is ChatRole.EVENT and council.id in m.content]
    assert 'type="done"' in event and f"## Council: {QUESTION}" in event
    assert "**Conclusion:** Run a three-month pilot." in event
    assert "### Missing heads\n\n- skeptic: failed" in event
    assert "The optimist says: yes, with a pilot." in event
    assert '"missingHeads": ["skeptic"]' in event


@pytest.mark.slow
def test_a_worker_killed_in_the_synthesis_turn_spawns_no_head_twice(cluster):
    workers = cluster.start_workers("zaphod-flow", "zaphod-flow", "zaphod-flow")
    cluster.start_sweeper()
    cluster.brain.settings.unset("acme", SettingScope.tenant(), "session.defaultChatEngine")
    brain, who = cluster.brain, cluster.who
    session = brain.sessions.create(who)
    pid = session.chat_process_id
    brain.sessions.steer(who, pid, "Convene the council, and crash")
    hung = wait_for(lambda: next((w for w in workers if w.entries("synth-hang")), None),
                    timeout=60, what="the synthesizer call to hang")
    hung.signal(signal.SIGKILL)
    wait_for(lambda: brain.store.port(LaneStore).chat_history("acme", pid)[-1].content
             == "The council has reported.", timeout=60, what="Arthur's answer")
    found = brain.store.port(SessionStore).list_processes("acme", session.id)
    council = next(p for p in found if p.name == "council")
    assert council.goal == QUESTION + CRASH and council.close_reason is CloseReason.DONE
    assert sorted(p.name for p in found if p.parent_process_id == council.id) == [
        "council-optimist", "council-pragmatist", "council-skeptic"]
    assert council.engine_state["synthesis"]["missingHeads"] == ["skeptic"]
    assert sum(council.id in m.content for m in brain.store.port(LaneStore).chat_history(
        "acme", pid) if m.role is ChatRole.EVENT) == 1
    # The killed turn left no record; the one that finished ran on another worker.
    turns = brain.store.port(LaneStore).turn_records("acme", council.id)
    assert turns[-1].status_after is ProcessStatus.CLOSED
    assert hung.worker_id not in {t.worker for t in turns if t.status_after is
                                  ProcessStatus.CLOSED}
