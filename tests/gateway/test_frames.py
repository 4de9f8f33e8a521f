"""Every request frame: its success path and at least one refusal with its stable error code
(issue 3, acceptance point 1), plus the lifecycle rules of think-engines §3/§5, the
fingerprint policy of §6 and the three ``onDisconnect`` policies at the protocol level.

A ``Connection`` is driven over a fake socket (``tests/gateway/wire.py``); turns run on the
real in-process Celery worker of the module-scoped ``embedded`` fixture. Each test declares
the frame types it covers with ``@covers``; ``test_every_request_type_is_covered`` fails
when a type of ``frames.REQUESTS`` lacks a success or a refusal test.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

# The frame tests of the Inbox and of definitions live in their own modules; importing them here
# registers their ``@covers`` for the meta-test even when this file runs alone.
import tests.gateway.test_document_frames  # noqa: F401
import tests.gateway.test_framework_letter  # noqa: F401
import tests.gateway.test_inbox_frames  # noqa: F401
import tests.gateway.test_inspector  # noqa: F401
import tests.gateway.test_recipe_frames  # noqa: F401
import tests.gateway.test_schedule_frames  # noqa: F401
import tests.gateway.test_session_pages  # noqa: F401
import tests.gateway.test_session_search_frames  # noqa: F401
import tests.gateway.test_strategy_frames  # noqa: F401
import tests.gateway.test_template_frames  # noqa: F401
import tests.gateway.test_usage  # noqa: F401
import tests.gateway.test_webhook_frames  # noqa: F401
from tests.gateway.wire import (
    COVERED,
    REFUSAL,
    SUCCESS,
    Client,
    covers,
    stays,
    wait_process,
    wait_session,
)
from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.engines import ENGINES
from vancetope_brain.errors import Conflict
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    InboxMessage,
    ProcessStatus,
    SessionStatus,
    SuspendCause,
    ThinkProcess,
    UserChatInput,
    new_id,
    utcnow,
)
from vancetope_brain.models.lifecycle import LifecycleCall
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore
from vancetope_gateway import frames
from vancetope_gateway.protocol import ConnState

S = ProcessStatus

FP = {"machineId": "m-1", "workingDir": "/home/ada/paper", "userHome": "/home/ada",
      "osUser": "ada"}


# ── fixtures and helpers ────────────────────────────────────────────────────
@pytest.fixture(scope="module", autouse=True)
def ford_chats(embedded):
    """Ada's sessions chat with Ford here (a user-level setting over the default, Arthur):
    these tests count transcript lines, and Ford's are one per message. Arthur as the
    default chat engine is exercised by test_protocol, test_server and tests/engines."""
    embedded.brain.settings.set("acme", SettingScope.user("ada"),
                                              "session.defaultChatEngine", "ford")


@pytest.fixture
def bound(emb, client):
    """``client`` bound to a fresh session whose chat process is IDLE: (client, sid, chat)."""
    created = client.ok("session-create", title="frames", onDisconnect="KEEP_OPEN")
    sid, chat = created["session"]["id"], created["chatProcessId"]
    wait_process(emb, emb.who, chat, S.IDLE)
    return client, sid, chat


def _new_process(emb, client: Client, **data) -> str:
    pid = client.ok("process-create", engine="ford", **data)["process"]["id"]
    wait_process(emb, emb.who, pid, S.IDLE)
    return pid


def _answered(emb, pid: str, content: str) -> list:
    return wait_for(lambda: [m for m in emb.brain.store.port(LaneStore).chat_history("acme", pid)
                             if m.role is ChatRole.ASSISTANT and m.content == content],
                    what=f"answer {content!r}")


def _contents(emb, pid: str) -> list[tuple[str, str]]:
    return [(m.role.value, m.content) for m in emb.brain.store.port(LaneStore).chat_history("acme", pid)]


def _status_event(client: Client, pid: str, to: str) -> dict:
    return wait_for(lambda: [e for e in client.events() if e["processId"] == pid
                             and e["type"] == "status-changed" and e["data"]["to"] == to],
                    what=f"status-changed of {pid} to {to}")[-1]


def _frames_after(client: Client, reply_to: str) -> list[dict]:
    sent = client.sock.frames()
    at = next(i for i, f in enumerate(sent) if f.get("replyTo") == reply_to)
    return sent[at + 1:]


# ── refusals that need no state: a fresh, unbound connection ────────────────
UNBOUND_REFUSALS = [
    ("session-create", {"projectId": "no-such-project"}, "not_found"),
    ("session-create", {"type": "BATCH"}, "invalid_input"),
    ("session-create", {"idleTimeoutSec": 1}, "invalid_input"),
    ("session-create", {"fingerprint": {"machineId": "m"}}, "invalid_input"),
    ("session-resume", {"sessionId": "ses_missing"}, "not_found"),
    ("session-resume", {"sessionId": "ses_x", "lastSeq": -1}, "invalid_input"),
    ("session-list", {"status": "ASLEEP"}, "invalid_input"),
    ("session-get", {"sessionId": "ses_missing"}, "not_found"),
    ("session-get", {}, "invalid_input"),
    ("session-suspend", {"sessionId": "ses_missing"}, "not_found"),
    ("session-close", {"sessionId": "ses_missing"}, "not_found"),
    ("process-create", {"engine": "ford"}, "conflict"),  # no session bound
    ("process-create", {"engine": ""}, "invalid_input"),
    ("process-start", {"processId": "proc_missing"}, "not_found"),
    ("process-pause", {"processId": "proc_missing"}, "not_found"),
    ("process-resume", {"processId": "proc_missing"}, "not_found"),
    ("process-stop", {"processId": "proc_missing"}, "not_found"),
    ("process-reset", {"processId": "proc_missing"}, "not_found"),
    ("process-status", {"processId": "proc_missing"}, "not_found"),
    ("process-interrupt", {"processId": "proc_missing"}, "not_found"),
    ("process-status", {"processId": "x" * 65}, "invalid_input"),
    ("process-list", {}, "conflict"),  # no session bound and none named
    ("process-list", {"sessionId": "ses_missing"}, "not_found"),
    ("process-steer", {"targetThinkProcessId": "proc_x", "content": "hi"}, "conflict"),
    ("process-steer", {"targetThinkProcessId": "proc_x", "content": ""}, "invalid_input"),
    ("chat-history", {"processId": "proc_missing"}, "not_found"),
    ("chat-history", {"processId": "p", "limit": 0}, "invalid_input"),
    ("chat-history", {"processId": "p", "beforeSeq": 0}, "invalid_input"),
    ("events-resume", {"lastSeq": 0}, "conflict"),  # no session bound
    ("events-resume", {"lastSeq": -1}, "invalid_input"),
    ("think-engines-list", {"name": "ford"}, "invalid_input"),  # it takes no data
    ("ping", {"pong": True}, "invalid_input"),
    ("inbox-summary", {"status": "PENDING"}, "invalid_input"),  # it takes no data
]
for _type, _data, _code in UNBOUND_REFUSALS:
    covers(_type, REFUSAL)(None)


@pytest.mark.parametrize(("frame_type", "data", "code"), UNBOUND_REFUSALS,
                         ids=[f"{t}-{c}-{i}" for i, (t, _, c) in enumerate(UNBOUND_REFUSALS)])
def test_refused_without_state(client, frame_type, data, code):
    client.refused(frame_type, code, **data)
    assert client.conn.state is ConnState.OPEN and client.conn.session is None
    assert client.ok("ping") == {}  # the connection stays usable


# ── sessions ────────────────────────────────────────────────────────────────
@covers("session-create", SUCCESS)
def test_session_create_binds_a_session_with_its_chat_process(emb, client):
    data = client.ok("session-create", title="hello", onDisconnect="KEEP_OPEN",
                     idleTimeoutSec=60, fingerprint=FP)
    session, chat = data["session"], data["chatProcessId"]
    assert session["status"] == "OPEN" and session["type"] == "INTERACTIVE"
    assert (session["title"], session["onDisconnect"], session["idleTimeoutSec"]) == \
        ("hello", "KEEP_OPEN", 60)
    assert (session["tenantId"], session["userId"], session["projectId"]) == \
        ("acme", "ada", "default")
    assert session["chatProcessId"] == chat and data["contextDrift"] is False
    assert 0 <= data["lastSeq"] <= emb.brain.events.last_seq(session["id"])
    stored = emb.brain.store.port(SessionStore).get_session("acme", session["id"])
    assert stored.fingerprint is not None and stored.fingerprint.dump() == FP
    process = emb.brain.store.port(SessionStore).get_process("acme", chat)
    assert (process.name, process.session_id) == ("chat", session["id"])
    assert process.engine in {e.name for e in ENGINES}  # session.defaultChatEngine
    assert client.conn.state is ConnState.BOUND
    # Bound: the session's events flow to this connection.
    _status_event(client, chat, "IDLE")


@covers("session-create", SUCCESS)
@covers("process-create", SUCCESS)
def test_autonomous_session_has_no_chat_process_and_process_create_works(emb, client):
    data = client.ok("session-create", type="AUTONOMOUS", onDisconnect="KEEP_OPEN")
    sid = data["session"]["id"]
    assert data["chatProcessId"] is None and data["session"]["type"] == "AUTONOMOUS"
    assert client.ok("process-list", all=True)["processes"] == []
    pid = _new_process(emb, client, goal="count sheep", name="worker")
    assert [p["id"] for p in client.ok("process-list")["processes"]] == [pid]
    steer = client.ok("process-steer", targetThinkProcessId=pid, content="ping")
    assert steer["seq"] == 1
    _answered(emb, pid, "echo: ping")
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).chat_process_id is None


@covers("session-resume", SUCCESS)
def test_session_resume_binds_and_replays_from_last_seq(emb, bound):
    client, sid, chat = bound
    client.ok("process-steer", targetThinkProcessId=chat, content="one")
    _answered(emb, chat, "echo: one")
    seen = client.turn_ended()
    other = Client(emb, emb.who)
    try:
        data = other.ok("session-resume", sessionId=sid, lastSeq=seen[0]["seq"])
        assert data["session"]["id"] == sid and data["session"]["status"] == "OPEN"
        assert data["chatProcessId"] == chat and data["contextDrift"] is False
        assert data["lastSeq"] == seen[-1]["seq"]
        wait_for(lambda: len(other.events()) == len(seen) - 1, what="replay")
        assert other.events() == seen[1:]
        assert other.conn.state is ConnState.BOUND
    finally:
        other.close()


@covers("session-resume", SUCCESS)
@covers("session-suspend", SUCCESS)
def test_session_suspend_then_resume(emb, bound):
    client, sid, chat = bound
    data = client.ok("session-suspend", sessionId=sid)
    assert data["session"]["status"] == "SUSPENDED" and data["session"]["suspendCause"] == "USER"
    assert [p["id"] for p in data["processes"]] == [chat]
    wait_process(emb, emb.who, chat, S.SUSPENDED)
    _status_event(client, chat, "SUSPENDED")
    calls = len(emb.model.calls)
    data = client.ok("session-resume", sessionId=sid)
    assert data["session"]["status"] == "OPEN" and data["session"].get("suspendCause") is None
    wait_process(emb, emb.who, chat, S.IDLE)
    assert len(emb.model.calls) == calls  # IDLE is not a turn


@covers("session-suspend", REFUSAL)
def test_session_suspend_refused_unless_open(emb, bound):
    client, sid, _ = bound
    client.ok("session-suspend", sessionId=sid)
    assert "SUSPENDED" in client.refused("session-suspend", "conflict", sessionId=sid)
    client.ok("session-close", sessionId=sid)
    client.refused("session-suspend", "conflict", sessionId=sid)


@covers("session-resume", REFUSAL)
@covers("session-close", SUCCESS, REFUSAL)
def test_session_close_stops_every_process_and_is_final(emb, bound):
    client, sid, chat = bound
    worker = _new_process(emb, client)
    client.ok("process-pause", processId=worker)
    wait_process(emb, emb.who, worker, S.PAUSED)
    data = client.ok("session-close", sessionId=sid)
    assert data["session"]["status"] == "CLOSED"
    assert {p["id"] for p in data["processes"]} == {chat, worker}
    for pid in (chat, worker):
        process = wait_process(emb, emb.who, pid, S.CLOSED)
        assert process.close_reason is CloseReason.STOPPED
    client.refused("session-close", "conflict", sessionId=sid)
    client.refused("session-resume", "conflict", sessionId=sid)
    client.refused("process-steer", "conflict", targetThinkProcessId=chat, content="hi")


@covers("session-list", SUCCESS)
def test_session_list_newest_first_and_by_status(emb, client):
    first = client.ok("session-create", onDisconnect="KEEP_OPEN")["session"]["id"]
    second = client.ok("session-create", onDisconnect="KEEP_OPEN")["session"]["id"]
    client.ok("session-suspend", sessionId=first)
    ids = [s["id"] for s in client.ok("session-list")["sessions"]]
    assert ids.index(second) < ids.index(first)
    suspended = client.ok("session-list", status="SUSPENDED")["sessions"]
    assert first in [s["id"] for s in suspended] and second not in [s["id"] for s in suspended]
    assert {s["status"] for s in suspended} == {"SUSPENDED"}
    assert {s["userId"] for s in client.ok("session-list")["sessions"]} == {"ada"}


@covers("session-get", SUCCESS)
def test_session_get(emb, bound):
    client, sid, chat = bound
    worker = _new_process(emb, client, goal="g")
    data = client.ok("session-get", sessionId=sid)
    assert data["session"]["id"] == sid and data["session"]["chatProcessId"] == chat
    assert [(p["id"], p["status"]) for p in data["processes"]] == [(chat, "IDLE"),
                                                                  (worker, "IDLE")]


@covers("session-rename", SUCCESS, REFUSAL)
def test_session_rename_titles_a_session_in_any_status(emb, bound):
    client, sid, chat = bound
    data = client.ok("session-rename", sessionId=sid, title="  Tea\n   research  ")
    assert data["session"]["title"] == "Tea research"
    assert [p["id"] for p in data["processes"]] == [chat]
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).title == "Tea research"
    assert {s["id"]: s["title"] for s in client.ok("session-list")["sessions"]}[sid] == \
        "Tea research"
    for title in ("", " \n ", "x" * 201):
        client.refused("session-rename", "invalid_input", sessionId=sid, title=title)
    client.refused("session-rename", "invalid_input", sessionId=sid)
    client.refused("session-rename", "not_found", sessionId="ses_missing", title="Mine")
    client.ok("session-close", sessionId=sid)
    assert client.ok("session-rename", sessionId=sid, title="x" * 200)["session"]["title"] == \
        "x" * 200
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).title == "x" * 200


def test_an_untitled_session_is_titled_from_the_users_first_message(emb, client):
    created = client.ok("session-create", onDisconnect="KEEP_OPEN")
    sid, chat = created["session"]["id"], created["chatProcessId"]
    assert created["session"]["title"] == ""
    wait_process(emb, emb.who, chat, S.IDLE)
    client.ok("process-steer", targetThinkProcessId=chat, content="Please compare   green and "
              "black tea\nfor caffeine, taste and price, and tell me which to buy")
    first = "Please compare green and black tea for caffeine, taste and…"
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).title == first
    assert {s["id"]: s["title"] for s in client.ok("session-list")["sessions"]}[sid] == first
    client.ok("process-steer", targetThinkProcessId=chat, content="And oolong?")
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).title == first
    # A title the user gave is never replaced.
    client.ok("session-rename", sessionId=sid, title="Tea")
    client.ok("process-steer", targetThinkProcessId=chat, content="And white tea?")
    titled = client.ok("session-create", title="Given", onDisconnect="KEEP_OPEN")
    wait_process(emb, emb.who, titled["chatProcessId"], S.IDLE)
    client.ok("process-steer", targetThinkProcessId=titled["chatProcessId"], content="hello")
    store = emb.brain.store.port(SessionStore)
    assert (store.get_session("acme", sid).title,
            store.get_session("acme", titled["session"]["id"]).title) == ("Tea", "Given")


def test_a_message_of_spaces_leaves_a_session_untitled_for_the_next_message(emb, client):
    created = client.ok("session-create", onDisconnect="KEEP_OPEN")
    sid, chat = created["session"]["id"], created["chatProcessId"]
    wait_process(emb, emb.who, chat, S.IDLE)
    client.ok("process-steer", targetThinkProcessId=chat, content=" \n ")
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).title == ""
    client.ok("process-steer", targetThinkProcessId=chat, content="Green tea")
    client.ok("process-steer", targetThinkProcessId=chat, content="And black?")
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).title == "Green tea"


# ── process-create ──────────────────────────────────────────────────────────
@covers("process-create", SUCCESS)
def test_process_create_starts_the_process_on_its_lane(emb, bound):
    client, sid, _ = bound
    data = client.ok("process-create", engine="ford", goal="summarize", name="summarizer",
                     params={"prompt": "Be brief."})
    process = data["process"]
    assert (process["engine"], process["goal"], process["name"], process["sessionId"]) == \
        ("ford", "summarize", "summarizer", sid)
    assert process["status"] == "INIT" and process["engineParams"] == {"prompt": "Be brief."}
    assert process["userId"] == "ada" and process["tenantId"] == "acme"
    wait_process(emb, emb.who, process["id"], S.IDLE)
    _status_event(client, process["id"], "IDLE")


@covers("process-create", REFUSAL)
def test_process_create_unknown_engine_suggests_the_closest(emb, bound):
    client, sid, chat = bound
    message = client.refused("process-create", "unknown_engine", engine="frod")
    assert "'frod'" in message and "did you mean 'ford'" in message
    assert [p.id for p in emb.brain.store.port(SessionStore).list_processes("acme", sid)] == [chat]


@covers("process-create", REFUSAL)
def test_process_create_with_a_wrong_case_engine_names_the_engines(emb, bound):
    client, sid, chat = bound
    message = client.refused("process-create", "unknown_engine", engine="Arthur")
    assert message.startswith("no think engine named 'Arthur'; did you mean 'arthur'? "
                              "(engines: agrajag, arthur, ford, marvin, ")
    assert "vogon, zaphod" in message  # (and the engines the tests register)
    assert [p.id for p in emb.brain.store.port(SessionStore).list_processes("acme", sid)] == [chat]


@covers("process-create", REFUSAL)
def test_process_create_refused_in_suspended_and_closed_sessions(emb, bound):
    client, sid, chat = bound
    client.ok("session-suspend", sessionId=sid)
    assert "SUSPENDED" in client.refused("process-create", "conflict", engine="ford")
    client.ok("session-close", sessionId=sid)
    assert "CLOSED" in client.refused("process-create", "conflict", engine="ford")
    assert [p.id for p in emb.brain.store.port(SessionStore).list_processes("acme", sid)] == [chat]


# ── process lifecycle commands ──────────────────────────────────────────────
@covers("process-start", SUCCESS, REFUSAL)
def test_process_start_kicks_an_init_process_once(emb, bound):
    client, sid, chat = bound
    # A process whose lane has not picked it up yet (as right after process-create); its lane
    # is held meanwhile, so neither the sweeper nor process-start's wake can start it yet.
    late = ThinkProcess(id=new_id("proc"), tenant_id="acme", session_id=sid, user_id="ada",
                        name="late", engine="ford", engine_version="1.0.0")
    emb.brain.redis.set(keys.lease(late.id), "held by the test")
    emb.brain.store.port(SessionStore).create_process(late)
    stays(lambda: emb.brain.store.port(SessionStore).get_process("acme", late.id).status is S.INIT, 0.4)
    data = client.ok("process-start", processId=late.id)
    assert data["process"]["id"] == late.id and data["process"]["status"] == "INIT"
    emb.brain.redis.delete(keys.lease(late.id))
    wait_process(emb, emb.who, late.id, S.IDLE)
    assert "IDLE" in client.refused("process-start", "conflict", processId=late.id)
    client.refused("process-start", "conflict", processId=chat)


@covers("process-pause", SUCCESS)
def test_process_pause(emb, bound):
    client, _, chat = bound
    data = client.ok("process-pause", processId=chat)
    assert data["process"]["id"] == chat and data["process"]["pendingControl"] == "pause"
    wait_process(emb, emb.who, chat, S.PAUSED)
    _status_event(client, chat, "PAUSED")


@covers("process-pause", REFUSAL)
def test_process_pause_refused_when_paused_or_closed(emb, bound):
    client, _, chat = bound
    client.ok("process-pause", processId=chat)
    wait_process(emb, emb.who, chat, S.PAUSED)
    assert "PAUSED" in client.refused("process-pause", "conflict", processId=chat)
    worker = _new_process(emb, client)
    client.ok("process-stop", processId=worker)
    wait_process(emb, emb.who, worker, S.CLOSED)
    client.refused("process-pause", "conflict", processId=worker)


@covers("process-interrupt", SUCCESS)
def test_process_interrupt_stops_the_running_turn_at_its_model_calls_end(emb, bound):
    """A model that does not stream is stopped as its call ends: what it said is committed
    as the assistant's line marked ``interrupted``, nothing more is asked of it."""
    client, _, chat = bound
    asked, release = threading.Event(), threading.Event()

    def slow(messages, tools):
        asked.set()
        release.wait(10)
        return "Half an ans"

    emb.model = FunctionModel(slow)
    client.ok("process-steer", targetThinkProcessId=chat, content="go on")
    assert asked.wait(10)
    data = client.ok("process-interrupt", processId=chat)
    assert data == {"process": data["process"], "interrupted": True}
    assert data["process"]["status"] == "RUNNING"
    release.set()
    wait_process(emb, emb.who, chat, S.IDLE)
    lines = emb.brain.store.port(LaneStore).chat_history("acme", chat)
    # (the cut line links to its turn's inspector record, as every line the turn wrote)
    assert [(m.role, m.content, {k: v for k, v in m.meta.items() if k != "turn"})
            for m in lines[-2:]] == [
        (ChatRole.USER, "go on", {}), (ChatRole.ASSISTANT, "Half an ans", {"interrupted": True})]
    assert lines[-1].meta["turn"].startswith("turn_")
    assert len(emb.model.calls) == 1
    assert emb.brain.store.port(LaneStore).pending_messages("acme", chat) == []
    # Idle now: nothing to stop, and the next turn is a normal one.
    assert client.ok("process-interrupt", processId=chat)["interrupted"] is False


@covers("process-interrupt", REFUSAL)
def test_process_interrupt_refused_for_a_closed_or_foreign_process(emb, bound):
    client, _, _ = bound
    worker = _new_process(emb, client)
    client.ok("process-stop", processId=worker)
    wait_process(emb, emb.who, worker, S.CLOSED)
    assert "CLOSED" in client.refused("process-interrupt", "conflict", processId=worker)


@covers("process-steer", SUCCESS)
@covers("process-resume", SUCCESS)
def test_steer_on_paused_is_queued_until_process_resume(emb, bound):
    client, _, chat = bound
    client.ok("process-pause", processId=chat)
    wait_process(emb, emb.who, chat, S.PAUSED)
    steer = client.ok("process-steer", targetThinkProcessId=chat, content="later")
    assert steer["duplicate"] is False and steer["seq"] == 1
    assert [m.id for m in emb.brain.store.port(LaneStore).pending_messages("acme", chat)] == [steer["messageId"]]
    stays(lambda: emb.brain.store.port(LaneStore).chat_history("acme", chat) == []
          and emb.brain.store.port(SessionStore).get_process("acme", chat).status is S.PAUSED)
    assert emb.model.calls == []
    data = client.ok("process-resume", processId=chat)
    assert data["process"]["pendingControl"] == "resume"
    _answered(emb, chat, "echo: later")
    wait_process(emb, emb.who, chat, S.IDLE)
    assert emb.brain.store.port(LaneStore).pending_messages("acme", chat) == []
    assert len(emb.model.calls) == 1


@covers("process-resume", REFUSAL)
def test_process_resume_refused_on_idle(emb, bound):
    client, _, chat = bound
    assert "IDLE" in client.refused("process-resume", "conflict", processId=chat)
    assert emb.brain.store.port(SessionStore).get_process("acme", chat).pending_control is None


@covers("process-stop", SUCCESS, REFUSAL)
def test_process_stop(emb, bound):
    client, _, _ = bound
    worker = _new_process(emb, client)
    data = client.ok("process-stop", processId=worker)
    assert data["process"]["pendingControl"] == "stop"
    process = wait_process(emb, emb.who, worker, S.CLOSED)
    assert process.close_reason is CloseReason.STOPPED
    _status_event(client, worker, "CLOSED")
    assert "CLOSED" in client.refused("process-stop", "conflict", processId=worker)


@covers("process-reset", SUCCESS, REFUSAL)
def test_process_reset_starts_afresh_and_keeps_the_chat(emb, bound):
    client, _, chat = bound
    client.ok("process-steer", targetThinkProcessId=chat, content="remember me")
    _answered(emb, chat, "echo: remember me")
    wait_process(emb, emb.who, chat, S.IDLE)
    data = client.ok("process-reset", processId=chat)
    assert data["process"]["pendingControl"] == "reset"
    _status_event(client, chat, "INIT")
    wait_process(emb, emb.who, chat, S.IDLE)
    lines = emb.brain.store.port(LaneStore).chat_history("acme", chat)
    assert [m.role for m in lines] == [ChatRole.USER, ChatRole.ASSISTANT, ChatRole.SYSTEM]
    assert "reset" in lines[-1].content
    assert [t.lifecycle for t in emb.brain.store.port(LaneStore).turn_records("acme", chat)][-2:] == \
        ["reset", "start"]
    worker = _new_process(emb, client)
    client.ok("process-stop", processId=worker)
    wait_process(emb, emb.who, worker, S.CLOSED)
    assert "CLOSED" in client.refused("process-reset", "conflict", processId=worker)


@covers("process-status", SUCCESS)
def test_process_status(emb, bound):
    client, sid, chat = bound
    process = client.ok("process-status", processId=chat)["process"]
    assert (process["id"], process["sessionId"], process["status"], process["engine"]) == \
        (chat, sid, "IDLE", "ford")
    assert process["contextDrift"] is False and process.get("closeReason") is None


@covers("process-list", SUCCESS)
def test_process_list_hides_closed_unless_all(emb, bound):
    client, sid, chat = bound
    worker = _new_process(emb, client)
    gone = _new_process(emb, client)
    client.ok("process-stop", processId=gone)
    wait_process(emb, emb.who, gone, S.CLOSED)
    assert [p["id"] for p in client.ok("process-list")["processes"]] == [chat, worker]
    everything = client.ok("process-list", all=True)["processes"]
    assert [(p["id"], p["status"]) for p in everything] == [
        (chat, "IDLE"), (worker, "IDLE"), (gone, "CLOSED")]
    # Another of the caller's sessions, by id.
    other = Client(emb, emb.who)
    try:
        other_chat = other.ok("session-create", onDisconnect="KEEP_OPEN")["chatProcessId"]
        assert [p["id"] for p in other.ok("process-list", sessionId=sid)["processes"]] == \
            [chat, worker]
        assert [p["id"] for p in client.ok("process-list", sessionId=other.conn.session.id)
                ["processes"]] == [other_chat]
    finally:
        other.close()


# ── steering ────────────────────────────────────────────────────────────────
@covers("process-steer", SUCCESS)
def test_process_steer_persists_answers_and_deduplicates(emb, bound):
    client, _, chat = bound
    first = client.ok("process-steer", targetThinkProcessId=chat, content="hi",
                      idempotencyKey="k1")
    assert first["seq"] == 1 and first["duplicate"] is False
    again = client.ok("process-steer", targetThinkProcessId=chat, content="hi",
                      idempotencyKey="k1")
    assert again == {**first, "duplicate": True}
    _answered(emb, chat, "echo: hi")
    wait_process(emb, emb.who, chat, S.IDLE)
    assert _contents(emb, chat) == [("user", "hi"), ("assistant", "echo: hi")]
    assert len(emb.model.calls) == 1


@covers("process-steer", REFUSAL)
def test_process_steer_refused_on_closed_and_for_another_session(emb, bound):
    client, _, chat = bound
    other = Client(emb, emb.who)
    try:
        foreign = other.ok("session-create", onDisconnect="KEEP_OPEN")["chatProcessId"]
        assert "another session" in client.refused(
            "process-steer", "conflict", targetThinkProcessId=foreign, content="hi")
    finally:
        other.close()
    client.refused("process-steer", "not_found", targetThinkProcessId="proc_missing",
                   content="hi")
    worker = _new_process(emb, client)
    client.ok("process-stop", processId=worker)
    wait_process(emb, emb.who, worker, S.CLOSED)
    assert "CLOSED" in client.refused("process-steer", "conflict", targetThinkProcessId=worker,
                                      content="hi")
    assert emb.brain.store.port(LaneStore).pending_messages("acme", worker) == []
    assert emb.brain.store.port(LaneStore).pending_messages("acme", chat) == []
    assert emb.brain.store.port(LaneStore).pending_messages("acme", foreign) == []


# ── chat history and events ─────────────────────────────────────────────────
@covers("chat-history", SUCCESS, REFUSAL)
def test_chat_history_pages_backwards(emb, bound):
    client, _, chat = bound
    for word in ("one", "two", "three"):
        client.ok("process-steer", targetThinkProcessId=chat, content=word)
        _answered(emb, chat, f"echo: {word}")
    wait_process(emb, emb.who, chat, S.IDLE)

    def page(**kw):
        return [(m["seq"], m["content"]) for m in
                client.ok("chat-history", processId=chat, **kw)["messages"]]

    assert page() == [(1, "one"), (2, "echo: one"), (3, "two"), (4, "echo: two"),
                      (5, "three"), (6, "echo: three")]
    assert page(limit=2) == [(5, "three"), (6, "echo: three")]
    assert page(beforeSeq=5, limit=2) == [(3, "two"), (4, "echo: two")]
    assert page(beforeSeq=3, limit=2) == [(1, "one"), (2, "echo: one")]
    assert page(beforeSeq=1, limit=2) == []
    client.refused("chat-history", "not_found", processId="proc_missing")
    client.refused("chat-history", "invalid_input", processId=chat, limit=501)


@covers("events-resume", SUCCESS, REFUSAL)
def test_events_resume_replays_exactly_the_events_after_last_seq(emb, bound):
    client, sid, chat = bound
    client.ok("process-steer", targetThinkProcessId=chat, content="stream me")
    _answered(emb, chat, "echo: stream me")
    seen = client.turn_ended()
    assert len(seen) >= 4
    cut = seen[1]["seq"]
    reply = client.request("events-resume", lastSeq=cut)
    assert reply["type"] == "events-resume"
    assert reply["data"] == {"lastSeq": seen[-1]["seq"]} == \
        {"lastSeq": emb.brain.events.last_seq(sid)}

    def replayed():
        return [f["data"] for f in _frames_after(client, reply["replyTo"]) if f["type"] == "event"]

    wait_for(lambda: len(replayed()) >= len(seen) - 2, what="replayed events")
    stays(lambda: len(replayed()) == len(seen) - 2, 0.3)  # and nothing twice
    assert replayed() == seen[2:]
    # Up to date: nothing to replay.
    reply = client.request("events-resume", lastSeq=seen[-1]["seq"])
    stays(lambda: _frames_after(client, reply["replyTo"]) == [], 0.2)
    client.refused("events-resume", "invalid_input", lastSeq="soon")


# ── client tools ────────────────────────────────────────────────────────────
SHELL = {"name": "shell", "description": "Run a command in the working directory.",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
         "safety": "MUTATING"}


@covers("client-tools-register", SUCCESS, REFUSAL)
def test_client_tools_register(emb, bound):
    client, sid, chat = bound
    assert client.ok("client-tools-register", tools=[SHELL]) == {"registered": 1}
    source = emb.brain.client_tools.source(sid, chat, timeout=1)
    assert [m.spec.name for m in source.manifests()] == ["shell"]
    assert client.ok("client-tools-register", tools=[]) == {"registered": 0}
    assert source.manifests() == []
    client.refused("client-tools-register", "invalid_input", tools=[{**SHELL, "name": "rm -rf"}])
    client.refused("client-tools-register", "invalid_input", tools=[{**SHELL, "safety": "YOLO"}])


def test_client_tools_register_needs_a_bound_session(client):
    client.refused("client-tools-register", "conflict", tools=[SHELL])


@covers("tool-result", SUCCESS, REFUSAL)
def test_tool_result_reaches_the_waiting_call(emb, bound):
    client, sid, chat = bound
    client.ok("client-tools-register", tools=[SHELL])
    source = emb.brain.client_tools.source(sid, chat, timeout=5)
    outcome: list = []
    caller = threading.Thread(target=lambda: outcome.append(source.call("shell", {"cmd": "ls"})))
    caller.start()
    try:
        call = wait_for(lambda: client.sock.frames("tool-call"), what="tool-call")[0]["data"]
        assert (call["toolName"], call["params"]) == ("shell", {"cmd": "ls"})
        assert client.ok("tool-result", toolCallId=call["toolCallId"], status="success",
                         result={"stdout": "paper.pdf"}) == {"late": False}
    finally:
        caller.join(10)
    assert outcome and outcome[0].result == {"stdout": "paper.pdf"}, outcome
    assert outcome[0].status.value == "success"
    # Answered once; the request never shows up as an event.
    client.refused("tool-result", "not_found", toolCallId=call["toolCallId"], status="success")
    client.refused("tool-result", "not_found", toolCallId="tc_never_sent", status="error",
                   error="boom")
    client.refused("tool-result", "invalid_input", toolCallId=call["toolCallId"], status="maybe")
    assert "client-tool-request" not in {e["type"] for e in client.events()}


@covers("think-engines-list", SUCCESS)
def test_think_engines_list(client):
    engines = client.ok("think-engines-list")["engines"]
    assert engines == [e.describe() for e in ENGINES]
    ford = next(e for e in engines if e["name"] == "ford")
    assert ford["title"] == "Ford" and ford["version"] and ford["description"]


@covers("ping", SUCCESS)
def test_ping(client):
    assert client.request("ping") == {"type": "ping", "replyTo": "r1", "data": {}}


# ── fingerprint (think-engines §6) ──────────────────────────────────────────
def _suspended_by_disconnect(emb, fingerprint: dict, workers: int = 2) -> tuple[str, list[str]]:
    """A session bound with ``fingerprint`` whose only client went away (onDisconnect
    SUSPEND): the session and all its processes (chat first) are SUSPENDED."""
    c = Client(emb, emb.who)
    try:
        created = c.ok("session-create", fingerprint=fingerprint)
        pids = [created["chatProcessId"]] + [_new_process(emb, c) for _ in range(workers)]
        for pid in pids:
            wait_process(emb, emb.who, pid, S.IDLE)
    finally:
        c.close()
    sid = created["session"]["id"]
    session = wait_session(emb, emb.who, sid, SessionStatus.SUSPENDED)
    assert session.suspend_cause is SuspendCause.DISCONNECT
    for pid in pids:
        wait_process(emb, emb.who, pid, S.SUSPENDED)
    return sid, pids


@covers("session-resume", SUCCESS)
def test_fingerprint_identical_resumes_every_process_to_idle(emb, client):
    sid, pids = _suspended_by_disconnect(emb, FP)
    data = client.ok("session-resume", sessionId=sid, fingerprint=FP)
    assert data["contextDrift"] is False and data["session"]["status"] == "OPEN"
    for pid in pids:
        assert wait_process(emb, emb.who, pid, S.IDLE).context_drift is False
    assert emb.model.calls == []


@covers("session-resume", REFUSAL)
def test_fingerprint_other_machine_is_refused_and_the_session_waits_for_its_client(emb):
    sid, pids = _suspended_by_disconnect(emb, FP, workers=1)
    stranger = Client(emb, emb.who)
    try:
        message = stranger.refused("session-resume", "fingerprint_mismatch", sessionId=sid,
                                   fingerprint={**FP, "machineId": "m-2"})
        assert "new session" in message
        assert stranger.conn.state is ConnState.OPEN and stranger.conn.session is None
    finally:
        stranger.close()
    stays(lambda: emb.brain.store.port(SessionStore).get_session("acme", sid).status is SessionStatus.SUSPENDED
          and all(emb.brain.store.port(SessionStore).get_process("acme", p).status is S.SUSPENDED for p in pids),
          0.4)
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).fingerprint.machine_id == "m-1"
    original = Client(emb, emb.who)
    try:
        assert original.ok("session-resume", sessionId=sid, fingerprint=FP)["contextDrift"] \
            is False
        for pid in pids:
            wait_process(emb, emb.who, pid, S.IDLE)
    finally:
        original.close()


@covers("process-resume", SUCCESS)
@covers("process-stop", SUCCESS)
@covers("process-reset", SUCCESS)
def test_fingerprint_other_working_dir_leaves_processes_suspended_with_context_drift(emb,
                                                                                    client):
    sid, (chat, to_stop, to_reset) = _suspended_by_disconnect(emb, FP)
    moved = {**FP, "workingDir": "/home/ada/elsewhere"}
    data = client.ok("session-resume", sessionId=sid, fingerprint=moved)
    assert data["contextDrift"] is True and data["session"]["status"] == "OPEN"
    pids = (chat, to_stop, to_reset)

    def drifting(pid):
        process = emb.brain.store.port(SessionStore).get_process("acme", pid)
        return process.status is S.SUSPENDED and process.context_drift

    stays(lambda: all(drifting(p) for p in pids))
    listed = {p["id"]: p for p in client.ok("process-list")["processes"]}
    assert {pid: (listed[pid]["status"], listed[pid]["contextDrift"]) for pid in pids} == \
        dict.fromkeys(pids, ("SUSPENDED", True))
    # A message sent meanwhile waits for the user's decision.
    client.ok("process-steer", targetThinkProcessId=chat, content="still there?")
    stays(lambda: drifting(chat) and emb.model.calls == [], 0.3)

    # The user decides for each: resume, stop, reset.
    client.ok("process-resume", processId=chat)
    assert wait_process(emb, emb.who, chat, S.IDLE).context_drift is False
    _answered(emb, chat, "echo: still there?")
    client.ok("process-stop", processId=to_stop)
    stopped = wait_process(emb, emb.who, to_stop, S.CLOSED)
    assert stopped.close_reason is CloseReason.STOPPED and stopped.context_drift is False
    client.ok("process-reset", processId=to_reset)
    assert wait_process(emb, emb.who, to_reset, S.IDLE).context_drift is False
    assert "reset" in emb.brain.store.port(LaneStore).chat_history("acme", to_reset)[-1].content
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).fingerprint.working_dir == FP["workingDir"]


def _resumed_from_another_folder_and_left(emb, sid: str) -> None:
    """The session's machine resumes it from another working directory (a drift: its
    processes stay SUSPENDED) and leaves without deciding."""
    drifted = Client(emb, emb.who)
    try:
        assert drifted.ok("session-resume", sessionId=sid,
                          fingerprint={**FP, "workingDir": "/tmp"})["contextDrift"] is True
    finally:
        drifted.close()
    wait_session(emb, emb.who, sid, SessionStatus.SUSPENDED)


def test_fingerprint_drift_is_cleared_when_the_original_client_resumes(emb):
    """Drift resume, the drifted client leaves undecided, the original client (identical
    fingerprint) resumes: the processes are back to IDLE, so ``contextDrift`` must be gone."""
    sid, pids = _suspended_by_disconnect(emb, FP, workers=0)
    _resumed_from_another_folder_and_left(emb, sid)
    original = Client(emb, emb.who)
    try:
        assert original.ok("session-resume", sessionId=sid, fingerprint=FP)["contextDrift"] \
            is False
        process = wait_process(emb, emb.who, pids[0], S.IDLE)
        assert process.context_drift is False, "IDLE process still flagged contextDrift=true"
    finally:
        original.close()


@covers("session-resume", SUCCESS)
def test_a_client_without_fingerprint_opens_a_terminal_session_but_offers_it_no_tools(emb):
    """A browser (no fingerprint: no machine id, no working directory, no client tools)
    continues a session a terminal started; the terminal's machine keeps its tools."""
    sid, (chat,) = _suspended_by_disconnect(emb, FP, workers=0)
    browser = Client(emb, emb.who)
    terminal = Client(emb, emb.who)
    try:
        data = browser.ok("session-resume", sessionId=sid)
        assert data["contextDrift"] is False and data["session"]["status"] == "OPEN"
        wait_process(emb, emb.who, chat, S.IDLE)
        browser.ok("process-steer", targetThinkProcessId=chat, content="from the browser")
        _answered(emb, chat, "echo: from the browser")
        message = browser.refused("client-tools-register", "fingerprint_mismatch",
                                  tools=[SHELL])
        assert "machine it was started on" in message
        assert browser.refused("client-tools-register", "fingerprint_mismatch", tools=[])
        assert emb.brain.client_tools.source(sid, chat, timeout=1).manifests() == []
        stored = emb.brain.store.port(SessionStore).get_session("acme", sid).fingerprint
        assert stored is not None and stored.dump() == FP
        # Another machine is still refused; the terminal's own machine binds and offers tools.
        terminal.refused("session-resume", "fingerprint_mismatch", sessionId=sid,
                         fingerprint={**FP, "machineId": "m-2"})
        assert terminal.ok("session-resume", sessionId=sid, fingerprint=FP)["contextDrift"] \
            is False
        assert terminal.ok("client-tools-register", tools=[SHELL]) == {"registered": 1}
        source = emb.brain.client_tools.source(sid, chat, timeout=1)
        assert [m.spec.name for m in source.manifests()] == ["shell"]
    finally:
        browser.close()
        terminal.close()


def test_a_client_without_fingerprint_leaves_drifted_processes_to_the_user(emb):
    """A browser cannot tell whether it is back where a drift was found: processes the drift
    left SUSPENDED stay so, flagged, and the reply says ``contextDrift``."""
    sid, (chat,) = _suspended_by_disconnect(emb, FP, workers=0)
    _resumed_from_another_folder_and_left(emb, sid)
    browser = Client(emb, emb.who)
    try:
        data = browser.ok("session-resume", sessionId=sid)
        assert data["contextDrift"] is True and data["session"]["status"] == "OPEN"
        stays(lambda: (p := emb.brain.store.port(SessionStore).get_process("acme", chat))
              .status is S.SUSPENDED and p.context_drift, 0.3)
        browser.ok("process-resume", processId=chat)  # the user's decision, as on a card
        assert wait_process(emb, emb.who, chat, S.IDLE).context_drift is False
    finally:
        browser.close()


# ── onDisconnect (think-engines §6) with the embedded worker ────────────────
def _session_with_processes(emb, c: Client, on_disconnect: str) -> tuple[str, list[str], str]:
    """A session with its chat, one worker (both IDLE) and a stopped process."""
    created = c.ok("session-create", onDisconnect=on_disconnect)
    sid, chat = created["session"]["id"], created["chatProcessId"]
    worker = _new_process(emb, c, name="worker")
    stopped = _new_process(emb, c, name="stopped")
    c.ok("process-stop", processId=stopped)
    wait_process(emb, emb.who, stopped, S.CLOSED)
    wait_process(emb, emb.who, chat, S.IDLE)
    return sid, [chat, worker], stopped


def test_on_disconnect_suspend(emb, client):
    sid, (chat, worker), stopped = _session_with_processes(emb, client, "SUSPEND")
    client.close()
    session = wait_session(emb, emb.who, sid, SessionStatus.SUSPENDED)
    assert session.suspend_cause is SuspendCause.DISCONNECT
    for pid in (chat, worker):
        wait_process(emb, emb.who, pid, S.SUSPENDED)
    assert emb.brain.store.port(SessionStore).get_process("acme", stopped).status is S.CLOSED
    # A message arriving meanwhile (not through a connection: binding would resume) waits.
    emb.brain.sessions.steer(emb.who, chat, "are you there?")
    stays(lambda: emb.brain.store.port(SessionStore).get_process("acme", chat).status is S.SUSPENDED
          and emb.brain.store.port(LaneStore).chat_history("acme", chat) == [] and emb.model.calls == [])
    assert len(emb.brain.store.port(LaneStore).pending_messages("acme", chat)) == 1

    back = Client(emb, emb.who)
    try:
        back.ok("session-resume", sessionId=sid)
        _answered(emb, chat, "echo: are you there?")
        wait_process(emb, emb.who, chat, S.IDLE)
        wait_process(emb, emb.who, worker, S.IDLE)
        assert emb.brain.store.port(SessionStore).get_process("acme", stopped).status is S.CLOSED
        assert len(emb.model.calls) == 1  # the worker went IDLE without a turn
    finally:
        back.close()


def test_on_disconnect_keep_open(emb, client):
    sid, (chat, worker), _ = _session_with_processes(emb, client, "KEEP_OPEN")
    client.close()
    stays(lambda: emb.brain.store.port(SessionStore).get_session("acme", sid).status is SessionStatus.OPEN
          and emb.brain.store.port(SessionStore).get_process("acme", chat).status is S.IDLE
          and emb.brain.store.port(SessionStore).get_process("acme", worker).status is S.IDLE)
    emb.brain.sessions.steer(emb.who, worker, "keep going")
    _answered(emb, worker, "echo: keep going")
    assert emb.brain.store.port(SessionStore).get_session("acme", sid).status is SessionStatus.OPEN


def test_on_disconnect_close(emb, client):
    sid, (chat, worker), stopped = _session_with_processes(emb, client, "CLOSE")
    client.close()
    wait_session(emb, emb.who, sid, SessionStatus.CLOSED)
    for pid in (chat, worker, stopped):
        assert wait_process(emb, emb.who, pid, S.CLOSED).close_reason is CloseReason.STOPPED
    with pytest.raises(Conflict, match="CLOSED"):
        emb.brain.sessions.steer(emb.who, chat, "too late")


def test_on_disconnect_applies_only_when_the_last_client_goes(emb, client):
    sid, (chat, worker), _ = _session_with_processes(emb, client, "SUSPEND")
    second = Client(emb, emb.who)
    try:
        second.ok("session-resume", sessionId=sid)
        client.close()
        stays(lambda: emb.brain.store.port(SessionStore).get_session("acme", sid).status is SessionStatus.OPEN
              and all(emb.brain.store.port(SessionStore).get_process("acme", p).status is S.IDLE
                      and emb.brain.store.port(SessionStore).get_process("acme", p).pending_control is None
                      for p in (chat, worker)), 0.4)
        second.ok("process-steer", targetThinkProcessId=chat, content="still here")
        _answered(emb, chat, "echo: still here")
    finally:
        second.close()
    wait_session(emb, emb.who, sid, SessionStatus.SUSPENDED)
    for pid in (chat, worker):
        wait_process(emb, emb.who, pid, S.SUSPENDED)


def test_on_disconnect_suspend_also_holds_a_process_not_started_yet(emb, client):
    """A process still INIT when the last client goes (its lane has not picked it up yet,
    e.g. created just before the disconnect) must not run once the session is SUSPENDED."""
    created = client.ok("session-create")
    sid, chat = created["session"]["id"], created["chatProcessId"]
    wait_process(emb, emb.who, chat, S.IDLE)
    late = ThinkProcess(id=new_id("proc"), tenant_id="acme", session_id=sid, user_id="ada",
                        name="late", engine="ford", engine_version="1.0.0")
    emb.brain.store.port(SessionStore).create_process(late)
    # Stored; its wake-up not yet delivered, and (dated ahead) not yet old enough for the
    # sweeper, which would otherwise race the disconnect on a loaded machine.
    emb.brain.store.port(LaneStore).append_message(InboxMessage(
        id=new_id("msg"), tenant_id="acme", target_process_id=late.id,
        created_at=utcnow() + timedelta(seconds=30),
        message=UserChatInput(from_user="ada", content="queued before the disconnect")))
    client.close()
    wait_session(emb, emb.who, sid, SessionStatus.SUSPENDED)
    # The cascade reaches it too: the session turned SUSPENDED before the cascade began.
    wait_for(lambda: (p := emb.brain.store.port(SessionStore).get_process("acme", late.id)).status is S.SUSPENDED
             or p.pending_control == LifecycleCall.SUSPEND, what="the suspend of the late one")
    emb.brain.sessions.wake("acme", late.id)  # the lane arrives late
    emb.worker.join()
    process = emb.brain.store.port(SessionStore).get_process("acme", late.id)
    assert (process.status, process.pending_control) == (S.SUSPENDED, None)
    assert emb.model.calls == [] and _contents(emb, late.id) == []
    assert [m.message.content for m in emb.brain.store.port(LaneStore).pending_messages("acme", late.id)] == [
        "queued before the disconnect"]


# ── the meta-test ───────────────────────────────────────────────────────────
def test_every_request_type_is_covered():
    missing = {t: sorted({SUCCESS, REFUSAL} - COVERED.get(t, set()))
               for t in frames.REQUESTS}
    missing = {t: kinds for t, kinds in missing.items() if kinds}
    assert not missing, f"request types without a test of: {missing}"
    assert set(COVERED) <= set(frames.REQUESTS)
