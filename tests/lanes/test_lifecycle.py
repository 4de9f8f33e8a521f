"""Lifecycle calls on the lane: legal ones run the engine method and set the status, illegal
ones are refused with a clear error; PAUSED and SUSPENDED hold messages until resume.
"""

from __future__ import annotations

import pytest

from tests.helpers import wait_for
from vancetope_brain.engines import ENGINES, ThinkEngine
from vancetope_brain.errors import Conflict
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import CloseReason, ProcessStatus, ThinkProcess, new_id
from vancetope_brain.models.lifecycle import LifecycleCall
from vancetope_brain.store import LaneStore, SessionStore


class Recorder(ThinkEngine):
    """Records every lifecycle call it gets, in its chat."""

    name = "test-recorder"
    title = "Recorder"
    description = "test engine"

    def _note(self, context, what: str) -> None:
        from vancetope_brain.models import ChatRole

        context.chat().append(ChatRole.EVENT, what)

    def start(self, process, context):
        self._note(context, "start")

    def steer(self, process, context):
        for m in context.drain_pending():
            self._note(context, f"steer:{m.message.content}")
        context.save_state({"steers": process.engine_state.get("steers", 0) + 1})

    def pause(self, process, context):
        self._note(context, "pause")

    def resume(self, process, context):
        self._note(context, "resume")
        super().resume(process, context)

    def suspend(self, process, context):
        self._note(context, "suspend")

    def stop(self, process, context):
        self._note(context, "stop")


if ENGINES.find(Recorder.name) is None:
    ENGINES.register(Recorder)


@pytest.fixture
def proc(embedded) -> ThinkProcess:
    embedded.model = FunctionModel(lambda m, t: "unused")
    session = embedded.brain.sessions.create_interactive(embedded.who)
    process = ThinkProcess(id=new_id("proc"), tenant_id="acme", session_id=session.id,
                           user_id="ada", name="rec", engine=Recorder.name,
                           engine_version=Recorder.version)
    embedded.brain.store.port(SessionStore).create_process(process)
    embedded.brain.waker.wake("acme", process.id)
    embedded.worker.join()
    for pid in (process.id, session.chat_process_id):
        assert embedded.brain.store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE
    return process


def _wait_status(emb, pid, status):
    return wait_for(lambda: (p := emb.brain.store.port(SessionStore).get_process("acme", pid)).status is status
                    and p.pending_control is None and p, what=f"status {status}")


def _notes(emb, pid) -> list[str]:
    return [line.content for line in emb.brain.store.port(LaneStore).chat_history("acme", pid)]


def test_pause_holds_messages_until_resume(embedded, proc):
    emb, pid = embedded, proc.id
    emb.brain.sessions.control(emb.who, pid, LifecycleCall.PAUSE)
    _wait_status(emb, pid, ProcessStatus.PAUSED)
    emb.brain.sessions.steer(emb.who, pid, "while paused")
    # Give a wrongly woken lane every chance to run, then check it did not.
    assert emb.worker_parts.sweep() == 0
    emb.worker_parts.runner.run("acme", pid)
    assert [m.message.content for m in emb.brain.store.port(LaneStore).pending_messages("acme", pid)] == [
        "while paused"]
    emb.brain.sessions.control(emb.who, pid, LifecycleCall.RESUME)
    _wait_status(emb, pid, ProcessStatus.IDLE)
    assert _notes(emb, pid) == ["start", "pause", "resume", "steer:while paused"]
    kinds = [t.lifecycle for t in emb.brain.store.port(LaneStore).turn_records("acme", pid)]
    assert kinds == ["start", "pause", "resume"]
    # Engine state lives in the process document, turn to turn.
    assert emb.brain.store.port(SessionStore).get_process("acme", pid).engine_state == {"steers": 1}
    emb.brain.sessions.steer(emb.who, pid, "again")
    wait_for(lambda: emb.brain.store.port(SessionStore).get_process("acme", pid).engine_state == {"steers": 2})


def test_suspend_then_resume_without_messages_starts_no_steer(embedded, proc):
    emb, pid = embedded, proc.id
    emb.brain.sessions.control(emb.who, pid, LifecycleCall.SUSPEND)
    _wait_status(emb, pid, ProcessStatus.SUSPENDED)
    emb.brain.sessions.control(emb.who, pid, LifecycleCall.RESUME)
    _wait_status(emb, pid, ProcessStatus.IDLE)
    assert _notes(emb, pid) == ["start", "suspend", "resume"]


def test_stop_is_terminal(embedded, proc):
    emb, pid = embedded, proc.id
    emb.brain.sessions.control(emb.who, pid, LifecycleCall.STOP)
    process = _wait_status(emb, pid, ProcessStatus.CLOSED)
    assert process.close_reason is CloseReason.STOPPED
    with pytest.raises(Conflict, match="CLOSED"):
        emb.brain.sessions.steer(emb.who, pid, "hello?")
    for call in LifecycleCall:
        with pytest.raises(Conflict, match="CLOSED"):
            emb.brain.sessions.control(emb.who, pid, call)
    assert _notes(emb, pid) == ["start", "stop"]


@pytest.mark.parametrize(("call", "status"), [
    (LifecycleCall.RESUME, "IDLE"), (LifecycleCall.PAUSE, "INIT"), (LifecycleCall.RESET, "INIT"),
])
def test_illegal_calls_are_refused_with_a_clear_error(embedded, call, status):
    emb = embedded
    session = emb.brain.sessions.create_interactive(emb.who)
    pid = session.chat_process_id
    if status == "IDLE":
        _wait_status(emb, pid, ProcessStatus.IDLE)
    else:  # a process nobody has woken yet stays INIT
        process = ThinkProcess(id=new_id("proc"), tenant_id="acme", session_id=session.id,
                               user_id="ada", name="cold", engine="ford", engine_version="1.0.0")
        emb.brain.store.port(SessionStore).create_process(process)
        pid = process.id
    with pytest.raises(Conflict, match=f"cannot {call.value} a process that is {status}"):
        emb.brain.sessions.control(emb.who, pid, call)
    assert emb.brain.store.port(SessionStore).get_process("acme", pid).pending_control is None
