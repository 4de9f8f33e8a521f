"""The framework to the letter of the spec (issue 10): INIT takes no lifecycle call but start
(think-engines §5), the suspend cascade reaches PAUSED processes and a pause outlives it
(§6), the session's chat process lives as long as its session (arthur-engine §3.1), the
idle sweep, ``process-command`` (ExternalCommand, arthur-engine §2.3/§3.4),
``process-create`` by recipe or with the default engine (§8) and ``thinkengines-list``.

Each test drives the protocol over a fake socket; turns run on the real in-process Celery
worker of the module's ``embedded`` fixture (see tests/gateway/test_frames.py).
"""

from __future__ import annotations

import threading

import pytest

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers, stays, wait_process, wait_session
from tests.helpers import wait_for
from tests.lanes.test_lifecycle import Recorder
from vancetope_brain.engines import ENGINES, EngineRegistry, ThinkEngine
from vancetope_brain.engines.spawning import ProcessFactory
from vancetope_brain.errors import Conflict
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    ExternalCommand,
    OnDisconnect,
    ProcessStatus,
    SessionStatus,
    SuspendCause,
    ThinkProcess,
    ToolResult,
    UserChatInput,
    new_id,
)
from vancetope_brain.sessions.service import SessionService
from vancetope_brain.store import IdentityStore, LaneStore, SessionSearch, SessionStore
from workers.parts import Worker

S = ProcessStatus


class Witness(Recorder):
    """A ``Recorder`` that also notes what its messages are; ``stop <pid>`` makes it try to
    stop another process through its context, and note the refusal."""

    name = "test-witness"
    title = "Witness"

    def start(self, process, context):
        self._note(context, f"start pending={len(context.drain_pending())}")

    def steer(self, process, context):
        for envelope in context.drain_pending():
            message = envelope.message
            if isinstance(message, ExternalCommand):
                self._note(context, f"command {message.command} {message.params}")
            elif isinstance(message, ToolResult):
                self._note(context, f"tool-result {message.tool_name} {message.status.value} "
                                    f"{message.result}")
            elif isinstance(message, UserChatInput) and message.content.startswith("stop "):
                try:
                    context.processes().stop(message.content.removeprefix("stop "))
                except Conflict as e:
                    self._note(context, f"refused: {e}")
            else:
                self._note(context, f"steer {message.content}")


if ENGINES.find(Witness.name) is None:
    ENGINES.register(Witness)


@pytest.fixture
def bound(emb, client):
    """``client`` bound to a fresh KEEP_OPEN session whose chat process (Arthur) is IDLE."""
    created = client.ok("session-create", title="letter", onDisconnect="KEEP_OPEN")
    sid, chat = created["session"]["id"], created["chatProcessId"]
    wait_process(emb, emb.who, chat, S.IDLE)
    return client, sid, chat


def _store(emb) -> SessionStore:
    return emb.brain.store.port(SessionStore)


def _lanes(emb) -> LaneStore:
    return emb.brain.store.port(LaneStore)


@pytest.fixture
def unswept(monkeypatch):
    """No sweep acts during the test: it would start a process stored but not woken (a
    lost start, as far as the sweeper can tell), which these tests keep INIT on purpose."""
    monkeypatch.setattr(Worker, "sweep", lambda self: 0)


def _cold(emb, sid: str, engine: str = Witness.name) -> str:
    """A process stored but not woken: it stays INIT (as right after process-create, before
    its lane picks it up) — for as long as no sweep runs (``unswept``)."""
    process = ThinkProcess(id=new_id("proc"), tenant_id="acme", session_id=sid, user_id="ada",
                           name="cold", engine=engine, engine_version="1.0.0")
    _store(emb).create_process(process)
    return process.id


def _witness(emb, client: Client) -> str:
    pid = client.ok("process-create", engine=Witness.name)["process"]["id"]
    wait_process(emb, emb.who, pid, S.IDLE)
    return pid


def _notes(emb, pid: str) -> list[str]:
    return [line.content for line in _lanes(emb).chat_history("acme", pid)]


def _turns(emb, pid: str) -> list[str]:
    return [t.lifecycle for t in _lanes(emb).turn_records("acme", pid)]


# ── INIT: only start (think-engines §5) ─────────────────────────────────────
@pytest.mark.parametrize("frame", ["process-pause", "process-resume", "process-stop",
                                   "process-reset"])
def test_init_refuses_every_lifecycle_call_but_start(emb, bound, frame, unswept):
    client, sid, _ = bound
    pid = _cold(emb, sid)
    message = client.refused(frame, "conflict", processId=pid)
    assert "INIT" in message and "only start runs in INIT" in message
    assert _store(emb).get_process("acme", pid).pending_control is None
    client.ok("process-start", processId=pid)
    wait_process(emb, emb.who, pid, S.IDLE)
    assert _notes(emb, pid) == ["start pending=0"]


def test_a_message_to_a_process_not_started_waits_for_the_steer_after_its_start(emb, bound, unswept):
    """A message is not a lifecycle call: an INIT process accepts it into its inbox (a chat
    process right after session-create must not refuse the user's first line), and the
    engine gets it in the first steer after start, never in start."""
    client, sid, _ = bound
    pid = _cold(emb, sid)
    accepted = client.ok("process-steer", targetThinkProcessId=pid, content="early")
    assert accepted["seq"] == 1  # and the message's wake-up starts the process
    wait_for(lambda: _notes(emb, pid) == ["start pending=0", "steer early"],
             what="start, then the steer with the early message")
    wait_process(emb, emb.who, pid, S.IDLE)
    records = _lanes(emb).turn_records("acme", pid)
    assert [(t.lifecycle, len(t.drained_ids)) for t in records] == [("start", 0), ("steer", 1)]


def test_session_close_stops_a_process_not_started_without_calling_its_engine(emb, bound, unswept):
    client, sid, chat = bound
    pid = _cold(emb, sid)
    client.ok("session-close", sessionId=sid)
    for p in (pid, chat):
        assert wait_process(emb, emb.who, p, S.CLOSED).close_reason is CloseReason.STOPPED
    assert _notes(emb, pid) == [] and _turns(emb, pid) == ["stop"]


def test_session_suspend_of_a_process_not_started_calls_no_engine_and_resume_starts_it(
        emb, bound, unswept):
    client, sid, _ = bound
    pid = _cold(emb, sid)
    client.ok("session-suspend", sessionId=sid)
    wait_process(emb, emb.who, pid, S.SUSPENDED)
    assert _notes(emb, pid) == []
    client.ok("session-resume", sessionId=sid)
    wait_process(emb, emb.who, pid, S.IDLE)
    assert _notes(emb, pid) == ["start pending=0"]


# ── the suspend cascade reaches PAUSED processes; the pause outlives it (§6) ─
def test_session_suspend_reaches_a_paused_process_and_resume_returns_it_to_paused(emb, bound):
    client, sid, chat = bound
    pid = _witness(emb, client)
    client.ok("process-pause", processId=pid)
    wait_process(emb, emb.who, pid, S.PAUSED)

    client.ok("session-suspend", sessionId=sid)
    for p in (pid, chat):
        wait_process(emb, emb.who, p, S.SUSPENDED)
    assert _notes(emb, pid) == ["start pending=0", "pause", "suspend"]
    client.ok("process-steer", targetThinkProcessId=pid, content="while away")

    client.ok("session-resume", sessionId=sid)
    wait_process(emb, emb.who, chat, S.IDLE)
    wait_process(emb, emb.who, pid, S.PAUSED)
    stays(lambda: _store(emb).get_process("acme", pid).status is S.PAUSED, 0.3)
    assert _notes(emb, pid) == ["start pending=0", "pause", "suspend"]
    assert [m.message.content for m in _lanes(emb).pending_messages("acme", pid)] == \
        ["while away"]

    client.ok("process-resume", processId=pid)  # the user's own resume ends the pause
    wait_for(lambda: _notes(emb, pid)[-2:] == ["resume", "steer while away"],
             what="the resume and the message")
    wait_process(emb, emb.who, pid, S.IDLE)


def test_session_resume_before_the_lane_ran_the_suspend_of_a_paused_process(emb, bound):
    """The cascade requested ``suspend`` of a PAUSED process, and the session is resumed
    before that process's lane ran it: the process stays PAUSED with nothing pending."""
    client, sid, _ = bound
    pid = _witness(emb, client)
    client.ok("process-pause", processId=pid)
    wait_process(emb, emb.who, pid, S.PAUSED)
    # The cascade's request, its wake-up not yet delivered (requested directly on the store).
    _lanes(emb).request_control("acme", pid, "suspend", frozenset({S.PAUSED}))
    _store(emb).update_session_status("acme", sid, SessionStatus.SUSPENDED,
                                      allowed_from=frozenset({SessionStatus.OPEN}),
                                      suspend_cause=SuspendCause.USER)
    client.ok("session-resume", sessionId=sid)
    wait_process(emb, emb.who, pid, S.PAUSED)
    stays(lambda: (p := _store(emb).get_process("acme", pid)).status is S.PAUSED
          and p.pending_control is None, 0.3)
    assert _store(emb).get_session("acme", sid).status is SessionStatus.OPEN


def test_a_pause_still_pending_when_the_session_is_suspended_is_not_lost(emb, bound):
    client, sid, _ = bound
    pid = _witness(emb, client)
    # The user's pause, requested; its lane has not run it yet.
    _lanes(emb).request_control("acme", pid, "pause", frozenset({S.IDLE}))
    client.ok("session-suspend", sessionId=sid)
    wait_process(emb, emb.who, pid, S.SUSPENDED)
    assert _turns(emb, pid)[-2:] == ["pause", "suspend"]
    client.ok("session-resume", sessionId=sid)
    wait_process(emb, emb.who, pid, S.PAUSED)


# ── the chat process lives as long as its session (arthur-engine §3.1) ───────
def test_the_chat_process_cannot_be_stopped_on_its_own(emb, bound):
    client, sid, chat = bound
    message = client.refused("process-stop", "conflict", processId=chat)
    assert "session-close" in message
    # Nor by another process of the session, through its context.
    pid = _witness(emb, client)
    client.ok("process-steer", targetThinkProcessId=pid, content=f"stop {chat}")
    wait_for(lambda: any("is the session's chat" in n for n in _notes(emb, pid)),
             what="the witness's stop to be refused")
    stays(lambda: (p := _store(emb).get_process("acme", chat)).status is S.IDLE
          and p.pending_control is None, 0.3)
    # Closing the session is the way.
    client.ok("session-close", sessionId=sid)
    assert wait_process(emb, emb.who, chat, S.CLOSED).close_reason is CloseReason.STOPPED


def test_the_idle_sweep_suspends_a_session_without_clients_past_its_idle_timeout(emb):
    """KEEP_OPEN sessions: the one whose client left is suspended (cause IDLE, its processes
    too) by beat's sweep once its idle timeout passed; the one with a client is not."""
    left = emb.brain.sessions.create(emb.who, on_disconnect=OnDisconnect.KEEP_OPEN,
                                     idle_timeout_sec=1)
    kept = emb.brain.sessions.create(emb.who, on_disconnect=OnDisconnect.KEEP_OPEN,
                                     idle_timeout_sec=1)
    for session in (left, kept):
        wait_process(emb, emb.who, session.chat_process_id, S.IDLE)
        emb.brain.lifecycle.bind(emb.who, session.id, f"conn-{session.id}", None)
    emb.brain.lifecycle.unbind(emb.who, left.id, f"conn-{left.id}")
    assert emb.brain.sessions.get(emb.who, left.id).status is SessionStatus.OPEN

    suspended = wait_session(emb, emb.who, left.id, SessionStatus.SUSPENDED)
    assert suspended.suspend_cause is SuspendCause.IDLE
    wait_process(emb, emb.who, left.chat_process_id, S.SUSPENDED)
    emb.worker_parts.lifecycle.sweep()  # past its deadline too, but a client is bound
    assert emb.brain.sessions.get(emb.who, kept.id).status is SessionStatus.OPEN
    emb.brain.lifecycle.unbind(emb.who, kept.id, f"conn-{kept.id}")


def test_a_client_binding_while_the_idle_sweep_suspends_finds_the_session_open(
        emb, monkeypatch):
    """The idle sweep's "no client" and its suspend are one step against a bind: a bind
    that comes in between waits, then resumes the session (no client bound to a
    SUSPENDED session)."""
    session = emb.brain.sessions.create(emb.who, on_disconnect=OnDisconnect.KEEP_OPEN,
                                        idle_timeout_sec=1)
    wait_process(emb, emb.who, session.chat_process_id, S.IDLE)
    emb.brain.presence.touch("acme", session.id, 0)  # idle at once
    presence = emb.worker_parts.lifecycle._presence
    count, bound = presence.count, threading.Event()
    binder: list[threading.Thread] = []

    def count_then_a_client_binds(session_id: str) -> int:
        seen = count(session_id)
        if session_id == session.id and not binder:
            binder.append(threading.Thread(target=lambda: (emb.brain.lifecycle.bind(
                emb.who, session.id, "conn-late", None), bound.set())))
            binder[0].start()
            bound.wait(2)  # done here without the lock; with it, it waits for the sweep
        return seen

    monkeypatch.setattr(presence, "count", count_then_a_client_binds)
    emb.worker_parts.lifecycle.sweep()
    binder[0].join(10)
    assert bound.is_set()
    assert emb.brain.sessions.get(emb.who, session.id).status is SessionStatus.OPEN
    emb.brain.lifecycle.unbind(emb.who, session.id, "conn-late")


def test_the_sweep_passes_over_presence_of_a_session_the_store_does_not_have(emb):
    """A stale Redis entry for a session the store lacks is dropped; the same sweep goes on
    and suspends the real idle session."""
    left = emb.brain.sessions.create(emb.who, on_disconnect=OnDisconnect.KEEP_OPEN,
                                     idle_timeout_sec=1)
    wait_process(emb, emb.who, left.chat_process_id, S.IDLE)
    emb.brain.presence.touch("acme", "ses_gone", 0)  # idle at once, known to no store
    emb.brain.presence.touch("acme", left.id, 0)
    assert emb.worker_parts.lifecycle.sweep() == 1
    assert emb.brain.sessions.get(emb.who, left.id).status is SessionStatus.SUSPENDED
    assert ("acme", "ses_gone") not in set(emb.brain.presence.idle())


# ── process-command: a client's ExternalCommand (arthur-engine §2.3, §3.4) ───
@covers("process-command", SUCCESS)
def test_process_command_reaches_the_engine_as_an_external_command(emb, bound):
    client, _, _ = bound
    pid = _witness(emb, client)
    reply = client.ok("process-command", processId=pid, command="approve",
                      params={"itemId": "x"}, idempotencyKey="k1")
    assert reply["duplicate"] is False
    again = client.ok("process-command", processId=pid, command="approve",
                      params={"itemId": "x"}, idempotencyKey="k1")
    assert again == {**reply, "duplicate": True}
    wait_for(lambda: _notes(emb, pid)[-1:] == ["command approve {'itemId': 'x'}"],
             what="the command in the engine's steer")


@covers("process-command", SUCCESS)
def test_process_command_to_arthur_is_dispatched_without_an_llm_turn(emb, bound):
    """"User clicked Approve" → process-steer to the target without a detour through the
    model (arthur-engine §3.4)."""
    client, _, chat = bound
    pid = _witness(emb, client)
    client.ok("process-command", processId=chat, command="process-steer",
              params={"targetProcessId": pid, "content": "approved"})
    wait_for(lambda: _notes(emb, pid)[-1:] == ["steer approved"], what="the forwarded steer")
    assert emb.model.calls == []


def test_a_direct_command_arthur_cannot_carry_out_is_a_chat_error_not_a_crash(emb, bound):
    client, _, chat = bound
    pid = _witness(emb, client)
    client.ok("process-stop", processId=pid)
    wait_process(emb, emb.who, pid, S.CLOSED)
    client.ok("process-command", processId=chat, command="process-steer",
              params={"targetProcessId": pid, "content": "approved"})
    wait_for(lambda: (line := emb.brain.store.port(LaneStore).chat_history("acme", chat)[-1])
             .role is ChatRole.ERROR and "process-steer refused" in line.content,
             what="the refusal in Arthur's chat")
    assert emb.brain.store.port(SessionStore).get_process("acme", chat).status is S.IDLE
    assert emb.model.calls == []


@covers("process-command", REFUSAL)
def test_process_command_refused_for_closed_missing_and_foreign_processes(emb, bound):
    client, _, _ = bound
    client.refused("process-command", "invalid_input", processId="p", command="")
    client.refused("process-command", "not_found", processId="proc_missing", command="go")
    other = Client(emb, emb.who)
    try:
        foreign = other.ok("session-create", onDisconnect="KEEP_OPEN")["chatProcessId"]
        assert "another session" in client.refused("process-command", "conflict",
                                                   processId=foreign, command="go")
    finally:
        other.close()
    pid = _witness(emb, client)
    client.ok("process-stop", processId=pid)
    wait_process(emb, emb.who, pid, S.CLOSED)
    assert "CLOSED" in client.refused("process-command", "conflict", processId=pid,
                                      command="go")


# ── ToolResult: a client tool's answer after the call timed out ─────────────
def test_a_client_tool_result_after_the_timeout_reaches_the_caller_as_a_tool_result(emb,
                                                                                     bound):
    client, sid, _ = bound
    client.ok("client-tools-register", tools=[{"name": "local_slow"}])
    pid = _witness(emb, client)
    # The call as a turn makes it, with a short timeout; this client answers too late.
    outcome = emb.brain.client_tools.source(sid, pid, timeout=0.2).call("local_slow", {"n": 1})
    assert outcome.status.value == "timeout" and "tool-result message" in outcome.error
    [call] = [f["data"] for f in client.sock.frames("tool-call")]
    assert client.ok("tool-result", toolCallId=call["toolCallId"], status="success",
                     result={"done": True}) == {"late": True}
    wait_for(lambda: _notes(emb, pid)[-1:] == ["tool-result local_slow success {'done': True}"],
             what="the late result in the caller's steer")
    assert _turns(emb, pid)[-1] == "steer"


def test_a_result_that_beats_the_give_up_is_taken_by_the_caller(emb):
    bridge = emb.brain.client_tools
    assert bridge.deliver("tc_race", {"status": "success", "result": 7}) is None
    assert bridge.give_up("tc_race", "proc_x", "local_any") == {"status": "success",
                                                                "result": 7}
    assert bridge.give_up("tc_none", "proc_x", "local_any") is None
    late = bridge.deliver("tc_none", {"status": "success", "result": 8})
    assert (late.process_id, late.tool_name) == ("proc_x", "local_any")
    assert bridge.deliver("tc_none", {"status": "success", "result": 9}) is None  # once


# ── process-create by recipe, by template, with the default engine (§8) ───────
def test_process_create_by_recipe_and_with_a_template(emb, bound):
    client, _, _ = bound
    process = client.ok("process-create", recipe="summarize", goal="condense this",
                        template="review")["process"]
    assert (process["recipeName"], process["engine"]) == ("summarize", "ford")
    assert process["engineParams"]["template"] == "review"
    assert "recipe 'analyze' runs engine" in client.refused(
        "process-create", "invalid_input", recipe="analyze", engine="arthur")


class StandIn(ThinkEngine):
    """Stands in for marvin, built on another branch; any engine named so will do here."""

    name = "marvin"
    title = "Marvin (stand-in)"
    description = "test engine"
    version = "0.1.0"


def test_process_create_without_engine_or_recipe_runs_marvin_alias_deep_think(emb, bound):
    """Through the real SessionService with a registry holding a stand-in ``marvin`` (the
    real one comes with its own branch). The lane, which uses the global registry, finds no
    marvin of that major version and closes the process STALE; what matters here is what
    the session service creates."""
    _, sid, _ = bound
    registry = EngineRegistry()
    registry.register(StandIn)
    brain = emb.brain
    sessions = SessionService(sessions=_store(emb), lanes=_lanes(emb),
                              identity=brain.store.port(IdentityStore),
                              settings=brain.settings, waker=brain.waker,
                              processes=ProcessFactory(brain.recipes, registry),
                              search=brain.store.port(SessionSearch))
    default = sessions.create_process(emb.who, sid, goal="think deeply")
    alias = sessions.create_process(emb.who, sid, "deep-think", goal="think deeply",
                                    template="literature-review")
    assert (default.engine, alias.engine) == ("marvin", "marvin")
    assert alias.engine_params == {"template": "literature-review"}
    assert registry.get("deep-think") is registry.get("marvin")


def test_process_create_without_engine_names_marvin(emb, bound):
    """Over the wire: without marvin registered (before its branch is merged) the default
    is refused naming it; with marvin registered it is created."""
    client, _, _ = bound
    if ENGINES.find("marvin") is None:
        assert "'marvin'" in client.refused("process-create", "unknown_engine", goal="deep")
    else:
        assert client.ok("process-create", goal="deep")["process"]["engine"] == "marvin"


# ── discovery (§2, §8) ───────────────────────────────────────────────────────
@covers("thinkengines-list", SUCCESS)
def test_thinkengines_list_is_think_engines_list_with_default_settings(client):
    engines = client.ok("thinkengines-list")["engines"]
    assert engines == client.ok("think-engines-list")["engines"]
    by_name = {e["name"]: e for e in engines}
    arthur = {s["name"]: s for s in by_name["arthur"]["defaultSettings"]}
    assert arthur["arthur.maxContextTokens"] == {
        "name": "arthur.maxContextTokens", "type": "int", "default": 65536,
        "description": "Token budget of one Arthur turn; older chat is summarised or truncated "
                       "beyond it."}
    assert all(e["defaultSettings"][0]["name"] == f"{e['name']}.model" for e in engines)


@covers("thinkengines-list", REFUSAL)
def test_thinkengines_list_takes_no_data(client):
    client.refused("thinkengines-list", "invalid_input", extra=1)
