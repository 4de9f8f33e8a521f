"""Steps the browser tests share."""

from __future__ import annotations


def create_session(page, title: str, autonomous: bool = False) -> None:  # type: ignore[no-untyped-def]
    """Create a session through the *New session* dialog (an empty title: untitled)."""
    page.get_by_role("button", name="New session").click()
    page.get_by_label("Title").fill(title)
    if autonomous:
        page.get_by_text("Autonomous", exact=True).click()
    page.get_by_role("button", name="Create").click()
