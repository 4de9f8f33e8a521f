"""A phone-sized screen: the sessions fold into the menu, chat and workers are tabs; a worker
opened from its tab is shown in the chat tab."""

from __future__ import annotations

from tests.web.ui import create_session


def test_a_phone_sized_screen_has_the_chat_and_the_workers_as_tabs(server, browser, shoot):
    context = browser.new_context(viewport={"width": 390, "height": 800}, is_mobile=True,
                                  has_touch=True)
    try:
        page = context.new_page()
        page.goto(server.sign_in_url)
        page.get_by_role("button", name="Sessions").click()  # the burger menu
        create_session(page, "phone")
        page.get_by_text("Hi, I'm Arthur").wait_for()  # the menu folded away
        page.get_by_label("Message to Arthur").fill("please research tea")
        page.get_by_role("button", name="Send").click()
        page.locator("[data-role=assistant]").filter(has_text="is done").wait_for()
        assert page.get_by_role("button", name="Send").is_visible()
        shoot(page, "phone-chat")
        page.get_by_role("tab", name="Workers").click()
        page.locator("[data-testid=worker-card][data-status=CLOSED]").first.wait_for()
        shoot(page, "phone-workers")
        # Opening a worker goes to the chat tab, showing its tree and addressing it.
        page.get_by_role("button", name="open demo-research", exact=True).click()
        page.get_by_test_id("task-tree").wait_for()
        assert page.get_by_role("tab", name="Chat").get_attribute("aria-selected") == "true"
        assert page.get_by_label("Message to demo-research").is_visible()
        assert page.get_by_role("button", name="Send").is_visible()
        shoot(page, "phone-worker-focused")
        page.get_by_role("button", name="Back to Arthur").click()
        page.get_by_label("Message to Arthur").wait_for()
    finally:
        context.close()
