"""Lane turns in the embedded shape: a real in-process Celery worker, fakeredis, SQLite."""

from __future__ import annotations

import threading

import pytest

from tests.helpers import wait_for
from vancetope_brain.engines.arthur import WELCOME
from vancetope_brain.errors import LlmError
from vancetope_brain.events import EventType
from vancetope_brain.llm.testing import FunctionModel, ScriptedModel
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    InboxMessage,
    ProcessStatus,
    ThinkProcess,
    UserChatInput,
    new_id,
)
from vancetope_brain.store import LaneStore, SessionStore


def _chat(emb, pid, n):
    return wait_for(lambda: (h := emb.brain.store.port(LaneStore).chat_history("acme", pid, limit=1000))
                    and len(h) >= n and h, what=f"{n} chat lines")


def test_user_message_gets_a_streamed_reply(embedded):
    emb = embedded
    emb.model = ScriptedModel(["Hello Ada, nice to meet you."])
    session = emb.brain.sessions.create_interactive(emb.who)
    pid = session.chat_process_id
    emb.brain.sessions.steer(emb.who, pid, "hi")
    lines = _chat(emb, pid, 3)  # Arthur, the default chat engine, greets first
    assert [(x.role, x.content) for x in lines] == [
        (ChatRole.ASSISTANT, WELCOME), (ChatRole.USER, "hi"),
        (ChatRole.ASSISTANT, "Hello Ada, nice to meet you.")]
    events = wait_for(lambda: (ev := emb.brain.events.read(session.id, 0))
                      and ev[-1].type is EventType.STATUS_CHANGED
                      and ev[-1].data["to"] == "IDLE" and ev)
    assert [e.seq for e in events] == list(range(events[0].seq, events[0].seq + len(events)))
    tokens = "".join(e.data["text"] for e in events if e.type is EventType.TOKEN)
    assert tokens == "Hello Ada, nice to meet you."
    assert emb.brain.store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE


def test_concurrent_senders_each_message_once_in_order(embedded):
    emb = embedded
    emb.model = FunctionModel(lambda messages, tools: "ok")
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id

    seq_of: dict[str, int] = {}

    def send(sender: int) -> None:
        for i in range(15):
            message, _ = emb.brain.sessions.steer(emb.who, pid, f"s{sender}-m{i}")
            seq_of[message.id] = message.seq

    threads = [threading.Thread(target=send, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    emb.worker.join()
    assert not emb.brain.store.port(LaneStore).pending_messages("acme", pid)
    assert emb.brain.store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE
    lines = emb.brain.store.port(LaneStore).chat_history("acme", pid, limit=1000)
    user_lines = [x for x in lines if x.role is ChatRole.USER]
    assert sorted(x.content for x in user_lines) == sorted(
        f"s{s}-m{i}" for s in range(6) for i in range(15))
    # Chat order follows inbox sequence order.
    seqs = [seq_of[x.source_message_id] for x in user_lines]
    assert seqs == sorted(seqs)
    turns = emb.brain.store.port(LaneStore).turn_records("acme", pid)
    for a, b in zip(turns, turns[1:], strict=False):
        assert a.ended_at <= b.started_at and a.epoch < b.epoch


def test_llm_failure_becomes_an_error_line_and_the_process_stays_usable(embedded):
    emb = embedded
    emb.model = ScriptedModel([LlmError("endpoint said 503"), "recovered"])
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    emb.brain.sessions.steer(emb.who, pid, "first")
    lines = _chat(emb, pid, 3)  # after Arthur's welcome
    assert lines[2].role is ChatRole.ERROR and "503" in lines[2].content
    emb.brain.sessions.steer(emb.who, pid, "second")
    lines = _chat(emb, pid, 5)
    assert lines[4].content == "recovered"
    assert emb.brain.store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE


def _raw_process(emb, engine: str, version: str) -> ThinkProcess:
    session = emb.brain.sessions.create_interactive(emb.who)
    process = ThinkProcess(id=new_id("proc"), tenant_id="acme", session_id=session.id,
                           user_id="ada", name="w", engine=engine, engine_version=version)
    emb.brain.store.port(SessionStore).create_process(process)
    return process


def test_missing_engine_or_major_version_change_makes_the_process_stale(embedded):
    emb = embedded
    emb.model = ScriptedModel([])
    gone = _raw_process(emb, "forde", "1.0.0")
    old = _raw_process(emb, "ford", "0.9.0")
    for p in (gone, old):
        emb.brain.waker.wake("acme", p.id)
    for p in (gone, old):
        wait_for(lambda p=p: emb.brain.store.port(SessionStore).get_process("acme", p.id).status
                 is ProcessStatus.CLOSED)
        assert emb.brain.store.port(SessionStore).get_process("acme", p.id).close_reason is CloseReason.STALE


def test_sweeper_recovers_a_message_whose_wake_was_lost(embedded):
    emb = embedded
    emb.model = ScriptedModel(["found you"])
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    emb.worker.join()
    # Persist without waking, as if the broker had lost the task.
    emb.brain.store.port(LaneStore).append_message(InboxMessage(
        id=new_id("msg"), tenant_id="acme", target_process_id=pid,
        message=UserChatInput(from_user="ada", content="anyone?")))
    emb.worker.join()  # the sweeper wakes it
    assert [x.content for x in emb.brain.store.port(LaneStore).chat_history("acme", pid)] == [
        WELCOME, "anyone?", "found you"]


def test_repeated_idempotency_key_is_one_message(embedded):
    emb = embedded
    emb.model = FunctionModel(lambda m, t: "ok")
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    first, created1 = emb.brain.sessions.steer(emb.who, pid, "once", idempotency_key="k1")
    again, created2 = emb.brain.sessions.steer(emb.who, pid, "once", idempotency_key="k1")
    assert (created1, created2) == (True, False) and first.id == again.id
    emb.worker.join()
    assert emb.brain.store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE
    assert [x.content for x in emb.brain.store.port(LaneStore).chat_history("acme", pid)].count("once") == 1


def test_join_waits_for_the_lanes_to_settle_and_names_what_still_moves(embedded):
    emb = embedded
    answer = threading.Event()
    emb.model = FunctionModel(lambda m, t: answer.wait(10) and "at last")
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    emb.brain.sessions.steer(emb.who, pid, "take your time")
    with pytest.raises(TimeoutError, match=r"did not settle within 0.3s: \d lane turn"):
        emb.worker.join(timeout=0.3)
    answer.set()
    emb.worker.join()
    assert emb.brain.store.port(LaneStore).chat_history("acme", pid)[-1].content == "at last"
    assert emb.brain.store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE


@pytest.mark.parametrize(("died", "steered"), [(False, False), (True, False), (True, True)])
def test_a_start_that_was_lost_or_died_runs_from_the_sweeper(embedded, died, steered):
    emb = embedded
    emb.model = ScriptedModel(["here now"])
    lanes = emb.brain.store.port(LaneStore)
    session = emb.brain.sessions.create_interactive(emb.who)
    emb.worker.join()
    # A chat stored and never woken; or its start took the epoch (RUNNING), then its worker
    # died there.
    process = emb.brain.process_factory.build(
        tenant_id="acme", project_id=session.project_id, session_id=session.id, user_id="ada",
        siblings=(), recipe="arthur").model_copy(
            update={"status": ProcessStatus.RUNNING, "epoch": 1} if died else {})
    emb.brain.store.port(SessionStore).create_process(process)
    if steered:  # and a message came in meanwhile, whose wake was lost too
        lanes.append_message(InboxMessage(
            id=new_id("msg"), tenant_id="acme", target_process_id=process.id,
            message=UserChatInput(from_user="ada", content="still there?")))
    emb.worker.join()  # the sweeper finds the unsettled lane; the start runs (again)
    assert emb.brain.store.port(SessionStore).get_process("acme", process.id).status \
        is ProcessStatus.IDLE
    # A message waits for the steer that follows the start at once (think-engines §5).
    assert [t.lifecycle for t in lanes.turn_records("acme", process.id)] == \
        ["start"] + (["steer"] if steered else [])
    expected = [WELCOME] + (["still there?", "here now"] if steered else [])
    assert [x.content for x in lanes.chat_history("acme", process.id)] == expected


def test_redis_failing_under_a_turn_retries_it_and_closes_nothing(embedded):
    """The connection to Redis drops while the reply streams (the token publish fails):
    that is the runtime's failure, not the engine's — the turn is abandoned unwritten and
    the task retries it once Redis answers again; the message is answered exactly once."""
    from vancetope_brain import runtime

    server = runtime._embedded_server
    emb = embedded
    calls = []

    def flaky(messages, tools):
        calls.append(len(calls))
        if len(calls) == 1:  # the connection drops now, and is back half a second later
            server.connected = False
            threading.Timer(0.5, lambda: setattr(server, "connected", True)).start()
        return "answered once"

    emb.model = FunctionModel(flaky)
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    emb.worker.join()
    emb.brain.sessions.steer(emb.who, pid, "hello")
    lines = _chat(emb, pid, 3)
    emb.worker.join()
    assert [(x.role, x.content) for x in emb.brain.store.port(LaneStore).chat_history(
        "acme", pid)] == [(ChatRole.ASSISTANT, WELCOME), (ChatRole.USER, "hello"),
                          (ChatRole.ASSISTANT, "answered once")]
    assert lines[2].content == "answered once" and len(calls) == 2
    process = emb.brain.store.port(SessionStore).get_process("acme", pid)
    assert (process.status, process.close_reason, process.last_error) == (
        ProcessStatus.IDLE, None, None)
