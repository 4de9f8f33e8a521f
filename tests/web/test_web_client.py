"""The web client in headless Chromium against a real ``vancetope serve`` (conftest.py):
sign in from the banner's ``#token=`` URL, create a session, see a reply streamed and a
worker's card move through its statuses."""

from __future__ import annotations

import json
import re
import urllib.request

from tests.knowledge.test_retrieval import FILLER, add
from tests.web.ui import create_session, unfold
from vancetope_brain.knowledge.sample import SAMPLE_NAME
from vancetope_brain.store import open_store

WORKER = "[data-testid=worker-card]"
STRATEGY = f'{WORKER}[aria-label="Worker demo-strategy"]'  # the demo's vogon process
HOSTILE_NAME = "<img src=x onerror=alert(1)>[link](javascript:alert(1)).md"


def test_the_app_loads_without_a_token_under_a_strict_policy(server):
    with urllib.request.urlopen(server.url + "/") as answer:
        policy = answer.headers["Content-Security-Policy"]
        assert answer.headers["Cache-Control"] == "no-cache"
        html = answer.read().decode()
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert "<script>" not in html  # no inline script: the policy would refuse it
    asset = re.search(r'src="(/assets/[^"]+\.js)"', html).group(1)
    with urllib.request.urlopen(server.url + asset) as answer:
        assert "immutable" in answer.headers["Cache-Control"]


def test_sign_in_from_the_fragment_stream_a_reply_and_follow_a_worker(server, page, shoot,
                                                                      axe_violations):
    missing: list[str] = []  # a browser's own loads (the icon) show only in the console
    page.on("console", lambda m: missing.append(m.text) if m.type == "error" else None)
    page.goto(server.sign_in_url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    assert not missing  # everything the app loads is there (its icon is inline)
    assert "token" not in page.url  # taken out of the address bar
    assert page.evaluate("sessionStorage.getItem('vancetope.token')") == server.token

    create_session(page, "web test")
    transcript = page.get_by_test_id("transcript")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()

    # Record every text the streamed bubble shows, to see the reply grow.
    page.evaluate("""() => {
        window.__streamed = [];
        new MutationObserver(() => {
            const bubble = document.querySelector('[data-role=streaming]');
            if (bubble) window.__streamed.push(bubble.textContent);
        }).observe(document.body, {subtree: true, childList: true, characterData: true});
    }""")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    typed = "hello **web** <img src=x onerror=alert(1)>"
    page.get_by_label("Message to Arthur").fill(typed)
    page.keyboard.press("Enter")
    reply = transcript.locator("[data-role=assistant]").filter(has_text="You said")
    reply.wait_for()
    streamed = page.evaluate("window.__streamed")
    assert len(set(streamed)) > 2, streamed  # it grew token by token before it committed
    assert transcript.locator("[data-role=user]").filter(has_text=typed).count() == 1
    # The reply quotes it as Markdown: rendered, with what could run removed (DOMPurify).
    assert reply.locator("strong").filter(has_text="web").count() == 1
    assert reply.locator("img").count() == 1
    assert reply.locator("img").get_attribute("onerror") is None and not dialogs
    shoot(page, "chat")

    page.get_by_label("Message to Arthur").fill("please research the history of tea")
    page.keyboard.press("Enter")
    # The marvin worker's own card (its children are demo-research-n…), once it is CLOSED.
    card = page.locator(f"{WORKER}[data-status=CLOSED]").filter(has_text="demo-research") \
        .filter(has_not_text="demo-research-n").first
    card.wait_for()
    unfold(card)  # finished: folded to a line
    trail = card.get_by_test_id("trail").inner_text()
    assert trail.startswith("INIT → RUNNING") and trail.endswith("CLOSED"), trail
    assert card.get_by_test_id("status-pill").inner_text() == "CLOSED"
    assert card.get_by_text("marvin").count() >= 1
    # The tool call that started it is a card, and the worker's report an event card.
    tool = transcript.locator("[data-role=tool]").filter(has_text="process_create")
    tool.get_by_text("success").wait_for()
    tool.get_by_role("button").first.click()
    assert json.loads(tool.locator("pre").first.inner_text())["recipe"] == "marvin"
    transcript.locator("[data-role=event]").filter(has_text="done").first.wait_for()
    transcript.locator("[data-role=assistant]").filter(has_text="is done").wait_for()
    shoot(card, "worker-card")
    shoot(page, "chat-with-worker")
    # The app with a chat, a tool card, event cards and worker cards passes axe-core.
    found = axe_violations(page)
    assert found == [], "\n".join(found)
    # The token travelled in the fragment and the subprotocol: never in a logged request
    # (the banner prints the sign-in link on purpose).
    requests = [line for line in server.output if "HTTP/1.1" in line]
    assert requests and not [line for line in requests if server.token in line]


def test_a_refused_token_says_so_on_the_sign_in_form(server, page, axe_violations):
    page.goto(server.url + "/#token=vt_not-a-real-token")
    page.get_by_role("alert").get_by_text("refused this token").wait_for()
    found = axe_violations(page)
    assert found == [], "\n".join(found)
    page.get_by_label("Token").fill(server.token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Token").wait_for()
    assert page.evaluate("sessionStorage.getItem('vancetope.token')") is None
    # The sign-in link opened in this tab again only changes the fragment: it signs in.
    page.goto(server.sign_in_url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()


def test_a_revoked_token_signs_the_tab_out_and_says_why(server, page):
    made = server.admin("token", "create", "--tenant", "local", "--user", "local",
                        "--label", "web test")
    secret = made.stdout.strip()
    token_id = re.search(r"tok_[0-9a-f]+", made.stdout + made.stderr).group(0)
    page.goto(f"{server.url}/#token={secret}")
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    server.admin("token", "revoke", "--tenant", "local", token_id)
    # Told by the close frame (1008 "token revoked"), not guessed after a cut (1006).
    page.get_by_role("alert").get_by_text("This token was revoked").wait_for()
    assert page.evaluate("sessionStorage.getItem('vancetope.token')") is None


def test_worker_card_buttons_pause_resume_and_stop_it(server, page, shoot):
    page.goto(server.sign_in_url)
    create_session(page, "lifecycle")
    page.get_by_text("Hi, I'm Arthur").wait_for()
    page.get_by_label("Message to Arthur").fill("run the launch plan strategy with my approval")
    page.keyboard.press("Enter")
    card = page.locator(STRATEGY)
    page.locator(f"{STRATEGY}[data-status=BLOCKED]").wait_for()  # at its approval checkpoint
    pill = card.get_by_test_id("status-pill")

    card.get_by_role("button", name="pause demo-strategy").click()
    page.locator(f"{STRATEGY}[data-status=PAUSED]").wait_for()
    assert card.get_by_role("button", name="pause demo-strategy").is_disabled()
    shoot(card, "worker-card-paused")
    card.get_by_role("button", name="resume demo-strategy").click()
    page.wait_for_function(
        "() => document.querySelector('[aria-label=\"Worker demo-strategy\"]')"
        ".dataset.status !== 'PAUSED'")
    card.get_by_role("button", name="stop demo-strategy").click()
    page.locator(f"{STRATEGY}[data-status=CLOSED]").wait_for()
    assert pill.inner_text() == "CLOSED"
    unfold(card)
    assert "PAUSED" in card.get_by_test_id("trail").inner_text()


def test_a_reply_from_the_documents_shows_its_sources_as_text(server, page, shoot):
    """serve seeded its sample; a second document (written straight into the store: the upload
    path is not here yet) has a name of markup. The demo answers from both, and the sources
    under the reply are plain text — no link, no image, nothing run."""
    store = open_store(f"sqlite:///{server.data_dir / 'vancetope.db'}")
    try:
        add(store, "local", "default", HOSTILE_NAME, *FILLER, "Zebra citations: stripes.")
    finally:
        store.close()
    page.goto(server.sign_in_url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    create_session(page, "documents")
    transcript = page.get_by_test_id("transcript")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.get_by_label("Message to Arthur").fill("what do my documents say about zebra citations")
    page.keyboard.press("Enter")
    reply = transcript.locator("[data-role=assistant]").filter(has_text="Your documents say")
    reply.wait_for()
    sources = reply.locator("[data-role=sources]")
    sources.wait_for()
    shown = sources.locator("[data-role=source]").all_inner_texts()
    assert f"{HOSTILE_NAME}, lines 13-14" in shown
    assert any(text.startswith(f"{SAMPLE_NAME} › ") for text in shown), shown
    assert sources.locator("a, img, script").count() == 0 and not dialogs
    # The demo quotes the name in its reply too, as text: no image, no link.
    assert reply.locator("img, a").count() == 0
    assert f"— {HOSTILE_NAME}, lines 13-14" in reply.inner_text()
    shoot(page, "reply-with-sources")
