"""A message shows at once, before its turn commits (issue 27 item 4): pending, then replaced
by its committed line, or marked failed with the error (a refused request, or an error line
a failed turn linked to it) and sent again; and the chat says that Arthur is working from
the turn's start, however slow the model.

The page's WebSocket is routed through the test (Playwright's WebSocket routing), which
plays a slow model: it holds back the session's events after the turn's ``status-changed``
to RUNNING, and releases them in order when the test has looked."""

from __future__ import annotations

import json
import re
import threading

from tests.web.ui import create_session


class SlowTurns:
    """Routes ``/ws``: while ``holding``, every ``event`` frame but a change to RUNNING waits
    (as the events of a turn whose model has not answered yet) until ``release``.
    ``refuse_steer`` answers the next ``process-steer`` itself with that error, unsent."""

    def __init__(self, page) -> None:  # type: ignore[no-untyped-def]
        self.holding = False
        self.refuse_steer: dict | None = None
        self.turn_error: str | None = None
        self.steers = 0
        self._held: list[str] = []
        self._ws = None
        self._lock = threading.Lock()
        page.route_web_socket(re.compile(r"/ws$"), self._route)

    def _route(self, ws) -> None:  # type: ignore[no-untyped-def]
        upstream = ws.connect_to_server()
        self._ws = ws

        def up(message) -> None:  # type: ignore[no-untyped-def]
            frame = json.loads(message)
            if frame["type"] == "process-steer":
                self.steers += 1
                if self.refuse_steer is not None:
                    error, self.refuse_steer = self.refuse_steer, None
                    ws.send(json.dumps({"type": "error", "replyTo": frame["id"], "data": error}))
                    return
            upstream.send(message)

        def down(message) -> None:  # type: ignore[no-untyped-def]
            frame = json.loads(message)
            line = frame["data"].get("data", {}) if frame["type"] == "event" else {}
            if self.turn_error and frame["data"].get("type") == "chat-message" \
                    and line.get("role") == "user":
                # As a turn that failed answers the message it read: an error line linked
                # to it instead of its own line.
                line.update(role="error", content=self.turn_error)
                message, self.turn_error = json.dumps(frame), None
            with self._lock:
                if self.holding and frame["type"] == "event" and not (
                        frame["data"]["type"] == "status-changed"
                        and frame["data"]["data"]["to"] == "RUNNING"):
                    self._held.append(message)
                    return
            ws.send(message)

        ws.on_message(up)
        upstream.on_message(down)

    def release(self) -> None:
        with self._lock:
            self.holding = False
            held, self._held = self._held, []
        for message in held:
            self._ws.send(message)  # type: ignore[attr-defined]


def test_a_message_shows_at_once_and_arthur_works_from_the_turns_start(server, page, shoot):
    slow = SlowTurns(page)
    page.goto(server.sign_in_url)
    create_session(page, "pending")
    transcript = page.get_by_test_id("transcript")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()
    page.get_by_test_id("working").wait_for(state="detached")  # the welcome's turn ended

    slow.holding = True
    page.get_by_label("Message to Arthur").fill("what is green tea?")
    page.keyboard.press("Enter")
    # Stored by the server, not committed: shown as the user's, marked sent; the composer
    # is free again; Arthur's turn has started (RUNNING) and nothing streamed yet.
    pending = transcript.get_by_test_id("pending")
    pending.filter(has_text="what is green tea?").and_(
        page.locator("[data-state=sent]")).wait_for()
    assert page.get_by_label("Message to Arthur").input_value() == ""
    page.get_by_test_id("working").get_by_text("Arthur is working…").wait_for()
    assert transcript.locator("[data-role=user]").count() == 0
    assert transcript.locator("[data-role=assistant]").count() == 1  # the welcome only
    shoot(page, "chat-pending-working")

    slow.release()
    reply = transcript.locator("[data-role=assistant]").filter(has_text="what is green tea?")
    reply.wait_for()
    # The committed line replaced the pending one; the turn ended.
    assert transcript.locator("[data-role=user]").filter(has_text="what is green tea?") \
        .count() == 1
    pending.wait_for(state="detached")
    page.get_by_test_id("working").wait_for(state="detached")


def test_a_refused_message_is_marked_failed_and_can_be_sent_again(server, page, shoot):
    slow = SlowTurns(page)
    page.goto(server.sign_in_url)
    create_session(page, "refused")
    transcript = page.get_by_test_id("transcript")
    transcript.get_by_text("Hi, I'm Arthur").wait_for()

    slow.refuse_steer = {"code": "runtime_failure", "message": "Redis is not reachable"}
    page.get_by_label("Message to Arthur").fill("are you there?")
    page.keyboard.press("Enter")
    failed = transcript.locator("[data-testid=pending][data-state=failed]")
    failed.get_by_text("Not delivered").wait_for()
    failed.get_by_role("alert").get_by_text("Redis is not reachable").wait_for()
    assert failed.get_by_text("are you there?").count() == 1
    shoot(failed, "chat-pending-failed")

    failed.get_by_role("button", name="Send again").click()
    transcript.locator("[data-role=assistant]").filter(has_text="are you there?").wait_for()
    assert transcript.get_by_test_id("pending").count() == 0
    assert transcript.locator("[data-role=user]").filter(has_text="are you there?").count() == 1
    assert slow.steers == 2  # refused once (never sent), then sent

    # Discarded: a failed line the user does not want to send is gone.
    slow.refuse_steer = {"code": "conflict", "message": "the process is CLOSED"}
    page.get_by_label("Message to Arthur").fill("never mind")
    page.keyboard.press("Enter")
    failed.get_by_text("the process is CLOSED").wait_for()
    failed.get_by_role("button", name="Discard").click()
    transcript.get_by_test_id("pending").wait_for(state="detached")

    # Stored, then answered by an error line instead of its own: marked failed with it.
    slow.turn_error = "Your message was not processed: this turn failed; send it again."
    page.get_by_label("Message to Arthur").fill("one more")
    page.keyboard.press("Enter")
    failed.get_by_role("alert").get_by_text("this turn failed").wait_for()
    assert failed.get_by_text("one more").count() == 1
