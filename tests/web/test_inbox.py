"""The web client's Inbox in headless Chromium against a real ``vancetope serve`` with the
demo model (conftest.py): the demo posts one item of each of the eight types; each is
rendered and answered or viewed through its own renderer (an invalid STRUCTURE_EDIT value
refused inline, the ORDERING changed by keyboard, the image and the document opened through
their signed links); one ask is delegated to a second user, who answers it in a second
browser context; and the page keeps within its Content Security Policy throughout."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.web.ui import create_session

ROW = "[data-testid=inbox-row]"
ITEM = "[data-testid=inbox-item]"

# Collects the page's CSP violations (an init script is not itself subject to the policy).
# Bea's tab: in the background, browser notifications allowed; each one is recorded.
BACKGROUND_TAB = """
Object.defineProperty(document, 'hidden', {get: () => true});
window.__notified = [];
window.Notification = class {
    static permission = 'granted';
    static requestPermission() { return Promise.resolve('granted'); }
    constructor(title) { window.__notified.push(title); }
};
"""

CSP_WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation',
    (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""


def _sign_in(page, url: str) -> None:
    page.add_init_script(CSP_WATCH)
    page.goto(url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()


def _open(page, item_type: str):  # type: ignore[no-untyped-def]
    """Click the list row of the item of this type; its view."""
    page.locator(f"{ROW}[data-type={item_type}]").click()
    view = page.locator(f"{ITEM}[data-type={item_type}]")
    view.wait_for()
    return view


def _answered(view) -> None:  # type: ignore[no-untyped-def]
    view.locator("[data-testid=item-status]").get_by_text("ANSWERED").wait_for()


def _lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def _reads(view, text: str) -> None:  # type: ignore[no-untyped-def]
    """The item's answer reads ``text`` (its lines), with no JSON in sight."""
    answer = view.get_by_test_id("item-answer")
    assert _lines(answer.inner_text()) == text.split("\n")
    assert answer.locator("pre, code").count() == 0


def _second_user(server) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """A user Bea in the local user's tenant, and a token for her."""
    tenant = server.admin("tenant", "list").stdout.splitlines()[1].split()[0]
    user = server.admin("user", "create", "-q", "--tenant", tenant, "--id", "usr_bea",
                        "--exist-ok", "Bea").stdout.strip()
    token = server.admin("token", "create", "-q", "--tenant", tenant, "--user", user) \
        .stdout.strip().splitlines()[-1]
    return user, token


def test_every_inbox_item_type_is_rendered_answered_and_one_delegated(
        server, page, browser, shoot):
    _sign_in(page, server.sign_in_url)
    create_session(page, "inbox test")
    page.get_by_test_id("transcript").get_by_text("Hi, I'm Arthur").wait_for()
    page.get_by_label("Message to Arthur").fill("show me every kind of inbox item")
    page.keyboard.press("Enter")

    # Loaded and kept live from the pushes: a toast per new item, the tab's pending count.
    page.get_by_role("tab", name="Inbox").click()
    rows = page.locator(ROW)
    page.get_by_test_id("inbox-pending").get_by_text("8").wait_for()
    toast = page.locator(".mantine-Notification-root").filter(has_text="in your Inbox")
    toast.get_by_text("8 new items in your Inbox").wait_for()  # one toast for the burst
    toast.get_by_role("button").click()
    assert rows.count() == 8
    assert page.get_by_text("pending (8)").count() == 1
    page.get_by_text("critical (1)").click()  # the criticality filter: the DECISION only
    assert rows.count() == 1 and rows.first.get_attribute("data-type") == "DECISION"
    page.get_by_text("critical (1)").click()
    page.get_by_text("#demo", exact=True).click()  # the tag filter: every demo item has it
    assert rows.count() == 8
    page.get_by_text("#demo", exact=True).click()
    shoot(page, "inbox-list")

    # APPROVAL: the default (no) is the highlighted button; approve it.
    view = _open(page, "APPROVAL")
    decline = view.get_by_role("button", name="Decline (default)")
    assert decline.get_attribute("data-default") == "true"
    shoot(view, "inbox-approval")
    view.get_by_role("button", name="Approve").click()
    _answered(view)
    _reads(view, "Answered by you\nApproved")

    # DECISION: options with the default marked, plus free text.
    view = _open(page, "DECISION")
    assert view.get_by_label("SQLite (default)").is_checked()
    view.get_by_label("PostgreSQL").check()
    view.get_by_label("Or in your own words").fill("postgres, with backups")
    shoot(view, "inbox-decision")
    view.get_by_role("button", name="Answer", exact=True).click()
    _answered(view)
    _reads(view, "Answered by you\nChose PostgreSQL\nAnd wrote: “postgres, with backups”")

    # ORDERING by keyboard: pick up the last row, move it up three places, drop it.
    view = _open(page, "ORDERING")
    view.locator("[data-testid=ordering-row][data-id=announce]").focus()
    for key in ["Space", "ArrowUp", "ArrowUp", "ArrowUp", "Space"]:
        page.keyboard.press(key)
        page.wait_for_timeout(150)  # dnd-kit moves the row on the next animation frames
    order = view.locator("[data-testid=ordering-row]")
    page.wait_for_function("""() => document.querySelector(
        '[data-testid=ordering-row]').dataset.id === 'announce'""")
    assert [order.nth(i).get_attribute("data-id") for i in range(4)] == \
        ["announce", "tests", "docs", "release"]
    shoot(view, "inbox-ordering")
    view.get_by_role("button", name="Submit this order").click()
    _answered(view)
    _reads(view, "Answered by you\nIn this order:\nAnnounce it\nFinish the tests\n"
                 "Write the docs\nCut the release")

    # STRUCTURE_EDIT: a form from the schema; an invalid name is refused inline.
    view = _open(page, "STRUCTURE_EDIT")
    form = view.get_by_test_id("structure-form")
    name = form.get_by_label("name")
    assert name.input_value() == "demo-service"
    name.fill("Not Valid!")
    form.get_by_role("button", name="Submit").click()
    form.locator(".error-detail").get_by_text("pattern").wait_for()
    shoot(view, "inbox-structure-edit-invalid")
    assert view.get_by_test_id("item-status").inner_text() == "PENDING"
    name.fill("demo-api")
    form.get_by_label("replicas").fill("3")
    form.get_by_role("button", name="Submit").click()
    _answered(view)
    _reads(view, "Answered by you\nSet to:\nName: demo-api\nReplicas: 3")

    # OUTPUT_TEXT as sanitized, highlighted Markdown; seen (dismissed), then archived.
    view = _open(page, "OUTPUT_TEXT")
    text = view.get_by_test_id("output-text")
    text.get_by_role("heading", name="What the demo can show").wait_for()
    assert text.locator("pre code.hljs").count() == 1
    shoot(view, "inbox-output-text")
    view.get_by_role("button", name="Done").click()
    view.get_by_role("button", name="Archive").click()
    view.locator("[data-testid=item-status]").get_by_text("ARCHIVED").wait_for()
    assert [h.split("\t")[1] for h in view.get_by_test_id("item-history")
            .locator("tbody tr").all_inner_texts()] == ["create", "dismiss", "archive"]
    # Loads the archive, which the list leaves out (no count: only PENDING ones are counted).
    page.locator("label").filter(has_text=re.compile(r"^archived$")).click()
    page.locator(f"{ROW}[data-type=OUTPUT_TEXT]").wait_for()
    assert rows.count() == 1
    page.get_by_text(re.compile(r"^pending \(\d\)$")).click()

    # OUTPUT_IMAGE and OUTPUT_DOCUMENT through their signed links.
    view = _open(page, "OUTPUT_IMAGE")
    image = view.get_by_test_id("output-image")
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 0",
                           arg=image.element_handle())
    assert image.evaluate("(img) => [img.naturalWidth, img.naturalHeight]") == [64, 40]
    shoot(view, "inbox-output-image")
    view = _open(page, "OUTPUT_DOCUMENT")
    link = view.get_by_test_id("output-document")
    href = link.get_attribute("href")
    assert href.startswith("/attachments/") and "sig=" in href
    document = page.request.get(server.url + href)
    assert document.ok and "Vancetope demo document" in document.text()
    shoot(view, "inbox-output-document")

    # FEEDBACK: the length counter, then delegated to Bea.
    bea, bea_token = _second_user(server)
    view = _open(page, "FEEDBACK")
    view.get_by_label("Your feedback").fill("Quick and clear.")
    view.get_by_test_id("length-counter").get_by_text("16 / 500 characters").wait_for()
    shoot(view, "inbox-feedback")
    second = browser.new_context(viewport={"width": 1400, "height": 900})
    second.set_default_timeout(15_000)
    try:
        other = second.new_page()
        other.add_init_script(BACKGROUND_TAB)
        errors: list[str] = []
        other.on("pageerror", lambda e: errors.append(str(e)))
        _sign_in(other, f"{server.url}/#token={bea_token}")

        view.get_by_role("button", name="Delegate…").click()
        view.get_by_label("Note").fill("you saw the demo too")
        # The tenant's users (user-list), searched as one types: nobody else matches.
        picker = view.get_by_label("Delegate to")
        picker.fill("nobody")
        page.get_by_text("No user of this tenant matches").wait_for()
        picker.fill("be")
        page.get_by_role("option", name=f"Bea ({bea})").click()
        assert picker.input_value() == f"Bea ({bea})"
        view.get_by_role("button", name="Delegate", exact=True).click()
        page.locator(f"{ROW}[data-type=FEEDBACK]").wait_for(state="detached")  # not mine now

        # Bea's tab is in the background: a browser notification as well as the toast.
        other.get_by_text("New in your Inbox (feedback)").wait_for()
        other.wait_for_function("window.__notified.length === 1")
        assert other.evaluate("window.__notified") == ["Vancetope Inbox: How did the demo feel?"]
        other.reload()
        other.get_by_text("1 pending item").wait_for()  # the summary on (re)connecting
        other.get_by_role("tab", name="Inbox").click()
        theirs = _open(other, "FEEDBACK")
        history = theirs.get_by_test_id("item-history")
        history.get_by_text(f"delegate → {bea}").wait_for()
        history.get_by_text("you saw the demo too").wait_for()
        theirs.get_by_label("Your feedback").fill("Bea liked it.")
        theirs.get_by_role("button", name="Send feedback").click()
        _answered(theirs)
        shoot(theirs, "inbox-delegated-answered")
        assert other.evaluate("window.__csp") == [] and errors == []
    finally:
        second.close()

    # Arthur reports each answer in the chat, Bea's included.
    page.get_by_role("tab", name="Chat").click()
    transcript = page.get_by_test_id("transcript")
    transcript.get_by_text("Your feedback on “How did the demo feel?”: Bea liked it.").wait_for()
    transcript.get_by_text("You approved “Approve the demo deployment?”").wait_for()
    # What reached Arthur, each as one reads it: the answer in words and who gave it.
    answers = transcript.locator("[data-role=event][data-tag=inbox-answer]")
    assert {tuple(_lines(card)) for card in answers.all_inner_texts()} == {
        ("Inbox answer", "Approve the demo deployment?", "APPROVAL", "Approved",
         "Answered by you"),
        ("Inbox answer", "Which database should the demo use?", "DECISION",
         "Chose PostgreSQL", "And wrote: “postgres, with backups”", "Answered by you"),
        ("Inbox answer", "Put the launch tasks in order", "ORDERING", "In this order:",
         "Announce it", "Finish the tests", "Write the docs", "Cut the release",
         "Answered by you"),
        ("Inbox answer", "Edit the demo service settings", "STRUCTURE EDIT", "Set to:",
         "Name: demo-api", "Replicas: 3", "Answered by you"),
        ("Inbox answer", "How did the demo feel?", "FEEDBACK", "“Bea liked it.”",
         f"Answered by {bea}"),
    }
    assert "outcome" not in transcript.inner_text() and "{" not in "".join(
        answers.all_inner_texts())
    shoot(answers.first, "chat-inbox-answer")

    # A LOW ask with a default is answered with it at once (nobody is told); the Inbox,
    # loaded again when opened, marks it, and the automatic answer can be revoked.
    page.get_by_label("Message to Arthur").fill("ask me for approval, low priority")
    page.keyboard.press("Enter")
    transcript.get_by_text("I put an item into your Inbox: APPROVAL.").wait_for()
    page.get_by_role("tab", name="Inbox").click()
    page.locator("label").filter(has_text=re.compile(r"^answered$")).click()
    auto = page.locator(f"{ROW}[data-criticality=LOW]").filter(has_text="auto-answered")
    auto.click()
    view = page.locator(f"{ITEM}[data-type=APPROVAL]")
    view.get_by_test_id("item-answer").get_by_text("Answered automatically").wait_for()
    shoot(view, "inbox-auto-answered")
    view.get_by_role("button", name="Revoke the automatic answer").click()
    view.locator("[data-testid=item-status]").get_by_text("PENDING").wait_for()
    view.get_by_role("button", name="Approve").click()
    _answered(view)
    page.get_by_role("tab", name="Chat").click()
    expect(transcript.get_by_text("You approved “Approve the demo deployment?”.")) \
        .to_have_count(2)  # the revoked answer's process waited for this one

    # "I lack information", with a reason, on a new ask.
    page.get_by_label("Message to Arthur").fill("ask me for approval")
    page.keyboard.press("Enter")
    page.get_by_role("tab", name="Inbox").click()
    page.get_by_text(re.compile(r"^pending \(\d+\)$")).click()
    view = _open(page, "APPROVAL")
    view.get_by_role("button", name="Can't answer?").click()
    view.get_by_label("Reason").fill("which deployment?")
    view.get_by_role("button", name="Send reason").click()
    view.get_by_test_id("item-answer").get_by_text("I lack information: which deployment?") \
        .wait_for()
    assert page.evaluate("window.__csp") == []
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: list above the item
    page.locator(f"{ITEM}[data-type=APPROVAL]").wait_for()
    shoot(page, "inbox-phone")
