"""arthur-engine §4 with real Redis and real Celery worker processes: Arthur spawns a worker,
the worker blocks with a question, Arthur relays it, the user answers, Arthur forwards it with
process_steer, the worker finishes, Arthur summarizes — every status along the way.
"""

from __future__ import annotations

import pytest

from tests.helpers import wait_for
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore


def _statuses(cluster, session_id):
    return {p.name: p.status for p in cluster.brain.store.port(SessionStore).list_processes("acme", session_id)}


@pytest.mark.slow
def test_the_example_flow_on_worker_processes(cluster):
    cluster.start_workers("arthur-flow", "arthur-flow")
    cluster.start_sweeper()
    cluster.brain.settings.unset("acme", SettingScope.tenant(),
                                               "session.defaultChatEngine")  # arthur
    brain, who = cluster.brain, cluster.who
    session = brain.sessions.create(who, title="Literature Review")
    pid = session.chat_process_id
    wait_for(lambda: _statuses(cluster, session.id) == {"chat": ProcessStatus.IDLE}, timeout=30)

    brain.sessions.steer(who, pid, "Analyze the 5 PDFs in /papers/ for contradictions")
    wait_for(lambda: _statuses(cluster, session.id) == {
        "chat": ProcessStatus.BLOCKED, "paper-diff": ProcessStatus.BLOCKED}, timeout=30)
    brain.sessions.steer(who, pid, "Yes, do it.")
    wait_for(lambda: _statuses(cluster, session.id) == {
        "chat": ProcessStatus.IDLE, "paper-diff": ProcessStatus.CLOSED}, timeout=30)
    wait_for(lambda: brain.store.port(LaneStore).chat_history("acme", pid)[-1].content
             == "paper-diff is finished: 3 contradictions found.", timeout=30)

    worker = next(p for p in brain.store.port(SessionStore).list_processes("acme", session.id)
                  if p.name == "paper-diff")
    assert worker.close_reason is CloseReason.DONE and worker.parent_process_id == pid
    assert worker.recipe_name == "analyze" and worker.engine == "ford"
    lines = [(m.role, m.content) for m in brain.store.port(LaneStore).chat_history("acme", pid)
             if m.role is not ChatRole.TOOL]
    assert [role for role, _ in lines] == [
        ChatRole.ASSISTANT, ChatRole.USER, ChatRole.ASSISTANT, ChatRole.EVENT,
        ChatRole.ASSISTANT, ChatRole.USER, ChatRole.ASSISTANT, ChatRole.EVENT,
        ChatRole.ASSISTANT]
    assert lines[2][1] == "Started paper-diff; I'll tell you when it reports back."
    assert 'type="blocked"' in lines[3][1] and "Vaswani2017" in lines[3][1]
    assert lines[4][1] == "paper-diff asks: may it assume Vaswani2017 as baseline?"
    assert lines[6][1] == "Forwarded."
    assert 'type="done"' in lines[7][1] and "3 contradictions found." in lines[7][1]
    tools = [m.meta["toolName"] for m in brain.store.port(LaneStore).chat_history("acme", pid)
             if m.role is ChatRole.TOOL]
    assert tools == ["process_create", "process_steer"]
    worker_lines = [m.content for m in brain.store.port(LaneStore).chat_history("acme", worker.id)]
    assert worker_lines == ["Analyze 5 PDFs for contradictions",
                            "May I assume the paper Vaswani2017 as baseline?",
                            "Yes, use Vaswani2017 as baseline", "3 contradictions found."]
    # Every turn ran on one of the two worker processes, never two at once per process.
    for process_id in (pid, worker.id):
        turns = brain.store.port(LaneStore).turn_records("acme", process_id)
        assert all(a.ended_at <= b.started_at for a, b in zip(turns, turns[1:], strict=False))
