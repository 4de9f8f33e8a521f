"""Steps the browser tests share."""

from __future__ import annotations

import re


def create_session(page, title: str, autonomous: bool = False) -> None:  # type: ignore[no-untyped-def]
    """Create a session through the *New session* dialog (an empty title: untitled)."""
    page.get_by_role("button", name="New session").click()
    page.get_by_label("Title").fill(title)
    if autonomous:
        page.get_by_text("Autonomous", exact=True).click()
    page.get_by_role("button", name="Create").click()


def ask_from_another_tab(browser, server, session: str, text: str) -> None:  # type: ignore[no-untyped-def]
    """The same user, in a browser tab of their own, opens ``session`` and asks Arthur
    ``text``; returns once Arthur's answer is shown there."""
    other = browser.new_context()
    try:
        second = other.new_page()
        second.goto(server.sign_in_url)
        second.get_by_role("button", name=session).click()
        second.get_by_label("Message to Arthur").fill(text)
        second.keyboard.press("Enter")
        second.locator("[data-role=assistant]").filter(has_text=text).wait_for()
    finally:
        other.close()


def unfold(card) -> None:  # type: ignore[no-untyped-def]
    """Show a worker card whole: a finished one is folded to a line (its toggle opens it)."""
    toggle = card.get_by_role("button", name=re.compile("^details of "))
    if toggle.get_attribute("aria-expanded") == "false":
        toggle.click()
