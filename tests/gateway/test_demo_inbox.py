"""The offline demo model's headline features over a real WebSocket to the real server:
it streams, Arthur posts Inbox items when asked ("ask me for approval", "show me every kind
of inbox item") through the ``inbox_post`` tool, and reports each answer in the chat."""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import pytest
from simple_websocket import ConnectionClosed

from tests.helpers import wait_for
from vancetope_brain.inbox.payloads import validate_payload
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.llm.demo_inbox import ALL_TYPES, DOCUMENT_MARKDOWN, demo_png
from vancetope_brain.models.inbox import ItemType
from vancetope_gateway.chat_client import WebSocketClient


class Socket:
    """A WebSocket client of the embedded user whose frames a thread collects."""

    def __init__(self, host: str, token: str) -> None:
        self.ws = WebSocketClient.connect(f"ws://{host}/ws?token={token}")
        self.frames: list[dict[str, Any]] = []
        self._n = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                self.frames.append(json.loads(self.ws.receive()))
        except ConnectionClosed:
            pass

    def request(self, frame_type: str, /, expect: str | None = None,
                **data: Any) -> dict[str, Any]:
        """Send a request; its reply's data, which must be of type ``expect`` (default: the
        request's own, a success)."""
        self._n += 1
        rid = f"r{self._n}"
        self.ws.send(json.dumps({"type": frame_type, "id": rid, "data": data}))
        reply = wait_for(lambda: next((f for f in list(self.frames) if f.get("replyTo") == rid),
                                      None), what=f"the reply to {frame_type}")
        assert reply["type"] == (expect or frame_type), reply
        return reply["data"]

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [f["data"]["data"] for f in list(self.frames)
                if f["type"] == "event" and f["data"]["type"] == kind]

    def said(self, start: str, timeout: float = 15) -> str:
        """Arthur's chat line that starts with ``start``, once it is committed."""
        return wait_for(lambda: next((m["content"] for m in self.events("chat-message")
                                      if m["role"] == "assistant"
                                      and m["content"].startswith(start)), None),
                        timeout=timeout, what=f"Arthur saying {start!r}")

    def added(self, count: int) -> list[dict[str, Any]]:
        return wait_for(lambda: len(items := [f["data"]["item"] for f in list(self.frames)
                                              if f["type"] == "inbox-item-added"]) >= count
                        and items, timeout=15, what=f"{count} inbox-item-added pushes")

    def close(self) -> None:
        self.ws.close()
        self._reader.join(5)


@pytest.fixture
def ws(embedded, served):
    embedded.worker.join()
    embedded.model = DemoModel()  # the server's own default pauses; tests stream at once
    sock = Socket(served, embedded.brain.identity.issue_token("acme", "ada"))
    yield sock
    sock.close()


def _chat(ws: Socket, text: str) -> str:
    pid = ws.request("session-create", title="demo", onDisconnect="KEEP_OPEN")["chatProcessId"]
    ws.request("process-steer", targetThinkProcessId=pid, content=text)
    return pid


def test_asked_for_approval_arthur_posts_one_and_reports_the_answer(ws):
    pid = _chat(ws, "Please ask me for approval")
    [item] = ws.added(1)
    assert (item["type"], item["status"], item["assignedToUserId"], item["originProcessId"]) \
        == ("APPROVAL", "PENDING", "ada", pid)
    ws.said("I put an item into your Inbox: APPROVAL.")
    listed = ws.request("inbox-list", status=["PENDING"])["items"]
    assert item["id"] in [i["id"] for i in listed]

    ws.request("inbox-answer", itemId=item["id"], outcome="DECIDED", value={"approved": True})
    assert ws.said("You approved") == \
        "You approved “Approve the demo deployment?”. (Offline demo model.)"


def test_every_kind_of_item_is_posted_valid_and_its_files_open(ws, served):
    _chat(ws, "show me every kind of inbox item")
    items = {i["type"]: i for i in ws.added(8)}
    assert sorted(items) == sorted(ALL_TYPES)
    for kind, item in items.items():
        stored = {k: v for k, v in item["payload"].items() if k != "url"}
        assert validate_payload(ItemType(kind), stored) == stored
        assert item["requiresAction"] is not kind.startswith("OUTPUT_")
    assert len(items["ORDERING"]["payload"]["items"]) == 4
    assert "```python" in items["OUTPUT_TEXT"]["body"]
    schema = items["STRUCTURE_EDIT"]["payload"]["schema"]["properties"]
    assert "pattern" in schema["name"] and schema["replicas"]["minimum"] == 1
    for kind, body, mime in [("OUTPUT_IMAGE", demo_png(), "image/png"),
                             ("OUTPUT_DOCUMENT", DOCUMENT_MARKDOWN.encode(), "text/markdown")]:
        url = urlsplit(items[kind]["payload"]["url"])
        with urllib.request.urlopen(f"http://{served}{url.path}?{url.query}", timeout=5) as got:
            assert (got.read(), got.headers["Content-Type"].split(";")[0]) == (body, mime)
    assert items["OUTPUT_DOCUMENT"]["payload"]["sizeBytes"] == len(DOCUMENT_MARKDOWN.encode())
    ws.said(f"I put 8 items into your Inbox: {', '.join(ALL_TYPES)}.")

    # An invalid structure is refused; the answers that fit come back as chat lines.
    refused = ws.request("inbox-answer", expect="error", itemId=items["STRUCTURE_EDIT"]["id"],
                         outcome="DECIDED", value={"value": {"name": "demo", "replicas": 0}})
    assert refused["code"] == "invalid_input" and "replicas" in refused["message"], refused
    answers = [("APPROVAL", {"approved": False}, "You declined “Approve the demo deployment?”."),
               ("DECISION", {"chosen": "postgres", "freeText": "for production"},
                "You chose postgres for “Which database should the demo use?” and wrote: for "
                "production."),
               ("FEEDBACK", {"text": "Clear."}, "Your feedback on “How did the demo feel?”: "
                                                "Clear."),
               ("ORDERING", {"orderedIds": ["docs", "tests", "announce", "release"]},
                "Your order for “Put the launch tasks in order”: docs, tests, announce, "
                "release."),
               ("STRUCTURE_EDIT", {"value": {"name": "web-shop", "replicas": 3}},
                "You set “Edit the demo service settings” to name web-shop, replicas 3.")]
    for kind, value, line in answers:
        ws.request("inbox-answer", itemId=items[kind]["id"], outcome="DECIDED", value=value)
        ws.said(line)
    for kind in ("OUTPUT_TEXT", "OUTPUT_IMAGE", "OUTPUT_DOCUMENT"):
        ws.request("inbox-dismiss", itemId=items[kind]["id"])


def test_a_demo_answer_streams_as_many_token_events(ws, embedded):
    # Paced like the server's default demo (VANCETOPE_DEMO_TOKEN_DELAY), slower than the
    # worker's token flush (VANCETOPE_TOKEN_FLUSH_MS): words arrive as they are streamed.
    embedded.model = DemoModel(token_delay=0.015)
    pid = _chat(ws, "hello")
    said = ws.said("You said: “hello”.")
    tokens = [e["data"]["data"]["text"] for e in list(ws.frames) if e["type"] == "event"
              and e["data"]["type"] == "token" and e["data"]["processId"] == pid]
    assert len(tokens) > 10 and "".join(tokens) == said
