"""The Usage tab (issue 32, part 3): the signed-in user's LLM tokens in the bound session
and this month, per model, with their cost once the tenant has a price table; on a desktop
and on a phone. The demo model reports no usage: its calls are counted from the text and
marked so."""

from __future__ import annotations

import json

from tests.web.ui import create_session


def _model_row(page, within: str):  # type: ignore[no-untyped-def]
    return page.get_by_test_id(within).locator("tbody tr")


def test_the_usage_tab_shows_this_session_and_this_month_per_model(
        server, page, browser, shoot, axe_violations):
    tenant = server.admin("tenant", "list").stdout.splitlines()[1].split()[0]
    page.goto(server.sign_in_url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    create_session(page, "Usage check")
    page.get_by_label("Message to Arthur").fill("How many tokens does this cost?")
    page.keyboard.press("Enter")
    # The reply (the first assistant line is Arthur's welcome, which no model wrote): its
    # turn committed its usage with it.
    page.get_by_test_id("transcript").locator("[data-role=assistant]").nth(1).wait_for()

    page.get_by_role("tab", name="Usage").click()
    session = page.get_by_test_id("usage-session")
    session.get_by_text("This session — Usage check").wait_for()
    _model_row(page, "usage-session").first.wait_for()
    row = _model_row(page, "usage-session").first.inner_text()
    assert "*" in row  # the demo model's calls are counted from the text
    assert "Cost" not in session.inner_text()  # no price table: no cost shown
    assert page.get_by_test_id("usage-month").get_by_text("This month").is_visible()

    model = row.split("\t")[0].strip()
    server.admin("setting", "set", "--tenant", tenant, "llm.prices",
                 json.dumps({model: {"in": 2.5, "out": 10}}))
    page.get_by_role("button", name="Refresh").click()
    session.get_by_text("Cost").first.wait_for()
    assert not axe_violations(page)
    shoot(page, "usage-desktop")

    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                has_touch=True, reduced_motion="reduce")
    try:
        small = phone.new_page()
        small.goto(server.sign_in_url)
        small.get_by_test_id("connection").get_by_text("connected").wait_for()
        small.get_by_role("tab", name="Usage").click()
        small.get_by_test_id("usage-month").locator("tbody tr").first.wait_for()
        assert small.evaluate("document.documentElement.scrollWidth") <= 390
        assert not axe_violations(small)
        shoot(small, "usage-phone")
    finally:
        phone.close()
