"""Workers in the web client, against a real ``vancetope serve`` with the demo model: focus a
worker to read its own chat and write to it (Arthur's new lines counted meanwhile), the
engine views drawn live (marvin's task tree, vogon's phases with a checkpoint linked to its
Inbox item, zaphod's heads and synthesis), and a process created by hand in an autonomous
session."""

from __future__ import annotations

import re

from tests.web.ui import ask_from_another_tab, create_session, unfold

WORKER = "[data-testid=worker-card]"


def _card(page, name: str):  # type: ignore[no-untyped-def]
    return page.locator(f'{WORKER}[aria-label="Worker {name}"]')


def test_focus_a_marvin_worker_its_tree_grows_live_and_arthur_counts_new_lines(
        server, page, browser, shoot, axe_violations):
    page.goto(server.sign_in_url)
    create_session(page, "focus marvin")
    transcript = page.get_by_test_id("transcript")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()
    # Every summary of the tree the card shows, to see the tree grow rather than appear whole.
    page.evaluate("""() => {
        window.__trees = [];
        new MutationObserver(() => {
            for (const e of document.querySelectorAll('[data-testid=engine-summary]')) {
                const t = e.textContent;
                if (t.startsWith('task tree') && !window.__trees.includes(t)) window.__trees.push(t);
            }
        }).observe(document.body, {subtree: true, childList: true, characterData: true});
    }""")
    page.get_by_label("Message to Arthur").fill("please research the history of tea")
    page.keyboard.press("Enter")
    card = _card(page, "demo-research")
    # Opened by keyboard, as soon as Arthur started it.
    card.get_by_role("button", name="open demo-research").focus()
    page.keyboard.press("Enter")
    focused = page.get_by_test_id("focused")
    focused.get_by_role("heading", name="demo-research").wait_for()
    assert page.get_by_label("Message to demo-research").is_visible()
    assert card.get_attribute("data-focused") == "true"

    page.locator(f'{WORKER}[aria-label="Worker demo-research"][data-status=CLOSED]').wait_for()
    # Ended: it takes no more messages, and the composer says so.
    page.get_by_text("This process has ended").wait_for()
    assert page.get_by_label("Message to demo-research").is_disabled()
    tree = focused.get_by_test_id("task-tree")
    tree.locator("[data-testid=task-node][data-kind=AGGREGATE][data-status=DONE]").wait_for()
    kinds = {n.get_attribute("data-kind") for n in tree.get_by_test_id("task-node").all()}
    assert {"PLAN", "WORKER", "AGGREGATE"} <= kinds, kinds
    assert tree.get_by_role("tree").count() + tree.locator("[role=treeitem]").count() > 3
    grown = [re.match(r"task tree: (\d+)/(\d+)", t).groups() for t in page.evaluate("window.__trees")]
    assert any(done < total for done, total in grown), grown  # drawn step by step
    unfold(card)  # finished: folded to a line
    summary = card.get_by_test_id("engine-summary").inner_text()
    assert re.match(r"task tree: (\d+)/\1 steps done", summary), summary
    # The worker's own chat, not Arthur's: its lines, under its name.
    assert transcript.get_attribute("data-process-id") == card.get_attribute("data-process-id")
    transcript.locator("[data-role=assistant]").first.wait_for()
    assert transcript.get_by_text("Hi, I'm Arthur").count() == 0
    assert transcript.locator("[data-role=assistant]").first.get_by_text("demo-research").count() == 1
    # Arthur goes on meanwhile — here answering the user's other tab: counted, not shown.
    ask_from_another_tab(browser, server, "focus marvin", "hello from the other tab")
    unread = focused.get_by_test_id("unread")
    unread.wait_for()
    assert int(unread.inner_text()) >= 1
    assert transcript.get_by_text("hello from the other tab").count() == 0
    shoot(page, "worker-focused-marvin-tree")
    found = axe_violations(page)
    assert found == [], "\n".join(found)

    # The tree's nodes close and open from the keyboard (Mantine's Tree).
    root = tree.locator("[role=treeitem]").first
    root.focus()
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("() => document.querySelector('[role=treeitem]')"
                           ".getAttribute('aria-expanded') === 'false'")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('[role=treeitem]')"
                           ".getAttribute('aria-expanded') === 'true'")

    back = focused.get_by_role("button", name=re.compile("Back to Arthur"))
    back.focus()
    page.keyboard.press("Enter")
    page.get_by_label("Message to Arthur").wait_for()
    assert page.get_by_test_id("focused").count() == 0
    transcript.locator("[data-role=assistant]").filter(has_text="is done").wait_for()
    transcript.locator("[data-role=assistant]").filter(has_text="hello from the other tab").wait_for()
    # Away again and back: the count starts from nothing.
    card.get_by_role("button", name="open demo-research").click()
    focused.wait_for()
    assert focused.get_by_test_id("unread").count() == 0


def test_focus_a_vogon_worker_steer_it_and_answer_its_checkpoint_from_the_link(
        server, page, shoot):
    page.goto(server.sign_in_url)
    create_session(page, "focus vogon")
    page.get_by_text("Hi, I'm Arthur").wait_for()
    page.get_by_label("Message to Arthur").fill("run the launch plan strategy with my approval")
    page.keyboard.press("Enter")
    card = _card(page, "demo-strategy")
    page.locator(f'{WORKER}[aria-label="Worker demo-strategy"][data-status=BLOCKED]').wait_for()
    card.get_by_role("button", name="open demo-strategy").click()
    focused = page.get_by_test_id("focused")
    phases = focused.get_by_test_id("vogon-phases")
    checkpoint = phases.get_by_test_id("checkpoint")
    checkpoint.wait_for()
    text = phases.inner_text()
    for name in ("research", "draft", "finalize"):
        assert name in text, text
    assert "checkpoint: approval" in text and "run 1: gate passed" in text, text
    summary = card.get_by_test_id("engine-summary").inner_text()
    assert summary.startswith("phase 2/3 draft") and "waiting for your answer" in summary, summary
    shoot(page, "worker-focused-vogon-checkpoint")

    # Written to the worker itself: process-steer with the worker as the target.
    transcript = page.get_by_test_id("transcript")
    page.get_by_label("Message to demo-strategy").fill("keep it short, please")
    page.keyboard.press("Enter")
    transcript.locator("[data-role=user]").filter(has_text="keep it short, please").wait_for()
    assert transcript.get_attribute("data-process-id") == card.get_attribute("data-process-id")

    # The checkpoint's link opens its Inbox item; approving it lets the strategy finish.
    title = checkpoint.inner_text()
    checkpoint.get_by_role("button", name="Open in the Inbox").click()
    item = page.get_by_test_id("inbox-item")
    item.wait_for()
    assert item.get_attribute("data-type") == "APPROVAL"
    assert item.get_by_role("heading").first.inner_text() in title
    item.get_by_role("button", name=re.compile("^Approve")).click()
    item.locator("[data-status=ANSWERED]").or_(
        page.locator("[data-testid=inbox-item][data-status=ANSWERED]")).first.wait_for()
    page.get_by_role("tab", name="Chat").click()
    page.locator("[data-testid=vogon-phases][data-outcome=completed]").wait_for()
    # The card's status comes with a later event than the phases' outcome: wait for it.
    page.locator(f'{WORKER}[aria-label="Worker demo-strategy"][data-status=CLOSED]').wait_for()
    shoot(page, "worker-focused-vogon-completed")


def test_an_autonomous_session_creates_a_council_and_draws_its_heads(server, page, shoot,
                                                                     axe_violations):
    page.goto(server.sign_in_url)
    create_session(page, "autonomous council", autonomous=True)
    page.get_by_text("An autonomous session has no chat").wait_for()
    assert page.get_by_role("textbox", name=re.compile("^Message to")).count() == 0
    page.get_by_test_id("transcript").get_by_role("button", name="New process").click()
    dialog = page.get_by_role("dialog", name="New process")
    dialog.get_by_label("Recipe or engine").click()
    page.get_by_role("option", name="zaphod", exact=True).first.click()
    dialog.get_by_label("Goal").fill("Should we serve tea or coffee at the launch?")
    dialog.get_by_label("Name").fill("tea-council")
    params = dialog.get_by_label("Params")
    params.fill('["not", "an object"]')
    dialog.get_by_text("Params must be a JSON object").wait_for()
    assert dialog.get_by_role("button", name="Start").is_disabled()
    params.fill('{"heads": [{"name": "tea", "persona": "a tea lover"},'
                ' {"name": "coffee", "persona": "a coffee lover"}]}')
    shoot(dialog, "new-process-dialog")
    dialog.get_by_role("button", name="Start").click()

    focused = page.get_by_test_id("focused")
    focused.get_by_role("heading", name="tea-council").wait_for()
    assert page.get_by_label("Message to tea-council").is_visible()
    council = focused.get_by_test_id("council")
    page.locator("[data-testid=council][data-phase=done]").wait_for()
    heads = council.get_by_test_id("council-head")
    # The two heads the params named, not the recipe's default three.
    assert sorted(h.inner_text() for h in heads.all()) == ["coffee: done", "tea: done"]
    council.get_by_test_id("synthesis").get_by_text("Conclusion:").wait_for()
    card = _card(page, "tea-council")
    unfold(card)
    assert card.get_by_test_id("engine-summary").inner_text().startswith(
        "council round 1/"), card.get_by_test_id("engine-summary").inner_text()
    shoot(page, "worker-focused-zaphod-council")
    found = axe_violations(page)
    assert found == [], "\n".join(found)
    # A head is a process of its own: its button focuses its chat.
    name = heads.first.inner_text().split(":")[0]
    heads.first.click()
    focused.get_by_role("heading", name=name).wait_for()
    page.get_by_test_id("transcript").locator("[data-role=assistant]").first.wait_for()
    # No Arthur here: closing the focus leaves the session's empty chat pane.
    focused.get_by_role("button", name="Close").click()
    page.get_by_text("An autonomous session has no chat").wait_for()


def test_a_welcome_suggestion_sends_itself_and_the_workers_nest_fold_and_report_once(
        server, page, shoot, axe_violations):
    """The demo welcome's phrases are buttons that send themselves; marvin's workers are
    drawn under marvin, the finished branch folds to a line (its toggle opens it), a card
    shows its statuses once, and the worker's report is read once: in Arthur's relay, the
    report itself folded under its event card."""
    page.goto(server.sign_in_url)
    create_session(page, "nested workers")
    transcript = page.get_by_test_id("transcript")
    suggestions = transcript.get_by_test_id("suggestions")
    suggestions.get_by_role("button", name="please research green tea").click()
    transcript.locator("[data-role=user]").filter(has_text="please research green tea").wait_for()
    assert page.get_by_label("Message to Arthur").input_value() == ""  # sent, not typed
    card = _card(page, "demo-research")
    page.locator(f'{WORKER}[aria-label="Worker demo-research"][data-status=CLOSED]').wait_for()
    transcript.locator("[data-role=assistant]").filter(has_text="is done").wait_for()

    # marvin's two workers are drawn under it, and folded with it once all are finished.
    marvin = card.get_attribute("data-process-id")
    branch = page.locator(f'[data-testid=worker-branch][data-process-id="{marvin}"]')
    nested = branch.get_by_test_id("worker-children").locator(WORKER)
    assert sorted(c.get_attribute("aria-label") for c in nested.all()) == [
        "Worker demo-research-n2", "Worker demo-research-n3"]
    assert page.locator(f"{WORKER}[aria-label^='Worker demo-research-n']").count() == 2
    toggle = card.get_by_role("button", name="details of demo-research")
    assert toggle.get_attribute("aria-expanded") == "false"
    assert not nested.first.is_visible() and card.get_by_test_id("trail").count() == 0
    assert "2 more workers" in card.get_by_test_id("folded").inner_text()
    shoot(page.get_by_role("complementary"), "workers-folded")
    toggle.click()
    nested.first.wait_for()
    card.get_by_test_id("trail").wait_for()
    # Each card shows its statuses once (the trail), not again as its last event.
    for shown in [card, *nested.all()]:
        unfold(shown)
        text = shown.inner_text()
        assert text.count("→ CLOSED") == 1, text
    shoot(page.get_by_role("complementary"), "workers-nested")

    # The report: Arthur relays it; the worker's own event card keeps it folded.
    report = "Demo result for “Gather the facts about: please research green tea”"
    shown_text = transcript.evaluate("(e) => e.innerText")
    assert shown_text.count(report) <= 1, shown_text
    event = transcript.locator("[data-role=event]").filter(has_text="demo-research")
    event.get_by_role("button").first.click()
    event.get_by_text("Gather the facts about: please research green tea").first.wait_for()
    shoot(page, "chat-report-once")
    found = axe_violations(page)
    assert found == [], "\n".join(found)
