"""Tenant and user isolation (issue 3, acceptance point 2): no frame or REST call of one user
can read, steer, stop or even detect another's sessions or processes.

Ada (tenant ``acme``) owns a session with processes in several states. Two intruders — Eve
of tenant ``globex`` and Bob, another user of ``acme`` — try every request that names a
session or process with Ada's ids. Each must get exactly ``not_found`` with a message that
reads like the one for an id that never existed, and nothing of Ada's may change.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import pytest

from tests.gateway.wire import Client, http_get, stays, wait_process
from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.identity import Principal
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus, ThinkProcess, new_id
from vancetope_brain.store import LaneStore, SessionStore

S = ProcessStatus


@dataclass
class World:
    ada: Principal
    sid: str          # Ada's session (OPEN, KEEP_OPEN)
    chat: str         # IDLE, with one exchange in its chat
    paused: str       # PAUSED, one message waiting in its inbox
    fresh: str        # INIT, never started (so process-start would succeed for Ada)
    intruders: dict[str, Principal]
    clients: dict[str, Client]


@pytest.fixture(scope="module")
def world(embedded):
    embedded.model = FunctionModel(lambda m, t: f"echo: {m[-1].content}")
    brain = embedded.brain
    globex = brain.identity.create_tenant("globex", "globex")
    eve = brain.identity.create_user(globex.id, "eve", "eve")
    bob = brain.identity.create_user("acme", "bob", "bob")
    ada = embedded.who

    owner = Client(embedded, ada)
    created = owner.ok("session-create", title="ada's secrets", onDisconnect="KEEP_OPEN")
    sid, chat = created["session"]["id"], created["chatProcessId"]
    wait_process(embedded, ada, chat, S.IDLE)
    owner.ok("process-steer", targetThinkProcessId=chat, content="my secret")
    wait_for(lambda: len(brain.store.port(LaneStore).chat_history("acme", chat)) == 3,  # welcome, exchange
             what="ada's answer")
    wait_process(embedded, ada, chat, S.IDLE)
    paused = owner.ok("process-create", engine="ford", name="paused")["process"]["id"]
    wait_process(embedded, ada, paused, S.IDLE)
    owner.ok("process-pause", processId=paused)
    wait_process(embedded, ada, paused, S.PAUSED)
    owner.ok("process-steer", targetThinkProcessId=paused, content="waiting")
    fresh = ThinkProcess(id=new_id("proc"), tenant_id="acme", session_id=sid, user_id="ada",
                         name="fresh", engine="ford", engine_version="1.0.0")
    # Held, so the sweeper (which starts INIT lanes it finds) leaves it INIT; a foreign
    # process-start must still be answered like a missing id.
    brain.redis.set(keys.lease(fresh.id), "held by the test")
    brain.store.port(SessionStore).create_process(fresh)
    owner.close()  # KEEP_OPEN: the session stays OPEN

    intruders = {"eve": Principal(eve.tenant_id, eve.id), "bob": Principal("acme", bob.id)}
    clients = {}
    for name, who in intruders.items():
        clients[name] = Client(embedded, who)
        clients[name].ok("session-create", title=f"{name}'s own", onDisconnect="KEEP_OPEN")
    yield World(ada, sid, chat, paused, fresh.id, intruders, clients)
    for c in clients.values():
        c.close()
    brain.redis.delete(keys.lease(fresh.id))


def _snapshot(embedded, w: World) -> dict:
    """Everything of Ada's that an intruder's request could change."""
    store = embedded.brain.store
    session = store.port(SessionStore).get_session("acme", w.sid)
    processes = {p.id: (p.status, p.pending_control, p.close_reason, p.context_drift, p.epoch)
                 for p in store.port(SessionStore).list_processes("acme", w.sid)}
    return {
        "session": (session.status, session.suspend_cause, session.title),
        "processes": processes,
        "pending": {pid: [m.id for m in store.port(LaneStore).pending_messages("acme", pid)]
                    for pid in processes},
        "chat": {pid: [(m.seq, m.role, m.content) for m in store.port(LaneStore).chat_history("acme", pid)]
                 for pid in processes},
        "events": embedded.brain.events.last_seq(w.sid),
    }


@pytest.fixture(scope="module")
def before(embedded, world):
    snapshot = _snapshot(embedded, world)
    assert snapshot["processes"][world.chat][0] is S.IDLE
    assert snapshot["processes"][world.paused][0] is S.PAUSED
    assert snapshot["processes"][world.fresh][0] is S.INIT
    assert snapshot["pending"][world.paused] and snapshot["chat"][world.chat]
    return snapshot


# (frame type, data with "{sid}" / "{pid:<which>}" placeholders, kind of id)
FOREIGN_FRAMES = [
    ("session-resume", {"sessionId": "{sid}"}),
    ("session-get", {"sessionId": "{sid}"}),
    ("session-suspend", {"sessionId": "{sid}"}),
    ("session-close", {"sessionId": "{sid}"}),
    ("session-rename", {"sessionId": "{sid}", "title": "mine now"}),
    ("process-list", {"sessionId": "{sid}", "all": True}),
    ("process-start", {"processId": "{fresh}"}),
    ("process-pause", {"processId": "{chat}"}),
    ("process-resume", {"processId": "{paused}"}),
    ("process-stop", {"processId": "{chat}"}),
    ("process-reset", {"processId": "{chat}"}),
    ("process-status", {"processId": "{chat}"}),
    ("process-interrupt", {"processId": "{chat}"}),
    ("process-steer", {"targetThinkProcessId": "{chat}", "content": "let me in"}),
    ("process-steer", {"targetThinkProcessId": "{paused}", "content": "let me in"}),
    ("process-command", {"processId": "{chat}", "command": "approve"}),
    ("chat-history", {"processId": "{chat}"}),
]


def _fill(data: dict, ids: dict[str, str]) -> tuple[dict, str]:
    """``data`` with its placeholder replaced; returns it and the id used."""
    out, used = {}, ""
    for key, value in data.items():
        if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
            used = ids[value[1:-1]]
            value = used
        out[key] = value
    return out, used


@pytest.mark.parametrize("intruder", ["eve", "bob"])
@pytest.mark.parametrize(("frame_type", "data"), FOREIGN_FRAMES,
                         ids=[f"{t}-{next(iter(d.values()))[1:-1]}" for t, d in FOREIGN_FRAMES])
def test_frames_with_foreign_ids_look_like_missing_ids(embedded, world, before, intruder,
                                                       frame_type, data):
    client = world.clients[intruder]
    foreign = {"sid": world.sid, "chat": world.chat, "paused": world.paused,
               "fresh": world.fresh}
    missing = {"sid": new_id("ses"), "chat": new_id("proc"), "paused": new_id("proc"),
               "fresh": new_id("proc")}
    attempt, foreign_id = _fill(data, foreign)
    control, missing_id = _fill(data, missing)

    message = client.refused(frame_type, "not_found", **attempt)
    missing_message = client.refused(frame_type, "not_found", **control)
    assert foreign_id not in missing_message
    assert message.replace(foreign_id, "<id>") == missing_message.replace(missing_id, "<id>"), \
        f"{intruder} can tell Ada's id from a missing one: {message!r} vs {missing_message!r}"
    assert _snapshot(embedded, world) == before
    assert client.conn.session is not None and client.conn.session.id != world.sid


def test_listings_never_show_anothers_records(embedded, world, before):
    for name, client in world.clients.items():
        sessions = client.ok("session-list")["sessions"]
        assert [s["userId"] for s in sessions] == [world.intruders[name].user_id]
        assert world.sid not in json.dumps(sessions)
        processes = client.ok("process-list", all=True)["processes"]
        assert {p["sessionId"] for p in processes} == {client.conn.session.id}
        listed = json.dumps(processes)
        assert not any(pid in listed for pid in (world.chat, world.paused, world.fresh))
        # A fresh connection's welcome counts only the intruder's own sessions.
        fresh = Client(embedded, world.intruders[name])
        try:
            welcome = wait_for(lambda c=fresh: c.sock.frames("welcome"))[0]["data"]
            assert sum(welcome["sessions"].values()) == len(sessions) == 1
        finally:
            fresh.close()
    assert _snapshot(embedded, world) == before


def test_a_foreign_tenants_project_looks_missing(embedded, world):
    embedded.brain.identity.create_project("acme", "apollo", "apollo")
    eve = world.clients["eve"]
    foreign = eve.refused("session-create", "not_found", projectId="apollo")
    missing = eve.refused("session-create", "not_found", projectId="no-such-project")
    assert foreign.replace("apollo", "<id>") == missing.replace("no-such-project", "<id>")


def test_a_foreign_tool_call_id_looks_missing(embedded, world, before):
    """A tool call addressed to Ada's connection cannot be answered by anyone else."""
    owner = Client(embedded, world.ada)
    try:
        created = owner.ok("session-create", title="tools", onDisconnect="KEEP_OPEN")
        owner.ok("client-tools-register", tools=[{"name": "shell"}])
        source = embedded.brain.client_tools.source(created["session"]["id"],
                                                    created["chatProcessId"], timeout=5)
        outcome: list = []
        caller = threading.Thread(target=lambda: outcome.append(source.call("shell", {})))
        caller.start()
        try:
            call = wait_for(lambda: owner.sock.frames("tool-call"))[0]["data"]
            for intruder in world.clients.values():
                foreign = intruder.refused("tool-result", "not_found",
                                           toolCallId=call["toolCallId"], status="success",
                                           result="forged")
                missing = intruder.refused("tool-result", "not_found", toolCallId="tc_missing",
                                           status="success", result="forged")
                assert foreign.replace(call["toolCallId"], "<id>") == \
                    missing.replace("tc_missing", "<id>")
                assert not intruder.sock.frames("tool-call")
            owner.ok("tool-result", toolCallId=call["toolCallId"], status="success",
                     result="genuine")
        finally:
            caller.join(10)
        assert outcome and outcome[0].result == "genuine"
    finally:
        owner.close()
    assert _snapshot(embedded, world) == before


@pytest.mark.parametrize("command", ["process-steer", "process-stop"])
def test_a_command_naming_a_foreign_process_reads_like_a_missing_one(embedded, world, before,
                                                                     command):
    """Arthur carries out a client's ``process-steer`` / ``process-stop`` command on a process
    its params name (arthur-engine §3.4); naming Ada's process must read exactly like naming
    one that never existed."""
    lanes = embedded.brain.store.port(LaneStore)
    for name, client in world.clients.items():
        tenant, chat = world.intruders[name].tenant_id, client.conn.session.chat_process_id
        errors = []
        for target in (world.chat, new_id("proc")):
            seen = len(lanes.chat_history(tenant, chat))
            client.ok("process-command", processId=chat, command=command,
                      params={"targetProcessId": target, "content": "let me in"})
            [line] = wait_for(lambda t=tenant, c=chat, n=seen: [
                m.content for m in lanes.chat_history(t, c)[n:] if m.role.value == "error"],
                what=f"{command}'s refusal")
            assert target in line, line
            errors.append(line.replace(target, "<id>"))
        assert errors[0] == errors[1], f"{name} can tell Ada's id from a missing one: {errors}"
    assert _snapshot(embedded, world) == before


def test_intruders_changed_nothing(embedded, world, before):
    """After all the attempts, and a few sweeper rounds, Ada's state is exactly as it was."""
    stays(lambda: _snapshot(embedded, world) == before, 0.7)


# ── REST (the read side) ────────────────────────────────────────────────────
@pytest.fixture(scope="module")
def server(embedded, world, served):
    tokens = {name: embedded.brain.identity.issue_token(who.tenant_id, who.user_id)
              for name, who in {"ada": world.ada, **world.intruders}.items()}
    return f"http://{served}", tokens


REST_PATHS = [
    ("/sessions/{sid}", "sid"),
    ("/sessions/{sid}/processes?all=true", "sid"),
    ("/processes/{chat}", "chat"),
    ("/processes/{chat}/chat", "chat"),
    ("/processes/{paused}/chat?limit=1", "paused"),
]


@pytest.mark.parametrize("intruder", ["eve", "bob"])
@pytest.mark.parametrize(("path", "which"), REST_PATHS, ids=[p for p, _ in REST_PATHS])
def test_rest_with_foreign_ids_looks_like_missing_ids(embedded, world, before, server,
                                                      intruder, path, which):
    base, tokens = server
    foreign = {"sid": world.sid, "chat": world.chat, "paused": world.paused}
    missing = {"sid": new_id("ses"), "chat": new_id("proc"), "paused": new_id("proc")}
    # Ada reads it: the ids are real.
    status, _ = http_get(base + path.format(**foreign), tokens["ada"])
    assert status == 200
    status, body = http_get(base + path.format(**foreign), tokens[intruder])
    missing_status, missing_body = http_get(base + path.format(**missing), tokens[intruder])
    assert (status, body["code"]) == (missing_status, missing_body["code"]) == (404, "not_found")
    assert body["message"].replace(foreign[which], "<id>") == \
        missing_body["message"].replace(missing[which], "<id>"), \
        f"{intruder} can tell Ada's id from a missing one over REST: {body} vs {missing_body}"
    assert http_get(base + path.format(**foreign))[0] == 401
    assert _snapshot(embedded, world) == before


def test_rest_session_list_shows_only_ones_own(embedded, world, server):
    base, tokens = server
    status, body = http_get(f"{base}/sessions", tokens["ada"])
    assert status == 200 and world.sid in [s["id"] for s in body["sessions"]]
    for name, who in world.intruders.items():
        status, body = http_get(f"{base}/sessions", tokens[name])
        assert status == 200 and {s["userId"] for s in body["sessions"]} == {who.user_id}
        assert world.sid not in json.dumps(body)
    assert http_get(f"{base}/sessions")[0] == 401
