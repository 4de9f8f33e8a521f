"""What processes write reaches the user as a person reads it (issue 27 item 8): a worker
that reports JSON (a marvin step's ``{summary, result, needsPlanning, followUps}``) shows
its summary and readable details, never braces; and a worker's goal is labelled as given by
the process that started it, not as the user's words. (The Inbox answers, in the chat and
on the item: test_inbox.py.)"""

from __future__ import annotations

from tests.web.ui import create_session


def _new_process(page, recipe: str, goal: str, name: str, params: str = "") -> None:  # type: ignore[no-untyped-def]
    """*New process* from an autonomous session's empty chat pane; it is focused."""
    page.get_by_test_id("transcript").get_by_role("button", name="New process").click()
    dialog = page.get_by_role("dialog", name="New process")
    dialog.get_by_label("Recipe or engine").click()
    page.get_by_role("option", name=recipe, exact=True).first.click()
    dialog.get_by_label("Goal").fill(goal)
    dialog.get_by_label("Name").fill(name)
    if params:
        dialog.get_by_label("Params").fill(params)
    dialog.get_by_role("button", name="Start").click()
    page.get_by_test_id("focused").get_by_role("heading", name=name).wait_for()


def test_a_json_report_reads_as_text_and_a_goal_names_who_gave_it(server, page, shoot):
    page.goto(server.sign_in_url)
    create_session(page, "readable", autonomous=True)
    transcript = page.get_by_test_id("transcript")

    # A marvin step, started by hand: its goal is the user's, its reply a JSON report.
    _new_process(page, "marvin-worker", "Gather the facts about green tea", "tea-step")
    report = transcript.locator("[data-role=assistant]").get_by_test_id("report")
    report.get_by_text("Demo result for “Gather the facts about green tea”").wait_for()
    goal = transcript.locator("[data-role=user]")
    assert goal.inner_text().split("\n")[0] == "You"
    assert goal.get_attribute("data-from") == "user"
    text = report.inner_text()
    assert "{" not in text and "needsPlanning" not in text and '"summary"' not in text, text
    report.get_by_role("button", name="Details").click()
    details = report.get_by_text("Step:", exact=True)
    details.wait_for()
    assert [line for line in report.inner_text().split("\n") if line.strip()][-3:] == [
        "Result:", "Step: Gather the facts about green tea", "Demo: yes"]
    shoot(page, "worker-json-report")

    # A council head's goal came from its council: named so, apart from the user's lines.
    page.get_by_test_id("focused").get_by_role("button", name="Close").click()
    _new_process(page, "zaphod", "Tea or coffee at the launch?", "tea-council",
                 '{"heads": [{"name": "tea", "persona": "a tea lover"},'
                 ' {"name": "coffee", "persona": "a coffee lover"}]}')
    page.locator("[data-testid=council][data-phase=done]").wait_for()
    head = page.get_by_test_id("council-head").filter(has_text="tea").first
    name = head.inner_text().split(":")[0]
    head.click()
    page.get_by_test_id("focused").get_by_role("heading", name=name).wait_for()
    given = transcript.locator("[data-role=user][data-from=process]")
    given.get_by_text("Goal from tea-council").wait_for()
    assert "Tea or coffee at the launch?" in given.inner_text()
    assert transcript.locator("[data-role=user][data-from=user]").count() == 0
    shoot(page, "worker-goal-from-parent")
