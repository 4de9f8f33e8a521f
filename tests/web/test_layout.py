"""A phone-sized screen: the sessions fold into the menu, chat and workers are tabs (the
Chat tab counts Arthur's lines while it is out of sight); a worker opened from its tab is
shown in the chat tab, its tree's long goals ending in an ellipsis; "New process" starts
marvin with a workflow template."""

from __future__ import annotations

from tests.web.ui import ask_from_another_tab, create_session


def test_a_phone_sized_screen_has_the_chat_and_the_workers_as_tabs(server, browser, shoot):
    context = browser.new_context(viewport={"width": 390, "height": 800}, is_mobile=True,
                                  has_touch=True)
    try:
        page = context.new_page()
        page.goto(server.sign_in_url)
        page.get_by_role("button", name="Sessions").click()  # the burger menu
        create_session(page, "phone layout")
        page.get_by_text("Hi, I'm Arthur").wait_for()  # the menu folded away
        page.get_by_label("Message to Arthur").fill("please research tea")
        page.get_by_role("button", name="Send").click()
        page.locator("[data-role=assistant]").filter(has_text="I started a worker").wait_for()
        page.locator("[data-role=assistant]").filter(
            has_text="The worker demo-research is done").wait_for()
        # Arthur answers the user's other tab while the Workers tab is shown: counted.
        page.get_by_role("tab", name="Workers").click()
        page.locator("[data-testid=worker-card][data-status=CLOSED]").first.wait_for()
        ask_from_another_tab(browser, server, "phone layout", "hello from the other tab")
        chat_tab = page.get_by_role("tab", name="Chat")
        chat_tab.get_by_test_id("chat-unread").wait_for()
        assert int(chat_tab.get_by_test_id("chat-unread").inner_text()) >= 1
        shoot(page, "phone-workers")
        chat_tab.click()
        page.locator("[data-role=assistant]").filter(has_text="hello from the other tab").wait_for()
        assert chat_tab.get_by_test_id("chat-unread").count() == 0  # read now
        assert page.get_by_role("button", name="Send").is_visible()
        shoot(page, "phone-chat")
        page.get_by_role("tab", name="Workers").click()
        # Opening a worker goes to the chat tab, showing its tree and addressing it.
        page.get_by_role("button", name="open demo-research", exact=True).click()
        page.get_by_test_id("task-tree").wait_for()
        assert page.get_by_role("tab", name="Chat").get_attribute("aria-selected") == "true"
        assert page.get_by_label("Message to demo-research").is_visible()
        assert page.get_by_role("button", name="Send").is_visible()
        shoot(page, "phone-worker-focused")
        page.get_by_role("button", name="Back to Arthur").click()
        page.get_by_label("Message to Arthur").wait_for()

        # marvin with a workflow template: its steps' goals, long ones cut with an ellipsis.
        page.get_by_role("tab", name="Workers").click()
        page.get_by_role("button", name="New process").click()
        dialog = page.get_by_role("dialog", name="New process")
        dialog.get_by_label("Recipe or engine").click()
        page.get_by_role("option", name="marvin", exact=True).first.click()
        dialog.get_by_label("Workflow template").click()
        page.get_by_role("option", name="research-brief", exact=True).click()
        dialog.get_by_label("Goal").fill("the history of tea ceremonies across East Asia, "
                                         "from the Tang dynasty to the present day")
        dialog.get_by_label("Name").fill("tea-brief")
        dialog.get_by_role("button", name="Start").click()
        tree = page.get_by_test_id("task-tree")
        node = tree.get_by_text("Background and key concepts of: the history of tea",
                                exact=False).first
        node.wait_for()  # the template's first step, not a tree marvin planned
        cut = node.evaluate("(e) => [e.scrollWidth > e.clientWidth, "
                            "getComputedStyle(e).textOverflow, e.getBoundingClientRect().right]")
        assert cut[0] and cut[1] == "ellipsis" and cut[2] <= 390, cut
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scroll
        shoot(page, "phone-tree-ellipsis")
    finally:
        context.close()
