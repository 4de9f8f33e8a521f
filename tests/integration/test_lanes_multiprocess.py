"""Lane invariants across OS processes (ARCHITECTURE §3): 500 messages from 20 senders in
four sender processes to ONE think process, served by two Celery worker processes
(solo pool) on real Redis and one shared SQLite file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import REPO, stop_process, tail
from vancetope_brain.models import ChatRole, ProcessStatus
from vancetope_brain.store import LaneStore, SessionStore

SENDER_PROCESSES = 4
THREADS_PER_PROCESS = 5          # 20 concurrent senders
MESSAGES_PER_SENDER = 25         # 500 messages
PACE_MS = 60                     # random pause before each send: spreads sends over many turns
TOTAL = SENDER_PROCESSES * THREADS_PER_PROCESS * MESSAGES_PER_SENDER


def _run_senders(cluster, pid: str) -> list[tuple[str, int, str, bool]]:
    """Start the sender processes, let them go at once, and collect what steer returned."""
    go = cluster.tmp / "go"
    outs = [cluster.tmp / f"sent-{p}.json" for p in range(SENDER_PROCESSES)]
    logs = [open(cluster.tmp / f"sender-{p}.txt", "wb")  # noqa: SIM115 - closed below
            for p in range(SENDER_PROCESSES)]
    procs = []
    try:
        for p, out in enumerate(outs):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tests.integration.sender_main", str(out), str(go), pid,
                 str(p * THREADS_PER_PROCESS), str(THREADS_PER_PROCESS),
                 str(MESSAGES_PER_SENDER), str(PACE_MS)],
                cwd=REPO, env=cluster.env, stdout=logs[p], stderr=subprocess.STDOUT,
                start_new_session=True))
        wait_for(lambda: all(out.with_name(out.name + ".ready").exists() for out in outs)
                 or any(proc.poll() is not None for proc in procs),
                 timeout=60, interval=0.05, what="sender processes ready")
        go.touch()
        for p, proc in enumerate(procs):
            try:
                code = proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                code = None
            assert code == 0, f"sender {p} exit {code}:\n{tail(cluster.tmp / f'sender-{p}.txt')}"
    finally:
        for proc in procs:
            stop_process(proc)
        for log in logs:
            log.close()
    sent = []
    for out in outs:
        sent.extend(tuple(row) for row in json.loads(out.read_text()))
    return sent


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_500_messages_from_20_senders_each_processed_once_in_order_by_two_workers(cluster):
    workers = cluster.start_workers("echo", "echo")
    cluster.start_sweeper()
    pid = cluster.new_chat()
    started = time.monotonic()

    sent = _run_senders(cluster, pid)
    assert len(sent) == TOTAL and all(created for *_, created in sent)
    seq_of = {mid: seq for mid, seq, _, _ in sent}
    content_of = {mid: content for mid, _, content, _ in sent}
    # The store gave the 500 appends from four processes the seqs 1..500, once each.
    assert sorted(seq_of.values()) == list(range(1, TOTAL + 1))

    store = cluster.brain.store
    wait_for(lambda: not store.port(LaneStore).pending_messages("acme", pid, limit=1)
             and store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE
             and sum(line.role is ChatRole.USER for line in cluster.chat(pid)) >= TOTAL,
             timeout=120, interval=0.1, what="all 500 messages processed")
    elapsed = time.monotonic() - started

    # Each processed exactly once: the user lines are exactly the 500 contents, once each.
    chat = cluster.chat(pid)
    user_lines = [line for line in chat if line.role is ChatRole.USER]
    assert Counter(line.content for line in user_lines) == Counter(content_of.values())
    assert all(content_of[line.source_message_id] == line.content for line in user_lines)
    # ... in inbound sequence order.
    seqs = [seq_of[line.source_message_id] for line in user_lines]
    assert seqs == list(range(1, TOTAL + 1))
    assert [line.seq for line in chat] == list(range(1, len(chat) + 1))

    # Never two turns at once: committed turns are disjoint in time, epochs increase, and
    # together they drained exactly the 500 messages, none twice.
    turns = store.port(LaneStore).turn_records("acme", pid)
    turns.sort(key=lambda t: t.epoch)
    for before, after in zip(turns, turns[1:], strict=False):
        assert before.epoch < after.epoch
        assert before.ended_at <= after.started_at, (before, after)
    drained = [mid for turn in turns for mid in turn.drained_ids]
    assert len(drained) == len(set(drained)) == TOTAL
    assert set(drained) == set(seq_of)
    # One assistant reply per turn that drained messages, answering its last message.
    replies = [line for line in chat if line.role is ChatRole.ASSISTANT]
    working = [turn for turn in turns if turn.drained_ids]
    assert [r.source_message_id for r in replies] == [t.drained_ids[-1] for t in working]
    assert not [line for line in chat if line.role is ChatRole.ERROR]

    # Nothing left pending, and both worker processes ran turns under their own names.
    assert not store.port(LaneStore).pending_messages("acme", pid)
    ran = Counter(turn.worker for turn in working)
    assert set(ran) == {w.worker_id for w in workers}, (
        f"TurnRecord.worker must name the worker process; got {dict(ran)}, "
        f"workers are {[w.worker_id for w in workers]}")
    outcomes = Counter(o for w in workers for o in w.outcomes())
    assert outcomes["fenced"] == 0
    print(f"\n500 messages, 20 senders in {SENDER_PROCESSES} processes: {len(working)} turns "
          f"({dict(ran)}), task outcomes {dict(outcomes)}, epochs 1..{turns[-1].epoch}, "
          f"{elapsed:.1f}s from first send to drained")
