"""The chat summary in the browser (docs/protocol.md "The chat summary"): the *Summary*
button over a chat shows that there is none yet, and, once messages long enough to pass
Arthur's default budget made the demo model summarise the older ones, what the model sees
in their place — as text, markup in it shown literally."""

from __future__ import annotations

from tests.web.ui import create_session
from vancetope_brain.llm.demo_summary import HEADER


def test_the_summary_button_shows_what_the_model_sees_of_a_long_chat(server, page, shoot):
    page.goto(server.sign_in_url)
    create_session(page, "summary test")
    transcript = page.get_by_test_id("transcript")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()
    button = page.get_by_role("button", name="Summary", exact=True)
    button.click()
    panel = page.get_by_test_id("chat-summary")
    panel.get_by_text("No summary yet: the model still sees the whole chat.").wait_for()
    button.click()
    panel.wait_for(state="detached")

    for i in range(8):  # 30,000 characters each: past 0.75 of the 65,536-token budget
        page.get_by_label("Message to Arthur").fill(f"m{i} <b>x</b> " + "word " * 6_000)
        page.keyboard.press("Enter")
        transcript.locator("[data-role=assistant]").filter(
            has_text=f"You said: “m{i} ").wait_for(timeout=60_000)
    button.click()
    panel.get_by_text(HEADER).wait_for()
    text = panel.inner_text()
    assert "Summary of lines 1–" in text and "which the model sees in their place" in text
    assert "- the user said “m0 <b>x</b> word word" in text  # as text, not markup
    assert panel.locator("b").count() == 0
    shoot(page, "chat-summary")
