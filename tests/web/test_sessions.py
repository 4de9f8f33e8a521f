"""Sessions in the web client: create (interactive and autonomous; one with the keyboard
only), switch with the history reloaded, suspend and resume, close."""

from __future__ import annotations

from tests.web.ui import create_session


def _tab_to(page, name: str) -> None:  # type: ignore[no-untyped-def]
    """Press Tab until the focused element's accessible text is ``name``."""
    for _ in range(30):
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


def test_a_session_needs_no_title(server, page):
    page.goto(server.sign_in_url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    create_session(page, "")
    page.get_by_test_id("transcript").get_by_text("Hi, I'm Arthur").wait_for()
    # Listed by its id, as the client shows a session without a title.
    page.get_by_role("navigation", name="Sessions").get_by_role(
        "button", name="ses_").first.wait_for()
