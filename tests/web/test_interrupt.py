"""Stop a reply in the web client (issue 32 part 1, acceptance (a)): a real ``vancetope
serve`` whose model is the fake OpenAI-compatible server streaming slowly; the Stop button
sends ``process-interrupt``, the partial line shows "interrupted", no token reaches the page
more than 300 ms after the frame left it, and the next question is answered normally. Then
*Ask again* on Arthur's last line regenerates it, the earlier attempt staying visible."""

from __future__ import annotations

import json

import pytest

from tests.gateway.test_interrupt import BOUND, answer
from tests.llm.fake_openai_server import FakeOpenAiServer
from tests.web.conftest import serve
from tests.web.ui import create_session

# Every frame the page sends or receives, with the page's clock (ms), recorded in the page
# itself: Playwright's own WebSocket events reach the test later than the page saw them.
RECORD_FRAMES = """
window.__frames = [];
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (data) {
  if (!this.__recorded) {
    this.__recorded = true;
    this.addEventListener("message", (e) =>
      window.__frames.push({ dir: "in", t: performance.now(), data: String(e.data) }));
  }
  window.__frames.push({ dir: "out", t: performance.now(), data: String(data) });
  return send.call(this, data);
};
"""


@pytest.fixture(scope="module")
def paced(tmp_path_factory):
    with FakeOpenAiServer() as fake:
        fake.respond_with(answer)
        with serve(tmp_path_factory.mktemp("web-paced"), OPENAI_BASE_URL=fake.base_url,
                   OPENAI_API_KEY="sk-fake-0123456789") as served:
            yield served


@pytest.mark.parametrize("viewport", [(1400, 900), (390, 844)], ids=["desktop", "phone"])
def test_stop_cuts_the_streaming_reply(paced, browser, shoot, viewport):
    context = browser.new_context(viewport={"width": 1400, "height": 900},
                                  reduced_motion="reduce")
    context.set_default_timeout(15_000)
    context.add_init_script(RECORD_FRAMES)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(paced.sign_in_url)
        create_session(page, f"stop {viewport[0]}")  # (on a phone, the list is a menu)
        page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
        page.get_by_label("Message to Arthur").fill("talk long")
        page.keyboard.press("Enter")
        page.locator("[data-role=streaming]").filter(has_text="word5").wait_for()
        stop = page.get_by_role("button", name="Stop Arthur's reply")
        shoot(page, f"interrupt-streaming-{viewport[0]}")
        stop.click()
        cut = page.locator("[data-role=assistant]").filter(
            has=page.locator("[data-role=interrupted]"))
        cut.wait_for()
        assert page.locator("[data-role=streaming]").count() == 0
        shoot(page, f"interrupt-stopped-{viewport[0]}")
        text = cut.inner_text()
        assert "word0" in text and "word399" not in text
        page.wait_for_timeout(1000)  # any straggler would arrive by now

        frames = page.evaluate("window.__frames")
        sent = [f["t"] for f in frames
                if f["dir"] == "out" and json.loads(f["data"])["type"] == "process-interrupt"]
        assert len(sent) == 1
        tokens = [f["t"] - sent[0] for f in frames if f["dir"] == "in"
                  and _event_type(f["data"]) == "token"]
        assert tokens and min(tokens) < 0  # tokens streamed before the Stop
        late = [t for t in tokens if t > BOUND * 1000]
        assert not late, late
        assert stop.count() == 0  # the reply is over: no Stop any more

        page.get_by_label("Message to Arthur").fill("and now?")
        page.keyboard.press("Enter")
        page.locator("[data-role=assistant]").filter(has_text="A normal answer.").wait_for()
        assert page.locator("[data-role=interrupted]").count() == 1
        shoot(page, f"interrupt-next-{viewport[0]}")

        # Regenerate: the button on Arthur's last line asks again; the earlier reply stays.
        page.get_by_role("button", name="Ask Arthur again for this reply").click()
        page.locator("[data-role=assistant]").filter(has_text="asked again").wait_for()
        replies = page.locator("[data-role=assistant]").filter(has_text="A normal answer.")
        assert replies.count() == 2
        assert replies.first.get_attribute("data-earlier") == "true"
        assert "earlier attempt" in replies.first.inner_text().lower()
        shoot(page, f"regenerate-{viewport[0]}")
    finally:
        context.close()
    assert not errors, errors


def _event_type(raw: str) -> str | None:
    frame = json.loads(raw)
    return frame["data"].get("type") if frame.get("type") == "event" else None
