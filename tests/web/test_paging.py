"""Paging in the web client against a real ``vancetope serve``: a chat longer than one
history page (200 lines) loads its earlier lines with ``beforeSeq`` keeping the scroll
position, and the Inbox list and the session list page with ``nextCursor``."""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import timedelta

from tests.web.ui import create_session
from vancetope_brain.models import Session, SessionStatus, new_id, utcnow
from vancetope_brain.store import SessionStore, open_store
from vancetope_gateway.chat_client import WebSocketClient

LINES = 210  # user lines: more than one page of 200 with Arthur's replies besides


def _tenant(server) -> str:  # type: ignore[no-untyped-def]
    return server.admin("tenant", "list").stdout.splitlines()[1].split()[0]


def _pager(server, user_id: str = "usr_pia", name: str = "Pia") -> str:  # type: ignore[no-untyped-def]
    """A token of a user of its own (Pia), so the many lines and items stay out of the
    local user's sessions and Inbox that the other tests count."""
    tenant = _tenant(server)
    user = server.admin("user", "create", "-q", "--tenant", tenant, "--id", user_id,
                        "--exist-ok", name).stdout.strip()
    return server.admin("token", "create", "-q", "--tenant", tenant, "--user", user) \
        .stdout.strip().splitlines()[-1]


class Wire:
    """A second client of the same user, over the socket (to fill a chat quickly)."""

    def __init__(self, url: str, token: str) -> None:
        self.ws = WebSocketClient.connect(url.replace("http://", "ws://") + f"/ws?token={token}")
        self.n = 0

    def ask(self, frame_type: str, **data):  # type: ignore[no-untyped-def]
        self.n += 1
        rid = f"r{self.n}"
        self.ws.send(json.dumps({"type": frame_type, "id": rid, "data": data}))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            raw = self.ws.receive(timeout=5)
            frame = json.loads(raw) if raw else {}
            if frame.get("replyTo") == rid:
                assert frame["type"] == frame_type, frame
                return frame["data"]
        raise AssertionError(f"no reply to {frame_type}")

    def close(self) -> None:
        self.ws.close()


def test_a_long_chat_loads_earlier_lines_and_keeps_the_scroll_position(server, page, shoot):
    token = _pager(server)
    wire = Wire(server.url, token)
    try:
        bound = wire.ask("session-create", title="long chat", onDisconnect="KEEP_OPEN")
        chat = bound["chatProcessId"]
        for i in range(1, LINES + 1):
            wire.ask("process-steer", targetThinkProcessId=chat, content=f"line {i:03d}",
                     idempotencyKey=str(uuid.uuid4()))
        deadline = time.monotonic() + 120
        while True:  # until Arthur has answered the last line
            newest = wire.ask("chat-history", processId=chat, limit=5)["messages"]
            said = [m["content"] for m in newest]
            if any(f"line {LINES:03d}" in c for c in said) and newest[-1]["role"] == "assistant":
                break
            assert time.monotonic() < deadline, said
            time.sleep(0.5)
    finally:
        wire.close()

    page.goto(f"{server.url}/#token={token}")
    page.get_by_role("button", name="long chat").first.click()
    transcript = page.get_by_test_id("transcript")
    transcript.locator("[data-role=user]").filter(has_text=f"line {LINES:03d}").wait_for()
    assert transcript.locator("[data-role]").count() == 200  # one page
    assert transcript.get_by_text("line 001", exact=True).count() == 0
    earlier = page.get_by_role("button", name="Load earlier")
    earlier.scroll_into_view_if_needed()
    # The line at the top of the view now, and where it is.
    top_line = transcript.locator("[data-role]").first
    top_line.evaluate("(line) => line.setAttribute('data-marked', '')")
    before = top_line.bounding_box()["y"]
    earlier.click()
    transcript.get_by_text("line 001", exact=True).wait_for(state="attached")
    assert transcript.locator("[data-role]").count() > 200
    same = transcript.locator("[data-marked]")  # the same element, still in view
    assert transcript.locator("[data-role]").first.get_attribute("data-marked") is None
    assert abs(same.bounding_box()["y"] - before) < 4, (before, same.bounding_box())
    # The first page reached the start: nothing earlier to load.
    lines = transcript.locator("[data-role=user]").all_inner_texts()
    assert "line 001" in lines[0], lines[:3]
    assert page.get_by_role("button", name="Load earlier").count() == 0
    shoot(page, "chat-loaded-earlier")


def test_the_inbox_list_loads_more_with_the_next_cursor_and_filters_on_the_server(
        server, page, shoot):
    page.goto(f"{server.url}/#token={_pager(server)}")
    create_session(page, "many items")
    page.get_by_text("Hi, I'm Arthur").wait_for()
    transcript = page.get_by_test_id("transcript")
    for n in range(1, 8):  # 7 × 8 items: more than a page of 50
        page.get_by_label("Message to Arthur").fill("show me every kind of inbox item")
        page.keyboard.press("Enter")
        transcript.locator("[data-role=assistant]").filter(has_text="I put 8 items into your Inbox") \
            .nth(n - 1).wait_for(timeout=60_000)  # eight posts a turn: slow on a loaded box
    page.reload()  # the pushes of this page had loaded every item: start from none
    page.get_by_role("tab", name="Inbox").click()
    rows = page.get_by_test_id("inbox-row")
    more = page.get_by_role("button", name="Load more")
    more.wait_for()
    assert rows.count() == 50  # the newest page of the PENDING ones
    # The counts are the server's, not the loaded page's; the first turn's CRITICAL item
    # (each turn posts one) is older than the page, and the filter finds it.
    assert page.get_by_text("pending (56)").count() == 1
    critical = rows.filter(has_text="CRITICAL")
    assert critical.count() == 6
    page.get_by_text("critical (7)").click()
    page.wait_for_function("() => document.querySelectorAll('[data-testid=inbox-row]')"
                           ".length === 7")
    assert critical.count() == 7
    assert page.get_by_role("button", name="Load more").count() == 0  # all on one page
    shoot(page, "inbox-filtered-on-the-server")
    page.get_by_text("critical (7)").click()
    page.locator("label").filter(has_text=re.compile(r"^all$")).click()
    more.wait_for()
    first = rows.count()
    assert 50 <= first < 56  # one page (and any late push), not all
    while more.count():
        shown = rows.count()
        more.click()
        page.wait_for_function(f"() => document.querySelectorAll('[data-testid=inbox-row]')"
                               f".length > {shown}")
    ids = page.evaluate("() => [...document.querySelectorAll('[data-testid=inbox-row]')]"
                        ".map((r) => r.textContent)")
    assert len(ids) == 56  # Pia's items, each once
    shoot(page, "inbox-loaded-more")


def test_the_session_list_shows_every_open_session_and_closed_ones_a_page_at_a_time(
        server, page, shoot):
    """An open session older than 55 closed ones is listed first; the newest 50 closed
    follow and *Show more* loads the other 5."""
    token = _pager(server, "usr_sam", "Sam")
    tenant, start = _tenant(server), utcnow() - timedelta(days=1)
    store = open_store(f"sqlite:///{server.data_dir / 'vancetope.db'}")
    try:
        sessions = store.port(SessionStore)
        sessions.create_session(Session(id=new_id("ses"), tenant_id=tenant, user_id="usr_sam",
                                        title="still open", status=SessionStatus.SUSPENDED,
                                        created_at=start))
        for i in range(55):
            sessions.create_session(Session(
                id=new_id("ses"), tenant_id=tenant, user_id="usr_sam", title=f"closed {i:02d}",
                status=SessionStatus.CLOSED, created_at=start + timedelta(minutes=i + 1)))
    finally:
        store.close()

    page.goto(f"{server.url}/#token={token}")
    listed = page.get_by_role("navigation", name="Sessions")
    more = listed.get_by_role("button", name="Show more")
    more.wait_for()
    shown = [t.strip().splitlines()[0] for t in listed.get_by_role("button").all_inner_texts()]
    assert shown == ["still open", *(f"closed {i:02d}" for i in range(54, 4, -1)),
                     "Show more"], shown
    shoot(page.get_by_role("navigation", name="Sessions"), "session-list-show-more")
    more.click()
    listed.get_by_role("button", name="closed 00").wait_for()
    assert more.count() == 0
    assert listed.get_by_role("button", name=re.compile(r"^closed \d\d")).count() == 55
