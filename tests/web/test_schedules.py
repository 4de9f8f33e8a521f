"""The Schedules tab (issue 33 part 1): a user creates a schedule in the browser; the
embedded server's worker runs it (a tick every 2 s here: this server's minimum interval is
1 s, production's a minute), and the tab shows it with its next run and its last run's
outcome; its runs open to the run's report. On a desktop and on a phone."""

from __future__ import annotations

import re
import time

import pytest

from tests.web.conftest import serve


@pytest.fixture(scope="module")
def ticking(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with serve(tmp_path_factory.mktemp("web-schedules"),
               VANCETOPE_SCHEDULE_MIN_INTERVAL="1") as served:
        yield served


def _refreshed_until(page, shown, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Click *Refresh* until ``shown()`` (the tab reads the list when opened and refreshed)."""
    deadline = time.monotonic() + timeout
    while not shown():
        assert time.monotonic() < deadline, "the Schedules tab never showed it"
        page.get_by_role("button", name="Refresh").click()
        page.wait_for_timeout(300)


def test_the_schedules_tab_shows_a_schedule_and_its_last_run(
        ticking, page, browser, shoot, axe_violations):
    page.goto(ticking.sign_in_url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    page.get_by_role("tab", name="Schedules").click()
    page.get_by_text("No schedules yet.").wait_for()

    page.get_by_label("Name").fill("Morning <b>brief</b>")
    page.get_by_label("Cron expression").fill("daily")
    page.get_by_label("Time zone").fill("UTC")
    page.get_by_label("Recipe").fill("ford")
    page.get_by_label("Goal").fill("Say what changed overnight")
    page.get_by_role("button", name="Create schedule").click()
    page.get_by_text("no cron expression").wait_for()  # refused as the server words it
    page.get_by_label("Cron expression").fill("* * * * * */2")
    page.get_by_role("button", name="Create schedule").click()

    card = page.get_by_test_id("schedule")
    card.get_by_text("Morning <b>brief</b>").wait_for()  # a name is text, never markup
    _refreshed_until(page, lambda: "none yet" not in card.inner_text())  # a tick ran
    card.get_by_role("button", name="Pause").click()
    card.get_by_text("paused").wait_for()
    # The last run (the latest tick's) ends: its outcome shows.
    _refreshed_until(page, lambda: card.get_by_test_id("last-run").get_by_text("DONE")
                     .is_visible())
    assert "Next run: —" in card.inner_text()
    card.get_by_role("button", name="Run now").click()  # paused, it still runs once now
    _refreshed_until(page, lambda: card.get_by_test_id("last-run").get_by_text("DONE")
                     .is_visible())
    card.get_by_role("button", name="Runs").click()
    runs = page.get_by_test_id("schedule-runs")
    runs.get_by_text("DONE").first.wait_for()
    runs.get_by_role("button", name="Open").first.click()
    report = page.get_by_test_id("run-report")
    report.get_by_text(re.compile(r"\w")).last.wait_for()
    assert re.search(r"Process proc_s\w+ · session ses_s\w+", report.inner_text())
    shoot(page, "schedules-runs-desktop")
    page.keyboard.press("Escape")
    assert not axe_violations(page)
    shoot(page, "schedules-desktop")

    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                has_touch=True, reduced_motion="reduce")
    try:
        small = phone.new_page()
        small.goto(ticking.sign_in_url)
        small.get_by_test_id("connection").get_by_text("connected").wait_for()
        small.get_by_role("tab", name="Schedules").click()
        small.get_by_test_id("schedule").get_by_test_id("last-run").get_by_text("DONE").wait_for()
        assert small.evaluate("document.documentElement.scrollWidth") <= 390
        assert not axe_violations(small)
        shoot(small, "schedules-phone")
    finally:
        phone.close()
