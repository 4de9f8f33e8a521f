"""``session-list`` pages a user's sessions (``cursor`` / ``nextCursor``, ``status``,
``limit``), old clients that send none get the first page, ``GET /sessions`` pages alike, and
the ``welcome`` counts each status up to ``COUNT_CAP`` (issue 31, target 6)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from urllib.parse import quote

import pytest

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers, http_get
from tests.helpers import wait_for
from vancetope_brain.identity import Principal
from vancetope_brain.models import Session, SessionStatus, new_id, utcnow
from vancetope_brain.sessions import service
from vancetope_brain.store import SessionStore


def _new_user(emb) -> Principal:
    """A user of the shared embedded brain whose sessions only this test makes."""
    user = f"pager{uuid.uuid4().hex[:8]}"
    emb.brain.identity.create_user("acme", user, user)
    return Principal("acme", user)


def _seed(emb, who: Principal, *statuses: SessionStatus) -> list[str]:
    """Sessions of ``who`` in the store, one a second, oldest first; their ids newest first."""
    start = utcnow() - timedelta(hours=1)
    store = emb.brain.store.port(SessionStore)
    ids = []
    for i, status in enumerate(statuses):
        session = Session(id=new_id("ses"), tenant_id=who.tenant_id, user_id=who.user_id,
                          status=status, created_at=start + timedelta(seconds=i))
        store.create_session(session)
        ids.append(session.id)
    return ids[::-1]


def _walk(client: Client, **ask) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page = client.ok("session-list", **ask, **({"cursor": cursor} if cursor else {}))
        pages.append([s["id"] for s in page["sessions"]])
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages


@covers("session-list", SUCCESS, REFUSAL)
def test_session_list_pages_newest_first_with_a_cursor(emb):
    who = _new_user(emb)
    C, S = SessionStatus.CLOSED, SessionStatus.SUSPENDED
    statuses = (C, SessionStatus.OPEN, C, C, S, C, C)
    newest_first = _seed(emb, who, *statuses)
    kinds = dict(zip(newest_first, statuses[::-1], strict=True))
    client = Client(emb, who)
    try:
        old = client.ok("session-list")  # what an old client asks: the first page
        assert [s["id"] for s in old["sessions"]] == newest_first
        assert old.get("nextCursor") is None
        assert _walk(client, limit=3) == [newest_first[:3], newest_first[3:6], newest_first[6:]]
        closed = [sid for sid in newest_first if kinds[sid] is C]
        assert _walk(client, status="CLOSED", limit=2) == [closed[:2], closed[2:4], closed[4:]]
        assert _walk(client, status="SUSPENDED", limit=2) == [
            [sid for sid in newest_first if kinds[sid] is S]]
        for bad in ({"cursor": "not-a-cursor"}, {"cursor": ""}, {"limit": 0},
                    {"limit": service.PAGE_LIMIT_MAX + 1}):
            client.refused("session-list", "invalid_input", **bad)
    finally:
        client.close()


def test_a_page_holds_the_default_number_of_sessions(emb):
    who = _new_user(emb)
    newest_first = _seed(emb, who, *[SessionStatus.CLOSED] * (service.PAGE_LIMIT + 1))
    client = Client(emb, who)
    try:
        first = client.ok("session-list")
        assert [s["id"] for s in first["sessions"]] == newest_first[:service.PAGE_LIMIT]
        rest = client.ok("session-list", cursor=first["nextCursor"])
        assert [s["id"] for s in rest["sessions"]] == newest_first[service.PAGE_LIMIT:]
    finally:
        client.close()


def test_get_sessions_pages_as_session_list_does(emb, served):
    who = _new_user(emb)
    newest_first = _seed(emb, who, SessionStatus.CLOSED, SessionStatus.OPEN,
                         SessionStatus.CLOSED)
    token = emb.brain.identity.issue_token("acme", who.user_id)
    status, first = http_get(f"http://{served}/sessions?limit=2", token)
    assert status == 200 and [s["id"] for s in first["sessions"]] == newest_first[:2]
    status, rest = http_get(f"http://{served}/sessions?limit=2&cursor="
                            f"{quote(first['nextCursor'])}", token)
    assert [s["id"] for s in rest["sessions"]] == newest_first[2:] and rest["nextCursor"] is None
    status, closed = http_get(f"http://{served}/sessions?status=CLOSED", token)
    assert [s["id"] for s in closed["sessions"]] == [newest_first[0], newest_first[2]]


def test_the_welcome_counts_each_status_up_to_the_cap(emb, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(service, "COUNT_CAP", 3)
    who = _new_user(emb)
    _seed(emb, who, *[SessionStatus.CLOSED] * 5, SessionStatus.OPEN, SessionStatus.SUSPENDED)
    client = Client(emb, who)
    try:
        welcome = wait_for(lambda: client.sock.frames("welcome"))[0]["data"]
        assert welcome["sessions"] == {"OPEN": 1, "SUSPENDED": 1, "CLOSED": 3}
    finally:
        client.close()
