"""A phone-sized screen: the sessions fold into the menu, chat and workers are tabs (the
Chat tab counts Arthur's lines while it is out of sight); a worker opened from its tab is
shown in the chat tab, its tree's long goals ending in an ellipsis; "New process" starts
marvin with a workflow template. Everything within reach: the empty chat's buttons, the
whole connection status, the menu button under a toast, an Inbox item on screen."""

from __future__ import annotations

import re
import threading

from tests.web.ui import ask_from_another_tab, create_session


def test_a_phone_sized_screen_has_the_chat_and_the_workers_as_tabs(server, browser, shoot):
    context = browser.new_context(viewport={"width": 390, "height": 800}, is_mobile=True,
                                  has_touch=True)
    try:
        page = context.new_page()
        page.goto(server.sign_in_url)
        page.get_by_role("button", name="Sessions").click()  # the burger menu
        create_session(page, "phone layout")
        page.get_by_text("Hi, I'm Arthur").wait_for()  # the menu folded away
        page.get_by_label("Message to Arthur").fill("please research tea")
        page.get_by_role("button", name="Send").click()
        page.locator("[data-role=assistant]").filter(has_text="I started a worker").wait_for()
        page.locator("[data-role=assistant]").filter(
            has_text="The worker demo-research is done").wait_for()
        # Arthur answers the user's other tab while the Workers tab is shown: counted.
        page.get_by_role("tab", name="Workers").click()
        page.locator("[data-testid=worker-card][data-status=CLOSED]").first.wait_for()
        ask_from_another_tab(browser, server, "phone layout", "hello from the other tab")
        chat_tab = page.get_by_role("tab", name="Chat")
        chat_tab.get_by_test_id("chat-unread").wait_for()
        assert int(chat_tab.get_by_test_id("chat-unread").inner_text()) >= 1
        shoot(page, "phone-workers")
        chat_tab.click()
        page.locator("[data-role=assistant]").filter(has_text="hello from the other tab").wait_for()
        assert chat_tab.get_by_test_id("chat-unread").count() == 0  # read now
        assert page.get_by_role("button", name="Send").is_visible()
        shoot(page, "phone-chat")
        page.get_by_role("tab", name="Workers").click()
        # Opening a worker goes to the chat tab, showing its tree and addressing it.
        page.get_by_role("button", name="open demo-research", exact=True).click()
        page.get_by_test_id("task-tree").wait_for()
        assert page.get_by_role("tab", name="Chat").get_attribute("aria-selected") == "true"
        assert page.get_by_label("Message to demo-research").is_visible()
        assert page.get_by_role("button", name="Send").is_visible()
        shoot(page, "phone-worker-focused")
        page.get_by_role("button", name="Back to Arthur").click()
        page.get_by_label("Message to Arthur").wait_for()

        # marvin with a workflow template: its steps' goals, long ones cut with an ellipsis.
        page.get_by_role("tab", name="Workers").click()
        page.get_by_role("button", name="New process").click()
        dialog = page.get_by_role("dialog", name="New process")
        dialog.get_by_label("Recipe or engine").click()
        page.get_by_role("option", name="marvin", exact=True).first.click()
        dialog.get_by_label("Workflow template").click()
        page.get_by_role("option", name="research-brief", exact=True).click()
        dialog.get_by_label("Goal").fill("the history of tea ceremonies across East Asia, "
                                         "from the Tang dynasty to the present day")
        dialog.get_by_label("Name").fill("tea-ceremonies-of-east-asia-brief")
        dialog.get_by_role("button", name="Start").click()
        tree = page.get_by_test_id("task-tree")
        node = tree.get_by_text("Background and key concepts of: the history of tea",
                                exact=False).first
        node.wait_for()  # the template's first step, not a tree marvin planned
        cut = node.evaluate("(e) => [e.scrollWidth > e.clientWidth, "
                            "getComputedStyle(e).textOverflow, e.getBoundingClientRect().right]")
        assert cut[0] and cut[1] == "ellipsis" and cut[2] <= 390, cut
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scroll
        # A longer name leaves the status and the way back whole, not "RUNN…", "Back to Arthu".
        header = page.get_by_test_id("focused")
        assert not _cut(header.locator(".mantine-Badge-root").first)
        assert header.get_by_role("button", name="Back to Arthur").evaluate(
            "(e) => { const l = e.querySelector('.mantine-Button-label'); return l.scrollWidth"
            " <= l.clientWidth && e.getBoundingClientRect().right <= innerWidth; }")
        shoot(page, "phone-tree-ellipsis")
    finally:
        context.close()


def _covers(page, target) -> bool:  # type: ignore[no-untyped-def]
    """Whether something else is drawn over the middle of ``target`` (a tap would hit it)."""
    return target.evaluate("""(e) => {
        const r = e.getBoundingClientRect();
        const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
        return !e.contains(hit);
    }""")


def _in_view(target) -> bool:  # type: ignore[no-untyped-def]
    return target.evaluate("(e) => { const r = e.getBoundingClientRect(); return r.top >= 0"
                           " && r.bottom <= innerHeight && r.right <= innerWidth; }")


def _cut(badge) -> bool:  # type: ignore[no-untyped-def]
    return badge.evaluate("(e) => { const l = e.querySelector('.mantine-Badge-label');"
                          " return l.scrollWidth > l.clientWidth || e.getBoundingClientRect().right"
                          " > innerWidth; }")


def _phone_user(server) -> str:  # type: ignore[no-untyped-def]
    """A token of a user of its own (Pho): the eight items stay out of the local user's
    Inbox that the other tests count, and the session list starts empty."""
    tenant = server.admin("tenant", "list").stdout.splitlines()[1].split()[0]
    user = server.admin("user", "create", "-q", "--tenant", tenant, "--id", "usr_pho",
                        "--exist-ok", "Pho").stdout.strip()
    return server.admin("token", "create", "-q", "--tenant", tenant, "--user", user) \
        .stdout.strip().splitlines()[-1]


def test_on_a_phone_the_empty_chat_status_toasts_and_inbox_items_are_within_reach(
        server, browser, shoot, axe_violations):
    """390×844: the empty chat starts a session or opens the menu (the list it names is
    behind it), the connection status reads whole, a toast leaves the menu button free, and
    an Inbox item opens as its own view with a way back, not below the list, off screen."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True, reduced_motion="reduce")
    # Every socket of the tab passes here, so the test can cut it (``cut``: refuse new ones).
    cut = threading.Event()
    sockets: list[object] = []

    def route(ws) -> None:  # type: ignore[no-untyped-def]
        if cut.is_set():
            ws.close(code=1011, reason="the test keeps this tab away")
            return
        ws.connect_to_server()
        sockets.append(ws)

    try:
        page = context.new_page()
        page.route_web_socket(re.compile(r"/ws$"), route)
        page.goto(f"{server.url}/#token={_phone_user(server)}")
        badge = page.get_by_test_id("connection")
        badge.get_by_text("connected").wait_for()
        assert not _cut(badge), badge.inner_text()
        empty = page.get_by_test_id("no-session")
        start = empty.get_by_role("button", name="Start a session")
        assert _in_view(start)
        start.click()
        page.get_by_label("Title").fill("phone reach")
        page.get_by_role("button", name="Create").click()
        page.get_by_text("Hi, I'm Arthur").wait_for()

        # A new Inbox item's toast: the menu button stays free to tap.
        page.get_by_label("Message to Arthur").fill("show me every kind of inbox item")
        page.get_by_role("button", name="Send").click()
        toast = page.locator(".mantine-Notification-root").filter(has_text="in your Inbox")
        toast.first.wait_for()
        menu = page.get_by_role("button", name="Sessions")
        assert not _covers(page, menu), "a toast covers the menu button"
        shoot(page, "phone-toast")
        page.locator("[data-role=assistant]").filter(has_text="I put 8 items into your Inbox") \
            .wait_for()

        # Back with no session bound (a reload): the empty chat opens the menu's list.
        page.reload()
        empty.wait_for()
        page.locator(".mantine-Notification-root").filter(has_text="pending").first.wait_for()
        assert not _covers(page, menu), "the pending toast covers the menu button"
        shoot(page, "phone-empty-chat")
        found = axe_violations(page)
        assert found == [], "\n".join(found)
        empty.get_by_role("button", name="Open a session").click()
        sessions = page.get_by_role("navigation", name="Sessions")
        sessions.get_by_role("button", name="phone reach").first.wait_for()
        assert _in_view(sessions.get_by_role("button", name="phone reach").first)
        sessions.get_by_role("button", name="phone reach").first.click()
        page.get_by_text("Hi, I'm Arthur").wait_for()

        # An Inbox item opens in place of the list, its answer buttons on screen.
        page.get_by_role("tab", name="Inbox").click()
        row = page.get_by_test_id("inbox-row").filter(has_text="Approve the demo deployment?")
        row.first.click()
        item = page.locator("[data-testid=inbox-item][data-type=APPROVAL]")
        item.wait_for()
        assert _in_view(item.get_by_role("button", name="Approve", exact=True)), \
            "the item is drawn off screen"
        assert not page.get_by_test_id("inbox-list").is_visible()
        shoot(page, "phone-inbox-item")
        page.get_by_role("button", name="Back to the Inbox").click()
        page.get_by_test_id("inbox-list").wait_for()
        assert item.count() == 0 or not item.is_visible()
        assert page.evaluate("document.activeElement.dataset.testid") == "inbox-row"

        # The longest status, "reconnecting", reads whole too.
        cut.set()
        for ws in sockets:
            ws.close(code=4000, reason="cut by the test")  # type: ignore[attr-defined]
        badge.get_by_text("reconnecting").wait_for()
        assert not _cut(badge), badge.inner_text()
        shoot(page, "phone-reconnecting")
    finally:
        context.close()
