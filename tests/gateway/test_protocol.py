"""The WebSocket protocol class against a fake socket, with a real embedded worker behind it."""

from __future__ import annotations

import itertools
import json

import fakeredis
import pytest

from tests.gateway.wire import Client, wait_session
from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.engines.arthur import WELCOME
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.identity import Principal
from vancetope_brain.models import ProcessStatus, SessionStatus
from vancetope_brain.store import LaneStore, SessionStore
from vancetope_gateway.protocol import ConnState, _encode


def _reply_done(client: Client, content: str) -> list[dict]:
    return wait_for(lambda: [e for e in client.events() if e["type"] == "chat-message"
                             and e["data"]["content"] == content],
                    what=f"chat-message {content!r}")


def test_welcome_comes_first(client):
    welcome = wait_for(lambda: client.sock.frames("welcome"))[0]
    assert client.sock.sent[0] is welcome
    assert welcome["data"]["userId"] == "ada" and welcome["data"]["llm"] == "test model"


def test_session_create_steer_and_streamed_reply(client):
    reply = client.request("session-create", title="t1")
    assert reply["type"] == "session-create"
    pid = reply["data"]["chatProcessId"]
    steer = client.request("process-steer", targetThinkProcessId=pid, content="hello")
    assert steer["type"] == "process-steer" and steer["data"]["seq"] == 1
    _reply_done(client, "echo: hello")
    events = client.events()
    first = events[0]["seq"]
    assert [e["seq"] for e in events] == list(range(first, first + len(events)))
    assert "".join(e["data"]["text"] for e in events if e["type"] == "token") == "echo: hello"
    history = client.request("chat-history", processId=pid)["data"]["messages"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("assistant", WELCOME), ("user", "hello"), ("assistant", "echo: hello")]
    assert client.conn.state is ConnState.BOUND


def test_session_list_and_resume_replays_exactly_what_was_missed(emb, client):
    created = client.request("session-create")["data"]
    sid, pid = created["session"]["id"], created["chatProcessId"]
    client.request("process-steer", targetThinkProcessId=pid, content="one")
    _reply_done(client, "echo: one")
    seen = client.turn_ended()
    cut = len(seen) // 2
    client.request("process-steer", targetThinkProcessId=pid, content="two")
    _reply_done(client, "echo: two")
    full = client.turn_ended(after_seq=seen[-1]["seq"])

    other = Client(emb, emb.who)
    try:
        listing = other.request("session-list")["data"]["sessions"]
        assert sid in [s["id"] for s in listing]
        other.request("session-resume", sessionId=sid, lastSeq=full[cut - 1]["seq"])
        wait_for(lambda: len(other.events()) == len(full) - cut, what="replay")
        assert other.events() == full[cut:]
    finally:
        other.close()


@pytest.mark.parametrize(("raw", "code"), [
    ("{not json", "bad_json"),
    ('["a list"]', "invalid_input"),
    ('{"type": "nope", "id": "1"}', "unknown_type"),
    ('{"type": "ping"}', "invalid_input"),
    ('{"type": "process-steer", "id": "1", "data": {"content": "x"}}', "invalid_input"),
    ('{"type": "chat-history", "id": "1", "data": {"processId": "p", "limit": 9999}}',
     "invalid_input"),
    ('{"type": "session-resume", "id": "1", "data": {"sessionId": "ses_nope"}}', "not_found"),
    ('{"type": "process-steer", "id": "1", "data": {"targetThinkProcessId": "p", '
     '"content": "hi"}}', "conflict"),
    (b"\x00binary", "invalid_input"),
])
def test_bad_frames_get_an_error_and_the_connection_stays_usable(client, raw, code):
    client.send_raw(raw)
    error = wait_for(lambda: client.sock.frames("error"))[0]
    assert error["data"]["code"] == code, error
    assert client.request("ping")["type"] == "ping"


def test_oversized_frame_is_refused_and_nothing_stored(emb):
    c = Client(emb, emb.who, max_frame_bytes=200)
    try:
        pid = c.request("session-create")["data"]["chatProcessId"]
        # Over the limit in UTF-8 bytes though not in characters: still 1009.
        c.send_raw(json.dumps({"type": "process-steer", "id": "big",
                               "data": {"targetThinkProcessId": pid, "content": "é" * 60}},
                              ensure_ascii=False))
        closed = wait_for(lambda: c.sock.closed_with)
        assert closed[0] == 1009 and "larger than 200 bytes" in closed[1]
        assert c.conn.state is ConnState.CLOSED and not c.sock.frames("error")
        assert emb.brain.store.port(LaneStore).pending_messages("acme", pid) == []
        assert all(m.role.value != "user" for m in emb.brain.store.port(LaneStore).chat_history("acme", pid))
    finally:
        c.close()


def test_foreign_ids_look_missing(emb, client):
    globex = emb.brain.identity.create_tenant("globex")
    eve_user = emb.brain.identity.create_user(globex.id, "eve")
    mine = client.request("session-create")["data"]
    eve = Client(emb, Principal(eve_user.tenant_id, eve_user.id))
    bob_user = emb.brain.identity.create_user("acme", "bob")
    bob = Client(emb, Principal("acme", bob_user.id))
    try:
        for intruder in (eve, bob):
            resume = intruder.request("session-resume", sessionId=mine["session"]["id"])
            assert resume["data"]["code"] == "not_found"
            history = intruder.request("chat-history", processId=mine["chatProcessId"])
            assert history["data"]["code"] == "not_found"
            assert intruder.request("session-list")["data"]["sessions"] == []
            intruder.request("session-create")
            steer = intruder.request("process-steer", targetThinkProcessId=mine["chatProcessId"],
                                     content="hi")
            assert steer["data"]["code"] == "not_found"
    finally:
        eve.close()
        bob.close()
    assert emb.brain.store.port(LaneStore).pending_messages("acme", mine["chatProcessId"]) == []


def test_rate_limit(emb, client):
    client.conn._bucket = type(client.conn._bucket)(rate=0.001, burst=3)
    assert [client.request("ping")["type"] for _ in range(3)] == ["ping"] * 3
    client.send_raw(json.dumps({"type": "ping", "id": "over", "data": {}}))
    error = wait_for(lambda: client.sock.frames("error"))[0]  # dropped unread: names no id
    assert error["data"]["code"] == "rate_limited" and "replyTo" not in error


def test_events_gap_when_the_log_was_trimmed(emb, client):
    created = client.request("session-create")["data"]
    sid = created["session"]["id"]
    wait_for(lambda: emb.brain.store.port(SessionStore).get_process("acme", created["chatProcessId"]).status
             is ProcessStatus.IDLE)
    for i in range(3):
        emb.brain.events.publish(sid, created["chatProcessId"], EventType.TOKEN, {"text": str(i)})
    last = emb.brain.events.last_seq(sid)
    # As MAXLEN trimming would do (fakeredis ignores XTRIM MINID).
    older = [sid_ for sid_, _ in emb.brain.redis.xrange(keys.events(sid))][:-1]
    emb.brain.redis.xdel(keys.events(sid), *older)
    other = Client(emb, emb.who)
    try:
        other.request("session-resume", sessionId=sid, lastSeq=0)
        gap = wait_for(lambda: other.sock.frames("events-gap"))[0]["data"]
        assert gap == {"sessionId": sid, "requestedAfter": 0, "firstAvailable": last}
    finally:
        other.close()


def test_lone_surrogates_are_bad_json_and_the_connection_lives_on(client):
    client.send_raw('{"type": "ping", "id": "\\ud800", "data": {}}')
    error = wait_for(lambda: client.sock.frames("error"))[0]
    assert error["data"]["code"] == "bad_json" and "replyTo" not in error
    assert client.request("ping")["type"] == "ping"


def test_connection_states_allow_only_the_protocols_transitions():
    legal = {(ConnState.OPEN, ConnState.BOUND), (ConnState.OPEN, ConnState.CLOSED),
             (ConnState.BOUND, ConnState.BOUND), (ConnState.BOUND, ConnState.CLOSED)}
    for old, new in itertools.product(ConnState, repeat=2):
        if (old, new) in legal:
            assert old.to(new) is new
        else:  # among them every way out of CLOSED: it is terminal
            with pytest.raises(RuntimeError, match="illegal connection transition"):
                old.to(new)


def test_a_closed_connection_serves_no_frame_and_cannot_be_bound_again(emb, client):
    sid = client.ok("session-create")["session"]["id"]
    client.conn.close()  # as a failed send or the socket going away does
    sent = len(client.sock.sent)
    try:
        client.conn.handle(json.dumps({"type": "session-resume", "id": "late",
                                       "data": {"sessionId": sid}}))
        client.conn.handle(json.dumps({"type": "ping", "id": "late-ping"}))
        assert len(client.sock.sent) == sent and client.conn.state is ConnState.CLOSED
    finally:
        # Connection._bind asks the brain to bind before the state refuses, so the late
        # session-resume left a presence entry; one that outlived this module's brain would
        # reach the next module's sweeper (the embedded Redis is per OS process).
        emb.brain.lifecycle.unbind(emb.who, sid, client.conn.connection_id)


def test_a_close_while_binding_leaves_no_binding_and_no_follow(emb, client, monkeypatch):
    bind = emb.brain.lifecycle.bind

    def bind_then_close(*args):
        bound = bind(*args)
        client.conn.close()  # as the hub does, from its thread, when a send fails
        return bound

    monkeypatch.setattr(emb.brain.lifecycle, "bind", bind_then_close)
    client.send_raw(json.dumps({"type": "session-create", "id": "c",
                                "data": {"type": "AUTONOMOUS"}}))
    assert client.ended(5)
    assert client.conn.state is ConnState.CLOSED and client.conn.session is None
    sid = emb.brain.sessions.list_sessions(emb.who).sessions[0].id
    assert emb.brain.presence.count(sid) == 0
    wait_session(emb, emb.who, sid, SessionStatus.SUSPENDED)  # its onDisconnect applied
    assert client.listener._follows == {}
    assert not client.sock.frames(reply_to="c")


def test_an_event_frame_written_from_its_logged_json_is_the_frame_of_its_dump():
    """Events go out as their logged JSON spliced into the frame (``LiveEvent.json``), not
    decoded and dumped again: the client must read the same frame either way."""
    bus = EventBus(fakeredis.FakeRedis(), max_len=100, ttl=60)
    bus.publish("ses_1", "proc_1", EventType.CHAT_MESSAGE,
                {"content": 'say "héllo" ✓\n', "n": 1.5, "none": None})
    (live,) = bus.read_live("ses_1", 0)
    event = live.decoded()
    for reply_to in (None, "req-1"):
        spliced = _encode("event", live.json(), reply_to)
        assert json.loads(spliced) == json.loads(_encode("event", event.dump(), reply_to))
        keys_in_order = ["type", "data"] if reply_to is None else ["type", "replyTo", "data"]
        assert list(json.loads(spliced)) == keys_in_order
