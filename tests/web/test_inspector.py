"""The inspector panel in headless Chromium against a real ``vancetope serve`` with the demo
model (conftest.py): Arthur delegates a piece of work; *Inspect* on the line that turn wrote
opens the turn — the system prompt and the user's message the model was given, the tools
offered, its ``process_create`` call and the tool step with its result; *All turns* lists the
process's turns, and *Turns* over the chat opens the same list. Screenshots at desktop and
phone sizes, and no accessibility violation in the open panel."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from playwright.sync_api import expect

from tests.helpers import wait_for
from tests.web.ui import create_session

ASKED = "Please analyze the quarterly numbers"
PANEL = "[data-testid=inspector]"


def _delegate(page, server, *, phone: bool = False) -> None:  # type: ignore[no-untyped-def]
    page.goto(server.sign_in_url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    if phone:  # the sessions are in the burger menu
        page.get_by_role("button", name="Sessions").click()
    create_session(page, "Inspector")
    page.get_by_label("Message to Arthur").fill(ASKED)
    page.keyboard.press("Enter")
    page.locator("[data-role=assistant]").filter(has_text="I started a worker").wait_for()
    # A worker writes a turn's record after publishing its events: wait for every record.
    wait_for(lambda: _unrecorded(server.data_dir) == 0, what="the turns' inspector records")


def _unrecorded(data_dir: Path) -> int:
    """Committed turns of the server's store without their inspector record yet."""
    db = sqlite3.connect(f"{(data_dir / 'vancetope.db').as_uri()}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM turns WHERE id NOT IN "
                          "(SELECT id FROM turn_inspections)").fetchone()[0]
    finally:
        db.close()


def _check_turn(page) -> None:  # type: ignore[no-untyped-def]
    turn = page.locator(f"{PANEL} [data-testid=turn]")
    turn.wait_for()
    messages = turn.locator("[data-role=model-step]").first.locator(
        "[data-role=inspected-message]")
    expect(messages.first).to_have_attribute("data-message-role", "system")
    expect(messages.first).to_contain_text("Arthur")
    expect(messages.filter(has_text=ASKED).first).to_have_attribute("data-message-role", "user")
    model = turn.locator("[data-role=model-step]").first
    expect(model).to_contain_text("Tools offered: ")
    expect(model).to_contain_text("→ process_create(")
    tool = turn.locator("[data-role=tool-step]").filter(has_text="process_create")
    expect(tool).to_contain_text("SUCCESS")
    expect(tool).to_contain_text('"recipe": "analyze"')
    expect(tool).to_contain_text("proc_")  # the worker it started


def test_a_chat_line_opens_the_turn_that_wrote_it(page, server, shoot, axe_violations):  # type: ignore[no-untyped-def]
    _delegate(page, server)
    line = page.locator("[data-role=assistant]").filter(has_text="I started a worker")
    line.get_by_role("button", name="Inspect the turn that wrote this line").click()
    _check_turn(page)
    shoot(page, "inspector-turn-desktop")
    assert axe_violations(page.locator(PANEL)) == []
    page.get_by_role("button", name="← All turns").click()
    rows = page.locator(f"{PANEL} [data-testid=turn-list] tbody tr")
    expect(rows.first).to_be_visible()
    assert rows.count() >= 2  # the start and the delegating turn, at least
    shoot(page, "inspector-turns-desktop")
    page.keyboard.press("Escape")
    expect(page.locator(PANEL).locator("[data-testid=turn]")).to_have_count(0)
    # *Turns* over the chat opens the same list; a row opens its turn.
    page.get_by_test_id("open-turns").click()
    rows.first.wait_for()
    rows.filter(has_text="steer").first.click()
    page.locator(f"{PANEL} [data-testid=turn]").wait_for()


def test_the_panel_on_a_phone(browser, server, shoot):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 390, "height": 844},
                                  reduced_motion="reduce")
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        _delegate(page, server, phone=True)
        line = page.locator("[data-role=assistant]").filter(has_text="I started a worker")
        line.get_by_role("button", name="Inspect the turn that wrote this line").click()
        _check_turn(page)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways: {width}px"
        shoot(page, "inspector-turn-phone")
    finally:
        context.close()
