"""The Hooks tab (issue 33 part 2): a user subscribes the project to events with a receiver
on loopback (the server's operator allows it here), copies the secret shown once, sees the
subscription and its (empty) delivery log, disables and deletes it; on a desktop and on a
phone."""

from __future__ import annotations

import pytest

from tests.web.conftest import serve
from tests.webhooks.receiver import receiving


def test_the_hooks_tab_subscribes_shows_the_secret_once_and_lists(
        tmp_path_factory: pytest.TempPathFactory, page, browser, shoot, axe_violations):
    with receiving() as receiver, serve(tmp_path_factory.mktemp("web-hooks"),
                                        VANCETOPE_WEBHOOK_ALLOW_PRIVATE="true") as server:
        page.goto(server.sign_in_url)
        page.get_by_test_id("connection").get_by_text("connected").wait_for()
        page.get_by_role("tab", name="Hooks").click()
        page.get_by_text("No webhooks in this project yet.").wait_for()
        page.get_by_label("Receiver URL").fill(receiver.url)
        page.get_by_label("an Inbox item is created").check()
        page.get_by_role("button", name="Add webhook").click()
        secret = page.get_by_test_id("webhook-secret")
        secret.wait_for()
        assert "whsec_" in secret.inner_text()
        card = page.get_by_test_id("webhook")
        card.get_by_text(receiver.url).wait_for()
        assert "process.done, inbox.item.created" in card.inner_text()
        card.get_by_role("button", name="Deliveries").click()
        card.get_by_text("Nothing delivered yet.").wait_for()
        assert not axe_violations(page)
        shoot(page, "hooks-desktop")

        phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                    has_touch=True, reduced_motion="reduce")
        try:
            small = phone.new_page()
            small.goto(server.sign_in_url)
            small.get_by_test_id("connection").get_by_text("connected").wait_for()
            small.get_by_role("tab", name="Hooks").click()
            small.get_by_test_id("webhook").get_by_text(receiver.url).wait_for()
            assert "whsec_" not in small.get_by_test_id("webhooks").inner_text()  # once only
            assert small.evaluate("document.documentElement.scrollWidth") <= 390
            assert not axe_violations(small)
            shoot(small, "hooks-phone")
        finally:
            phone.close()

        card.get_by_role("button", name="Disable").click()
        card.get_by_text("off", exact=True).wait_for()
        card.get_by_role("button", name="Delete").click()
        page.get_by_text("No webhooks in this project yet.").wait_for()
