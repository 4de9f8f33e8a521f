"""``session-search`` (issue 29 item 7): the caller finds their own conversations by a
title's or a chat line's words, on the embedded shape (its real worker answers the chat);
another user of the tenant, or another tenant, never finds them."""

from __future__ import annotations

import contextlib
import uuid

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers, wait_process
from tests.helpers import wait_for
from vancetope_brain.identity import Principal
from vancetope_brain.models import ChatRole, ProcessStatus
from vancetope_brain.store import LaneStore


@covers("session-search", SUCCESS, REFUSAL)
def test_session_search_finds_the_callers_own_sessions_only(emb, client):
    word = f"zq{uuid.uuid4().hex[:8]}"  # in no other session of the module's server
    created = client.ok("session-create", title=f"Tea {word}", onDisconnect="KEEP_OPEN")
    sid, chat = created["session"]["id"], created["chatProcessId"]
    wait_process(emb, emb.who, chat, ProcessStatus.IDLE)
    client.ok("process-steer", targetThinkProcessId=chat, content=f"Is {word} good for tea?")
    lines = wait_for(lambda: (history := emb.brain.store.port(LaneStore).chat_history(
        "acme", chat)) and any(m.role is ChatRole.ASSISTANT and word in m.content
                               for m in history) and history, what="the echo")
    asked = next(m.seq for m in lines if m.role is ChatRole.USER)
    echoed = next(m.seq for m in lines if m.role is ChatRole.ASSISTANT and word in m.content)

    hits = client.ok("session-search", query=f'tea "{word}" OR')["hits"]
    assert hits == []  # every word must be there, and "or" is a word like any other
    hits = client.ok("session-search", query=f"TEA {word}")["hits"]
    assert [(h["sessionId"], h["processId"], h["seq"], h["role"]) for h in hits] == [
        (sid, None, None, None), (sid, chat, echoed, "assistant"), (sid, chat, asked, "user")]
    assert hits[0]["title"] == f"Tea {word}" and hits[2]["at"]
    assert [p["text"] for p in hits[2]["snippet"] if p["match"]] == [word, "tea"]
    assert "".join(p["text"] for p in hits[2]["snippet"]) == f"Is {word} good for tea?"
    assert len(client.ok("session-search", query=word, limit=1)["hits"]) == 1

    with contextlib.suppress(Exception):
        emb.brain.identity.create_user("acme", "bob", "bob")
    with contextlib.suppress(Exception):
        emb.brain.identity.create_tenant("initech", "initech")
        emb.brain.identity.create_user("initech", "ada", "ada")
    for who in (Principal("acme", "bob"), Principal("initech", "ada")):
        other = Client(emb, who)
        try:
            assert other.ok("session-search", query=word)["hits"] == []
        finally:
            other.close()

    for bad in ({}, {"query": ""}, {"query": "x" * 201}, {"query": word, "limit": 0},
                {"query": word, "limit": 51}):
        client.refused("session-search", "invalid_input", **bad)
