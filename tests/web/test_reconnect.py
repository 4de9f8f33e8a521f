"""Reconnect without loss: the socket is cut in the middle of a streamed reply (Playwright
routes the page's WebSocket and closes it after the first token), the client reconnects,
resumes with its last seq, and its transcript ends identical to a tab that never dropped."""

from __future__ import annotations

import json
import re
import threading

from tests.web.ui import create_session, unfold

LINES = "[data-testid=transcript] > [data-role]"


class Relay:
    """Routes a page's ``/ws`` through the test (Playwright's WebSocket routing): every
    frame down passes ``watch`` (which may ``cut``) and on to the page; ``cut`` closes the
    tab's sockets and keeps new ones away until ``back``."""

    def __init__(self, page, watch=None) -> None:  # type: ignore[no-untyped-def]
        self.connections = 0
        self._open: list[tuple[object, object]] = []
        self.away = threading.Event()
        self._watch = watch or (lambda frame: None)
        page.route_web_socket(re.compile(r"/ws$"), self._route)

    def _route(self, ws) -> None:  # type: ignore[no-untyped-def]
        if self.away.is_set():
            ws.close(code=1011, reason="the test keeps this tab away")
            return
        upstream = ws.connect_to_server()
        self.connections += 1
        self._open.append((ws, upstream))

        def down(message) -> None:  # type: ignore[no-untyped-def]
            ws.send(message)
            self._watch(json.loads(message))

        ws.on_message(lambda message: upstream.send(message))
        upstream.on_message(down)

    def cut(self, keep_away: bool = True) -> None:
        if keep_away:
            self.away.set()
        cut, self._open = self._open, []
        for ws, upstream in cut:
            ws.close(code=4000, reason="cut by the test")
            upstream.close()

    def back(self) -> None:
        self.away.clear()


def test_a_socket_cut_mid_stream_loses_nothing(server, page, browser, shoot):
    cut = threading.Event()
    cut_armed = threading.Event()

    def watch(frame: dict) -> None:
        if (cut_armed.is_set() and not cut.is_set() and frame["type"] == "event"
                and frame["data"]["type"] == "token"):
            cut.set()
            relay.cut(keep_away=False)

    relay = Relay(page, watch)
    page.goto(server.sign_in_url)
    create_session(page, "reconnect")
    page.get_by_text("Hi, I'm Arthur").wait_for()

    cut_armed.set()
    page.get_by_label("Message to Arthur").fill("tell me something long")
    page.keyboard.press("Enter")
    page.locator("[data-role=assistant]").filter(has_text="You said").wait_for()
    assert cut.is_set() and relay.connections >= 2  # it was cut, and the client came back
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    page.get_by_label("Message to Arthur").fill("and one more")
    page.keyboard.press("Enter")
    page.locator("[data-role=assistant]").filter(has_text="and one more").wait_for()
    dropped = page.locator(LINES).all_inner_texts()

    other = browser.new_context()
    try:
        calm = other.new_page()
        calm.goto(server.sign_in_url)
        calm.get_by_role("button", name="reconnect").click()
        calm.locator("[data-role=assistant]").filter(has_text="and one more").wait_for()
        assert calm.locator(LINES).all_inner_texts() == dropped
    finally:
        other.close()
    assert [t.split("\n")[0] for t in dropped] == ["Arthur", "You", "Arthur", "You", "Arthur"]
    shoot(page, "chat-after-reconnect")


def test_a_tab_that_missed_trimmed_events_reloads_the_history(server, page, browser):
    """The log keeps 200 events (conftest); while this tab is away another tab of the user
    gets eight replies (well over 200 events, with the worker's token coalescing merging
    some of the demo's words), so the resume answers ``events-gap`` and the tab reloads the
    chat history — and ends in step with the other tab."""
    gaps: list[dict] = []
    relay = Relay(page, lambda frame: gaps.append(frame["data"])
                  if frame["type"] == "events-gap" else None)
    page.goto(server.sign_in_url)
    create_session(page, "gap")
    page.get_by_text("Hi, I'm Arthur").wait_for()

    other = browser.new_context()
    try:
        busy = other.new_page()
        busy.goto(server.sign_in_url)
        busy.get_by_role("button", name="gap").click()
        busy.get_by_text("Hi, I'm Arthur").wait_for()
        relay.cut()
        page.get_by_test_id("connection").get_by_text("reconnecting").wait_for()
        for n in range(8):
            busy.get_by_label("Message to Arthur").fill(f"message number {n}")
            busy.keyboard.press("Enter")
            busy.locator("[data-role=assistant]").filter(has_text=f"number {n}").wait_for()
        relay.back()
        page.locator("[data-role=assistant]").filter(has_text="number 7").wait_for()
        assert gaps and gaps[0]["firstAvailable"] > gaps[0]["requestedAfter"] + 1, gaps
        assert page.locator(LINES).all_inner_texts() == busy.locator(LINES).all_inner_texts()
    finally:
        other.close()


def test_a_session_closed_elsewhere_while_away_is_not_shown_as_live(server, page, browser):
    relay = Relay(page)
    page.goto(server.sign_in_url)
    create_session(page, "closed elsewhere")
    page.get_by_text("Hi, I'm Arthur").wait_for()
    relay.cut()  # away…
    other = browser.new_context()
    try:
        closer = other.new_page()  # …while another tab closes it
        closer.goto(server.sign_in_url)
        closer.get_by_role("button", name="closed elsewhere").click()
        closer.get_by_text("Hi, I'm Arthur").wait_for()
        closer.get_by_role("button", name="Close", exact=True).click()
        closer.get_by_role("button", name="closed elsewhere").get_by_text("CLOSED", exact=True).wait_for()
    finally:
        other.close()
    relay.back()
    page.get_by_text("Open a session on the left").wait_for()
    page.get_by_role("button", name="closed elsewhere").get_by_text("CLOSED", exact=True).wait_for()


def test_a_task_tree_drawn_before_a_gap_is_read_again_from_the_committed_state(
        server, page, browser, shoot):
    """This tab sees marvin's tree begin, is cut at its first ``task-node`` and kept away
    while the tree finishes and another tab trims the event log; back, it gets
    ``events-gap``, reads the processes again, and draws the finished tree — as the other
    tab does."""
    armed = threading.Event()
    gaps: list[dict] = []

    def watch(frame: dict) -> None:
        if frame["type"] == "events-gap":
            gaps.append(frame["data"])
        if armed.is_set() and not relay.away.is_set() and frame["type"] == "event" \
                and frame["data"]["type"] == "task-node":
            relay.cut()

    relay = Relay(page, watch)
    page.goto(server.sign_in_url)
    create_session(page, "tree gap")
    page.get_by_text("Hi, I'm Arthur").wait_for()
    card = '[data-testid=worker-card][aria-label="Worker demo-research"]'
    other = browser.new_context()
    try:
        busy = other.new_page()
        busy.goto(server.sign_in_url)
        busy.get_by_role("button", name="tree gap").click()
        busy.get_by_text("Hi, I'm Arthur").wait_for()
        armed.set()
        page.get_by_label("Message to Arthur").fill("please research the history of tea")
        page.keyboard.press("Enter")
        page.get_by_test_id("connection").get_by_text("reconnecting").wait_for()
        partial = page.locator(card).get_by_test_id("engine-summary").inner_text()
        assert not re.match(r"task tree: (\d+)/\1 ", partial), partial  # cut mid-tree
        busy.locator(f"{card}[data-status=CLOSED]").wait_for()
        for n in range(3):  # trim the log past this tab's position
            busy.get_by_label("Message to Arthur").fill(f"message number {n}")
            busy.keyboard.press("Enter")
            busy.locator("[data-role=assistant]").filter(has_text=f"number {n}").wait_for()
        relay.back()
        page.locator("[data-role=assistant]").filter(has_text="number 2").wait_for()
        assert gaps, "the tab was not told of the gap"
        page.locator(card).get_by_role("button", name="open demo-research").click()
        busy.locator(card).get_by_role("button", name="open demo-research").click()
        nodes = "[data-testid=task-node][data-kind=AGGREGATE][data-status=DONE]"
        page.locator(nodes).wait_for()
        busy.locator(nodes).wait_for()

        def tree(tab) -> list[tuple[str | None, str | None]]:  # type: ignore[no-untyped-def]
            return [(n.get_attribute("data-node"), n.get_attribute("data-status"))
                    for n in tab.get_by_test_id("task-node").all()]
        assert tree(page) == tree(busy) and {s for _, s in tree(page)} == {"DONE"}
        unfold(page.locator(card))
        unfold(busy.locator(card))
        assert page.locator(card).get_by_test_id("engine-summary").inner_text() == \
            busy.locator(card).get_by_test_id("engine-summary").inner_text()
        shoot(page, "task-tree-after-gap")
    finally:
        other.close()
