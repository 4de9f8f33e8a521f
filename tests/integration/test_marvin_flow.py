"""marvin with real Redis and real Celery worker processes (issue 10, acceptance "marvin"):
Arthur starts marvin on a goal → plan → three workers, two of them provably in parallel →
one asks for more planning → aggregate → DONE with the report at Arthur; meanwhile the
worker process running marvin's turn is SIGKILLed at three points of the tree (mid-plan,
mid-aggregate while a worker still runs, mid-root-aggregate), and the tree still completes
with no node run twice and no child spawned twice. The model is
``tests/integration/scripts_marvin.py``.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import Cluster
from vancetope_brain.engines.marvin import TaskTree
from vancetope_brain.events import EventType
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, ThinkProcess
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore

RECOVERY = 30.0  # seconds for a killed turn to be re-run elsewhere (lease TTL 2 s + sweep)


@pytest.fixture
def marvin_cluster(tmp_path: Path, redis_url: str) -> Iterator[tuple[Cluster, Path]]:
    shared = tmp_path / "shared"
    shared.mkdir()
    c = Cluster(tmp_path, redis_url, VT_TEST_MARVIN_DIR=str(shared))
    try:
        yield c, shared
    finally:
        c.close()


def _marvin(cluster: Cluster, session_id: str) -> ThinkProcess | None:
    return next((p for p in cluster.brain.store.port(SessionStore).list_processes(
        "acme", session_id) if p.engine == "marvin"), None)


def _tree(cluster: Cluster, session_id: str) -> TaskTree | None:
    process = _marvin(cluster, session_id)
    if process is None or "tree" not in process.engine_state:
        return None
    return TaskTree.model_validate(process.engine_state["tree"])


def _kill_at(cluster: Cluster, shared: Path, point: str) -> int:
    """Wait until marvin's turn hangs at ``point``, SIGKILL the worker process running it,
    start a replacement; returns the killed OS pid."""
    marker = shared / f"reached-{point}"
    wait_for(lambda: marker.exists() and marker.read_text(), timeout=RECOVERY,
             what=f"marvin's turn at {point}")
    pid = int(marker.read_text())
    victim = next(w for w in cluster.workers if w.pid == pid)
    victim.signal(signal.SIGKILL)
    victim.popen.wait(timeout=10)
    cluster.start_workers("marvin-flow")
    return pid


def _status(cluster: Cluster, session_id: str, node: str) -> str | None:
    tree = _tree(cluster, session_id)
    return tree.nodes[node].status.value if tree and node in tree.nodes else None


@pytest.mark.slow
def test_marvin_tree_on_worker_processes_survives_three_kills(marvin_cluster):
    cluster, shared = marvin_cluster
    brain, who = cluster.brain, cluster.who
    brain.settings.unset("acme", SettingScope.tenant(), "session.defaultChatEngine")  # arthur
    brain.settings.set("acme", SettingScope.tenant(), "marvin.maxParallelWorkers", 2)
    cluster.start_workers(*["marvin-flow"] * 4)
    cluster.start_sweeper()
    session = brain.sessions.create(who, title="widgets")
    brain.sessions.steer(who, session.chat_process_id, "go")

    killed = [_kill_at(cluster, shared, "plan")]          # the plan beta asked for
    wait_for(lambda: _status(cluster, session.id, "n8") == "PENDING", timeout=RECOVERY,
             what="the deeper plan committed")
    killed.append(_kill_at(cluster, shared, "subaggregate"))  # gamma still runs
    wait_for(lambda: _status(cluster, session.id, "n8") == "DONE", timeout=RECOVERY,
             what="the deeper aggregate committed")
    assert _status(cluster, session.id, "n4") == "RUNNING"  # gamma was running all along
    (shared / "release-gamma").touch()
    killed.append(_kill_at(cluster, shared, "aggregate"))     # the root's synthesis
    wait_for(lambda: (p := _marvin(cluster, session.id)) is not None
             and p.status is ProcessStatus.CLOSED, timeout=RECOVERY, what="marvin DONE")
    assert len(set(killed)) == 3

    # The report reached Arthur, who relayed it.
    lanes = brain.store.port(LaneStore)
    wait_for(lambda: lanes.chat_history("acme", session.chat_process_id)[-1].content
             == "Marvin reports: Synthesis of n2, n3, n4.", timeout=RECOVERY,
             what="Arthur relaying the report")
    marvin = _marvin(cluster, session.id)
    assert marvin is not None and marvin.close_reason is CloseReason.DONE
    tree = TaskTree.model_validate(marvin.engine_state["tree"])
    assert [(n.id, n.kind.value, n.parent, n.status.value, n.attempts)
            for n in tree.nodes.values()] == [
        ("n1", "PLAN", None, "DONE", 1), ("n2", "WORKER", "n1", "DONE", 1),
        ("n3", "WORKER", "n1", "DONE", 1), ("n4", "WORKER", "n1", "DONE", 1),
        ("n5", "AGGREGATE", "n1", "DONE", 1), ("n6", "PLAN", "n3", "DONE", 1),
        ("n7", "WORKER", "n6", "DONE", 1), ("n8", "AGGREGATE", "n6", "DONE", 1)]
    assert tree.nodes["n8"].result.summary == "Synthesis of n7."
    event = next(line.content for line in lanes.chat_history("acme", session.chat_process_id)
                 if line.role is ChatRole.EVENT and 'type="done"' in line.content)
    assert json.loads(event.split("<payload>")[1].split("</payload>")[0])["result"] == {
        "steps": ["n2", "n3", "n4"]}

    # No child spawned twice: one process per worker node, also among uncommitted attempts
    # (every spawn announces itself), and each ran its step once.
    children = [p for p in brain.store.port(SessionStore).list_processes("acme", session.id)
                if p.parent_process_id == marvin.id]
    workers = {n: tree.nodes[n].child_process_id for n in ("n2", "n3", "n4", "n7")}
    assert sorted(c.id for c in children) == sorted(workers.values())
    spawned = [e.data["childProcessId"] for e in brain.events.read(session.id, 0, count=100_000)
               if e.type is EventType.PROCESS_SPAWNED and e.process_id == marvin.id]
    assert sorted(spawned) == sorted(workers.values())
    for child in children:
        assert child.close_reason is CloseReason.DONE
        assert [line.role for line in lanes.chat_history("acme", child.id)] == [
            ChatRole.USER, ChatRole.ASSISTANT]
    log = [(kind, t, detail) for w in cluster.workers for kind, t, detail in w.entries()
           if kind in ("start", "end")]
    for step in ("alpha", "beta", "gamma", "delta"):
        assert [k for k, _, d in log if d == f"worker {step}"] == ["start", "end"]
    # Each kill point's call ran twice (the killed one never ended), its node once.
    for point in ("plan-sub", "subaggregate", "aggregate"):
        assert sorted(k for k, _, d in log if d == f"marvin {point}") == ["end", "start", "start"]

    # Two workers ran in parallel: alpha and beta overlap in time.
    at = {(k, d): t for k, t, d in log}
    assert at[("start", "worker alpha")] < at[("end", "worker beta")]
    assert at[("start", "worker beta")] < at[("end", "worker alpha")]
    # …and no more than marvin.maxParallelWorkers (2): gamma started once alpha was done.
    assert at[("start", "worker gamma")] > at[("end", "worker alpha")]
    # And each killed turn left an epoch without a turn record: nothing of it was committed.
    epochs = [r.epoch for r in lanes.turn_records("acme", marvin.id)]
    assert len(epochs) == len(set(epochs))
    assert len(set(range(1, max(epochs) + 1)) - set(epochs)) >= 3


def _chat_text(cluster: Cluster, pid: str) -> list[str]:
    return [line.content for line in cluster.brain.store.port(LaneStore).chat_history(
        "acme", pid) if line.role is ChatRole.ASSISTANT]


@pytest.mark.slow
def test_question_repair_and_limits_on_worker_processes(marvin_cluster):
    """Three sessions at once: a USER_INPUT node blocks marvin and Arthur's forwarded answer
    continues it; plan output that stays invalid after one repair fails the node and ends
    marvin with a report of the failure; a plan wider and deeper than the limits is cut."""
    cluster, _ = marvin_cluster
    brain, who = cluster.brain, cluster.who
    brain.settings.unset("acme", SettingScope.tenant(), "session.defaultChatEngine")  # arthur
    brain.settings.set("acme", SettingScope.tenant(), "marvin.maxNodes", 5)
    brain.settings.set("acme", SettingScope.tenant(), "marvin.maxDepth", 1)
    cluster.start_workers(*["marvin-flow"] * 3)
    cluster.start_sweeper()
    sessions = {}
    for case in ("ask", "bad", "wide"):
        sessions[case] = brain.sessions.create(who, title=case)
        brain.sessions.steer(who, sessions[case].chat_process_id, f"go {case}")

    ask = sessions["ask"]
    wait_for(lambda: _chat_text(cluster, ask.chat_process_id)[-1:] == [
        "Marvin asks: Which region matters?"], timeout=RECOVERY, what="Arthur relaying")
    marvin = _marvin(cluster, ask.id)
    assert marvin is not None and marvin.status is ProcessStatus.BLOCKED
    assert _status(cluster, ask.id, "n3") == "RUNNING" and _status(cluster, ask.id, "n4") \
        == "PENDING"
    brain.sessions.steer(who, ask.chat_process_id, "answer: EMEA")
    wait_for(lambda: _chat_text(cluster, ask.chat_process_id)[-1:] == [
        "Marvin reports: Synthesis of n2, n3, n4."], timeout=RECOVERY, what="the report")
    tree = _tree(cluster, ask.id)
    assert tree is not None and tree.nodes["n3"].result.summary == "EMEA"
    assert tree.nodes["n4"].result.summary == "two found for EMEA"

    bad = sessions["bad"]
    wait_for(lambda: any(t.startswith("Marvin failed: Marvin could not plan")
                         for t in _chat_text(cluster, bad.chat_process_id)),
             timeout=RECOVERY, what="the failure report")
    marvin = _marvin(cluster, bad.id)
    assert marvin is not None and marvin.close_reason is CloseReason.FAILED
    assert marvin.last_error is None  # the engine ended it; nothing crashed
    root = TaskTree.model_validate(marvin.engine_state["tree"]).nodes["n1"]
    assert root.status.value == "FAILED" and "invalid after 1 repair" in (root.error or "")

    wide = sessions["wide"]
    wait_for(lambda: (p := _marvin(cluster, wide.id)) is not None
             and p.status is ProcessStatus.CLOSED, timeout=RECOVERY, what="the wide tree")
    tree = _tree(cluster, wide.id)
    assert tree is not None and len(tree.nodes) == 5
    assert [n.goal.splitlines()[0] for n in tree.children(tree.nodes["n1"])][:3] == [
        "wide0", "wide1", "wide2"]
    assert "3 step(s) dropped" in (tree.nodes["n1"].note or "")
    assert all("marvin.maxDepth is 1" in (tree.nodes[n].note or "") for n in ("n2", "n3", "n4"))
    assert "**Not completed:**" in tree.nodes["n5"].result.summary


def _interrupt_at(cluster: Cluster, shared: Path, session_id: str, point: str) -> None:
    """Wait until marvin's turn is at ``point`` (its model call hangs there), have its user
    stop the turn (``process-interrupt``), then let the call end: a model that does not
    stream is stopped as its call ends; the turn commits nothing of what it decided."""
    marker = shared / f"reached-{point}"
    wait_for(lambda: marker.exists() and marker.read_text(), timeout=RECOVERY,
             what=f"marvin's turn at {point}")
    marvin = _marvin(cluster, session_id)
    assert marvin is not None
    cut = len(_interrupted(cluster, marvin.id))
    _, running = cluster.brain.sessions.interrupt(cluster.who, marvin.id)
    assert running
    (shared / f"hold-{point}").touch()  # the next turn at this point waits for _release
    (shared / f"never-{point}").touch()
    wait_for(lambda: len(_interrupted(cluster, marvin.id)) == cut + 1, timeout=RECOVERY,
             what=f"the interrupted turn at {point} committed")


def _release(shared: Path, point: str) -> None:
    """Let the turn after the one stopped at ``point`` go on (the test has read the tree the
    stopped turn left)."""
    (shared / f"hold-{point}").unlink()


def _interrupted(cluster: Cluster, pid: str) -> list[str]:
    return [line.content for line in cluster.brain.store.port(LaneStore).chat_history(
        "acme", pid) if line.meta.get("interrupted")]


@pytest.mark.slow
def test_interrupted_marvin_turns_leave_the_tree_consistent_and_it_completes(marvin_cluster):
    """Issue 32 part 1: marvin's turn is stopped by its user at three points of the tree
    (mid-plan, mid-aggregate while a worker runs, mid-root-aggregate); each time the tree
    stays the one last committed (no node half-DONE), the workers' reports that turn had
    read are handled by the next turn, and the tree completes with no node run twice and
    no child spawned twice."""
    cluster, shared = marvin_cluster
    brain, who = cluster.brain, cluster.who
    brain.settings.unset("acme", SettingScope.tenant(), "session.defaultChatEngine")  # arthur
    brain.settings.set("acme", SettingScope.tenant(), "marvin.maxParallelWorkers", 2)
    cluster.start_workers(*["marvin-flow"] * 4)
    session = brain.sessions.create(who, title="widgets")
    brain.sessions.steer(who, session.chat_process_id, "go")

    _interrupt_at(cluster, shared, session.id, "plan")
    assert _status(cluster, session.id, "n6") in (None, "PENDING")  # never half-DONE
    _release(shared, "plan")
    wait_for(lambda: _status(cluster, session.id, "n8") == "PENDING", timeout=RECOVERY,
             what="the deeper plan committed")
    _interrupt_at(cluster, shared, session.id, "subaggregate")
    assert _status(cluster, session.id, "n8") == "PENDING"
    _release(shared, "subaggregate")
    wait_for(lambda: _status(cluster, session.id, "n8") == "DONE", timeout=RECOVERY,
             what="the deeper aggregate committed")
    (shared / "release-gamma").touch()
    _interrupt_at(cluster, shared, session.id, "aggregate")
    _release(shared, "aggregate")
    wait_for(lambda: (p := _marvin(cluster, session.id)) is not None
             and p.status is ProcessStatus.CLOSED, timeout=RECOVERY, what="marvin DONE")

    lanes = brain.store.port(LaneStore)
    wait_for(lambda: lanes.chat_history("acme", session.chat_process_id)[-1].content
             == "Marvin reports: Synthesis of n2, n3, n4.", timeout=RECOVERY,
             what="Arthur relaying the report")
    marvin = _marvin(cluster, session.id)
    assert marvin is not None and marvin.close_reason is CloseReason.DONE
    assert len(_interrupted(cluster, marvin.id)) == 3
    tree = TaskTree.model_validate(marvin.engine_state["tree"])
    assert [(n.id, n.kind.value, n.parent, n.status.value, n.attempts)
            for n in tree.nodes.values()] == [
        ("n1", "PLAN", None, "DONE", 1), ("n2", "WORKER", "n1", "DONE", 1),
        ("n3", "WORKER", "n1", "DONE", 1), ("n4", "WORKER", "n1", "DONE", 1),
        ("n5", "AGGREGATE", "n1", "DONE", 1), ("n6", "PLAN", "n3", "DONE", 1),
        ("n7", "WORKER", "n6", "DONE", 1), ("n8", "AGGREGATE", "n6", "DONE", 1)]
    children = [p for p in brain.store.port(SessionStore).list_processes("acme", session.id)
                if p.parent_process_id == marvin.id]
    workers = {n: tree.nodes[n].child_process_id for n in ("n2", "n3", "n4", "n7")}
    assert sorted(c.id for c in children) == sorted(workers.values())
    spawned = [e.data["childProcessId"] for e in brain.events.read(session.id, 0, count=100_000)
               if e.type is EventType.PROCESS_SPAWNED and e.process_id == marvin.id]
    assert sorted(spawned) == sorted(workers.values())
    log = [(kind, t, detail) for w in cluster.workers for kind, t, detail in w.entries()
           if kind in ("start", "end")]
    for step in ("alpha", "beta", "gamma", "delta"):
        assert [k for k, _, d in log if d == f"worker {step}"] == ["start", "end"]
    # Each stopped call ran to its end once, and once more in the turn after it.
    for point in ("plan-sub", "subaggregate", "aggregate"):
        assert sorted(k for k, _, d in log if d == f"marvin {point}") == [
            "end", "end", "start", "start"]
