"""Searching one's own conversations from the session list (issue 29 item 7): two sessions,
a search, the hit's snippet with the word marked (the conversation's text shown as text),
and a click that opens the session at the line, scrolled to and marked; on a phone too."""

from __future__ import annotations

import uuid

from tests.helpers import wait_for
from tests.web.ui import create_session

MARKUP = "<b>bold</b> <img src=x onerror=alert(1)>"


def _say(page, text: str) -> None:  # type: ignore[no-untyped-def]
    page.get_by_label("Message to Arthur").fill(text)
    page.keyboard.press("Enter")
    page.get_by_test_id("transcript").locator("[data-role=user]").filter(
        has_text=text[:60]).wait_for()
    page.get_by_label("Message to Arthur").wait_for()


def _answers(page) -> int:  # type: ignore[no-untyped-def]
    return page.get_by_test_id("transcript").locator("[data-role=assistant]").count()


def _in_view(page, locator) -> bool:  # type: ignore[no-untyped-def]
    box, height = locator.bounding_box(), page.viewport_size["height"]
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height


def test_a_search_finds_a_line_and_opens_its_session_there(server, page, shoot,
                                                          axe_violations):
    word = f"kohlrabi{uuid.uuid4().hex[:6]}"
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server.sign_in_url)
    transcript = page.get_by_test_id("transcript")
    create_session(page, "Garden plans")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()
    _say(page, f"Does {word} need much sun? {MARKUP}")
    for n in range(8):  # lines after it, so the line found is scrolled out of view
        before = _answers(page)
        _say(page, f"Another question about the garden, number {n}, with a long tail "
                   "of words so that each line takes up some room on the screen.")
        transcript.locator("[data-role=assistant]").nth(before).wait_for()
    create_session(page, "Other things")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()
    _say(page, "nothing about vegetables here")

    page.get_by_label("Search your conversations").fill(f"SUN {word}")
    results = page.get_by_role("navigation", name="Search results")
    hit = results.locator("[data-testid=search-hit][data-where=user]")
    hit.wait_for()
    assert results.get_by_test_id("search-hit").filter(has_text="Other things").count() == 0
    assert [m.inner_text() for m in hit.locator("mark").all()] == [word, "sun"]
    assert MARKUP in hit.inner_text()  # the text itself, not an element made of it
    assert results.locator("b, img").count() == 0
    assert not axe_violations(page)
    shoot(page, "session-search-desktop-results")

    hit.click()
    found = transcript.locator("[data-found]")
    found.wait_for()
    assert word in found.inner_text() and MARKUP in found.inner_text()
    assert found.locator("b, img").count() == 0  # the user line: text
    wait_for(lambda: _in_view(page, found), what="the line found in view")
    assert not _in_view(page, transcript.locator("[data-role=assistant]").last)
    shoot(page, "session-search-desktop-opened")

    page.get_by_label("Search your conversations").fill("")  # the list is back
    page.get_by_role("navigation", name="Sessions").get_by_role(
        "button", name="Other things").wait_for()


def test_on_a_phone_the_search_opens_the_session_at_the_line(server, browser, shoot):
    word = f"parsnip{uuid.uuid4().hex[:6]}"
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True, reduced_motion="reduce")
    try:
        page = context.new_page()
        page.goto(server.sign_in_url)
        page.get_by_role("button", name="Sessions").click()  # the burger menu
        create_session(page, "Phone garden")
        page.get_by_text("Hi, I'm Arthur").wait_for()
        _say(page, f"Where should the {word} go? " + "Somewhere sunny and quiet. " * 8)
        page.get_by_role("button", name="Sessions").click()
        page.get_by_label("Search your conversations").fill(word)
        hit = page.locator("[data-testid=search-hit][data-where=user]")
        hit.wait_for()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        shoot(page, "session-search-phone-results")
        hit.click()
        found = page.get_by_test_id("transcript").locator("[data-found]")
        found.wait_for()
        assert word in found.inner_text()
        box = page.get_by_label("Search your conversations").bounding_box
        wait_for(lambda: (b := box()) is not None and b["x"] + b["width"] <= 0,
                 what="the menu folded away")
        wait_for(lambda: _in_view(page, found), what="the line found in view")
        shoot(page, "session-search-phone-opened")
    finally:
        context.close()
