"""Sessions in the web client: create (interactive and autonomous; one with the keyboard
only), switch with the history reloaded, suspend and resume, close; titles from the first
message, renaming, and a session the terminal started continued here."""

from __future__ import annotations

import json
import re

from tests.web.ui import create_session
from vancetope_gateway.chat_client import ChatClient, fingerprint


def _tab_to(page, name: str) -> None:  # type: ignore[no-untyped-def]
    """Press Tab until the focused element's accessible text is ``name`` (40 stops: a welcome
    line has its suggestions and *Inspect*, the chat its *Turns* and *Summary*)."""
    for _ in range(40):
        page.keyboard.press("Tab")
        focused = page.evaluate("""() => { const e = document.activeElement;
            return (e.labels && e.labels[0] ? e.labels[0].textContent : e.textContent) || ""; }""")
        if focused.strip().startswith(name):
            return
    raise AssertionError(f"Tab never reached {name!r}")


def test_create_switch_suspend_resume_and_close_sessions(server, page, shoot):
    page.goto(server.sign_in_url)
    sessions = page.get_by_role("navigation", name="Sessions")
    transcript = page.get_by_test_id("transcript")

    # The first one with the keyboard only.
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    _tab_to(page, "New session")
    page.keyboard.press("Enter")
    page.get_by_label("Title").wait_for()  # the dialog opened with the title focused
    page.keyboard.type("first")
    page.keyboard.press("Enter")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()
    _tab_to(page, "Message to Arthur")
    page.keyboard.type("hello first")
    page.keyboard.press("Enter")
    transcript.locator("[data-role=assistant]").filter(has_text="hello first").wait_for()

    create_session(page, "second")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()
    assert transcript.get_by_text("hello first").count() == 0

    sessions.get_by_role("button", name="first").click()
    transcript.locator("[data-role=assistant]").filter(has_text="hello first").wait_for()
    page.get_by_role("button", name="Suspend", exact=True).click()
    page.get_by_text("Open a session on the left").wait_for()
    sessions.get_by_role("button", name="first").get_by_text("SUSPENDED").wait_for()

    sessions.get_by_role("button", name="first").click()  # resumes it
    sessions.get_by_role("button", name="first").get_by_text("OPEN").wait_for()
    transcript.locator("[data-role=assistant]").filter(has_text="hello first").wait_for()
    page.get_by_role("button", name="Close", exact=True).click()
    closed = sessions.get_by_role("button", name="first")
    closed.get_by_text("CLOSED").wait_for()
    assert closed.get_attribute("aria-disabled") == "true"

    create_session(page, "robots", autonomous=True)
    page.get_by_text("An autonomous session has no chat").wait_for()
    assert page.get_by_label("Message to Arthur").count() == 0
    sessions.get_by_role("button", name="robots").get_by_text("OPEN").wait_for()
    page.get_by_role("dialog").wait_for(state="detached")  # its closing animation ended
    shoot(page, "sessions")


def test_a_session_needs_no_title_and_takes_one_from_its_first_message(server, page):
    page.goto(server.sign_in_url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    create_session(page, "")
    page.get_by_test_id("transcript").get_by_text("Hi, I'm Arthur").wait_for()
    sessions = page.get_by_role("navigation", name="Sessions")
    current = sessions.locator("[data-active]")
    current.get_by_text("Untitled session").wait_for()
    page.get_by_label("Message to Arthur").fill(
        "Could you compare   green, black and oolong tea\nfor caffeine and taste?")
    page.keyboard.press("Enter")
    # Titled by the server from the first message: one line, cut at a word, an ellipsis.
    current.get_by_text("Could you compare green, black and oolong tea for caffeine…",
                        exact=True).wait_for()


def test_a_terminal_session_opens_in_the_browser_and_is_renamed(server, page, shoot):
    """The quick start's order, terminal first: the browser (no fingerprint, no client
    tools) continues the terminal's session, titled from its first message; renamed here,
    the title is the server's, for the terminal too."""
    ws_url = server.url.replace("http://", "ws://") + "/ws"
    terminal = ChatClient(ws_url, server.token)
    try:
        created = terminal.request("session-create", fingerprint=fingerprint())
        sid, chat = created["session"]["id"], created["chatProcessId"]
        terminal.request("process-steer", targetThinkProcessId=chat,
                         content="Which tea goes with breakfast?")
    finally:
        terminal.close()  # the session is suspended (onDisconnect SUSPEND)

    page.goto(server.sign_in_url)
    sessions = page.get_by_role("navigation", name="Sessions")
    listed = sessions.get_by_role("button", name="Which tea goes with breakfast?")
    listed.get_by_text("SUSPENDED").wait_for()
    listed.click()  # resumes it: no fingerprint_mismatch
    transcript = page.get_by_test_id("transcript")
    transcript.locator("[data-role=user]").filter(
        has_text="Which tea goes with breakfast?").wait_for()
    transcript.locator("[data-role=assistant]").filter(
        has_text="Which tea goes with breakfast?").wait_for()
    listed.get_by_text("OPEN").wait_for()
    assert page.locator(".mantine-Notification-root").filter(has_text="fingerprint").count() == 0
    page.get_by_label("Message to Arthur").fill("and with lunch?")
    page.keyboard.press("Enter")
    transcript.locator("[data-role=assistant]").filter(has_text="and with lunch?").wait_for()

    page.get_by_role("button", name="Rename").click()
    dialog = page.get_by_role("dialog", name="Rename the session")
    title = dialog.get_by_label("Title")
    assert title.input_value() == "Which tea goes with breakfast?"
    title.fill("   ")
    assert dialog.get_by_role("button", name="Save").is_disabled()
    title.fill("Tea for  every meal")
    shoot(page, "session-rename")
    dialog.get_by_role("button", name="Save").click()
    dialog.wait_for(state="detached")
    sessions.get_by_role("button", name="Tea for every meal").get_by_text("OPEN").wait_for()
    page.reload()
    page.get_by_role("navigation", name="Sessions").get_by_role(
        "button", name="Tea for every meal").wait_for()

    back = ChatClient(ws_url, server.token)
    try:
        listing = back.request("session-list")["sessions"]
        assert next(s["title"] for s in listing if s["id"] == sid) == "Tea for every meal"
        # The terminal's machine still binds it, and only it offers client tools.
        back.request("session-resume", sessionId=sid, fingerprint=fingerprint())
    finally:
        back.close()


def test_a_refused_session_list_says_so_instead_of_no_sessions(server, page, shoot):
    """A server that refuses ``session-list`` (an older one during an upgrade, say) is not
    an empty list: the list says why it could not be loaded, and loads once it can."""
    refusing = {"on": True}

    def route(ws) -> None:  # type: ignore[no-untyped-def]
        upstream = ws.connect_to_server()

        def up(message) -> None:  # type: ignore[no-untyped-def]
            frame = json.loads(message)
            if frame["type"] == "session-list" and refusing["on"]:
                ws.send(json.dumps({"type": "error", "replyTo": frame["id"], "data": {
                    "code": "invalid_input", "message": "unknown field 'cursor'"}}))
                return
            upstream.send(message)

        ws.on_message(up)

    page.route_web_socket(re.compile(r"/ws$"), route)
    page.goto(server.sign_in_url)
    sessions = page.get_by_role("navigation", name="Sessions")
    alert = sessions.get_by_role("alert")
    alert.wait_for()
    assert "could not be loaded" in alert.inner_text() and "unknown field" in alert.inner_text()
    assert sessions.get_by_text("No sessions yet.").count() == 0
    shoot(page, "session-list-refused")
    refusing["on"] = False
    create_session(page, "after the refusal")  # a new session reloads the list
    sessions.get_by_role("button", name="after the refusal").wait_for()
    assert alert.count() == 0
