"""The offline demo model's Inbox phrases, its reports of answers, its streaming pause, and
``inbox_post``'s inline attachment (the path the demo's image and document take)."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import pytest

from vancetope_brain.config import Config
from vancetope_brain.engines.prompting import event_text
from vancetope_brain.errors import ToolError
from vancetope_brain.llm import LlmMessage, ToolCall, ToolSpec, demo
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.llm.demo_inbox import demo_png
from vancetope_brain.llm.profiles import DEFAULT, load_profiles
from vancetope_brain.models import InboxAnswer
from vancetope_brain.models.inbox import AnswerPayload, ItemType, Outcome
from vancetope_brain.tools import SERVER_TOOLS
from vancetope_brain.tools.process_tools import MAX_INLINE_ATTACHMENT_BYTES, inbox_post

ARTHUR = [ToolSpec(n, n) for n in ("process_create", "inbox_post", "respond")]


def _calls(text: str) -> list[tuple[str, str]]:
    reply = DemoModel().complete([LlmMessage("user", text)], tools=ARTHUR)
    return [(c.name, json.loads(c.arguments).get("type", "")) for c in reply.tool_calls]


@pytest.mark.parametrize(("text", "types"), [
    ("Please ask me for approval", ["APPROVAL"]),
    ("ask me to approve the budget", ["APPROVAL"]),
    ("Ask me for a decision", ["DECISION"]),
    ("ask me to rank the tasks", ["ORDERING"]),
    ("send me an image", ["OUTPUT_IMAGE"]),
    ("Show me every kind of inbox item", [t.value for t in ItemType]),
    ("show me all 8 types of inbox items", [t.value for t in ItemType]),
])
def test_inbox_phrases_post_items_through_inbox_post(text, types):
    assert _calls(text) == [("inbox_post", t) for t in types]


def test_low_priority_makes_the_items_low():
    reply = DemoModel().complete([LlmMessage("user", "ask me for approval, low priority")],
                                 tools=ARTHUR)
    posted = json.loads(reply.tool_calls[0].arguments)
    assert (posted["type"], posted["criticality"], posted["payload"]["default"]) == \
        ("APPROVAL", "LOW", "no")
    assert "criticality" not in json.loads(DemoModel().complete(
        [LlmMessage("user", "ask me for approval")], tools=ARTHUR).tool_calls[0].arguments)


def test_an_item_answered_with_its_default_is_reported_so():
    call = ToolCall("demo_inbox_APPROVAL", "inbox_post", "{}")
    result = {"result": {"itemId": "item_1", "status": "ANSWERED", "created": True,
                         "resolvedBy": "AUTO_DEFAULT"}}
    reply = DemoModel().complete([LlmMessage("user", "ask me for approval, low priority"),
                                  LlmMessage("assistant", "", tool_calls=(call,)),
                                  LlmMessage("tool", json.dumps(result),
                                             tool_call_id=call.id)], tools=ARTHUR)
    said = json.loads(reply.tool_calls[0].arguments)["message"]
    assert said.startswith("I put an item into your Inbox: APPROVAL. Being LOW with a "
                           "default, APPROVAL was answered with the default at once")
    assert "Answer it there" not in said


def test_without_inbox_post_or_with_other_words_the_demo_does_not_post():
    assert _calls("Review the release notes with approval") == [("process_create", "")]
    reply = DemoModel().complete([LlmMessage("user", "ask me for approval")],
                                 tools=[ToolSpec("respond", "respond")])
    assert [c.name for c in reply.tool_calls] == ["respond"]  # a worker without the tool


@pytest.mark.parametrize(("kind", "answer", "said"), [
    (ItemType.APPROVAL, AnswerPayload(outcome=Outcome.DECIDED, value={"approved": True},
                                      answered_by="ada"), "You approved “Go?”."),
    (ItemType.APPROVAL, AnswerPayload(outcome=Outcome.DECIDED, value={"approved": False},
                                      answered_by="system:auto-default"),
     "You declined “Go?” (answered with its default)."),
    (ItemType.DECISION, AnswerPayload(outcome=Outcome.UNDECIDABLE, reason="both <fine>",
                                      answered_by="ada"), "You cannot decide “Go?”: both <fine>"),
    (ItemType.FEEDBACK, None, "You dismissed “Go?” without an answer."),
])
def test_the_demo_reports_each_answer_in_words(kind, answer, said):
    line = event_text(InboxAnswer(inbox_item_id="item_1", item_type=kind, title="Go?",
                                  answer=answer))
    reply = DemoModel().complete([LlmMessage("user", line)], tools=ARTHUR)
    assert json.loads(reply.tool_calls[0].arguments)["message"] == \
        f"{said} (Offline demo model.)"


def test_the_demo_pauses_between_streamed_words_as_configured(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(demo.time, "sleep", slept.append)
    tokens: list[str] = []
    DemoModel(token_delay=0.02).complete([LlmMessage("user", "hi")], on_token=tokens.append)
    assert len(tokens) > 10 and slept == [0.02] * (len(tokens) - 1)
    assert load_profiles(Config.from_env({}))[DEFAULT].build(None).token_delay == 0.02
    served = Config.from_env({"VANCETOPE_DEMO_TOKEN_DELAY": "0"})
    assert load_profiles(served)[DEFAULT].build(None).token_delay == 0


def test_the_demo_png_is_a_valid_png():
    png = demo_png(8, 4)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    length, tag = struct.unpack(">I4s", png[8:16])
    assert (tag, struct.unpack(">II", png[16:24])) == (b"IHDR", (8, 4))
    crc = struct.unpack(">I", png[16 + length:20 + length])[0]
    assert crc == zlib.crc32(png[12:16 + length])


class _Inbox:
    """The Inbox of a process, as ``inbox_post`` uses it: files kept by key."""

    def __init__(self) -> None:
        self.posted: list[Any] = []
        self.files: dict[str, dict[str, Any]] = {}
        self.writes = 0

    def attach(self, data: bytes, filename: str, mime_type: str, *,
               key: str | None = None) -> dict[str, Any]:
        assert key is not None  # inbox_post's writes are idempotent
        if key not in self.files:
            self.writes += 1
            self.files[key] = {"id": f"att_{len(self.files):016x}", "filename": filename,
                               "mimeType": mime_type, "sizeBytes": len(data), "data": data}
        return self.files[key]

    def attachment(self, attachment_id: str) -> dict[str, Any]:
        return next(f for f in self.files.values() if f["id"] == attachment_id)

    def post(self, new: Any) -> tuple[Any, bool]:
        self.posted.append(new)
        raise ToolError("stop here")


class _Context:
    def __init__(self) -> None:
        self.box = _Inbox()

    def inbox(self) -> _Inbox:
        return self.box

    def running_call_key(self) -> None:  # called outside a journaled turn
        return None


DOCUMENT = {"filename": "r.md", "mime_type": "text/markdown", "content": "# hi"}


def test_inbox_post_stores_an_inline_attachment_and_names_it_in_the_payload():
    context = _Context()
    with pytest.raises(ToolError, match="stop here"):
        inbox_post(context, type="OUTPUT_DOCUMENT", title="t", payload={"filename": "x"},
                   attachment=DOCUMENT)
    [stored] = context.box.files.values()
    assert stored["data"] == b"# hi"
    assert context.box.posted[0].payload == {
        "attachmentId": "att_0000000000000000", "mimeType": "text/markdown",
        "filename": "r.md", "sizeBytes": 4}


def test_a_prepared_inbox_post_carries_a_reference_and_stores_the_file_once():
    """The call as announced, journaled and shown: the file stored, its bytes replaced by a
    short reference; preparing it again (a retried turn) and running it store nothing new."""
    context = _Context()
    png = base64.b64encode(demo_png()).decode()
    params = {"type": "OUTPUT_IMAGE", "title": "t",
              "attachment": {"filename": "p.png", "mime_type": "image/png",
                             "content_base64": png}}
    prepared = SERVER_TOOLS["inbox_post"].prepare(context, params)
    assert prepared["attachment"] == {"attachment_id": "att_0000000000000000",
                                      "filename": "p.png", "mime_type": "image/png",
                                      "size_bytes": len(demo_png())}
    assert png not in json.dumps(prepared)
    assert SERVER_TOOLS["inbox_post"].prepare(context, params) == prepared
    assert SERVER_TOOLS["inbox_post"].prepare(context, prepared) == prepared
    with pytest.raises(ToolError, match="stop here"):
        inbox_post(context, **prepared)
    assert context.box.writes == 1
    assert context.box.posted[0].payload == {"attachmentId": "att_0000000000000000",
                                             "mimeType": "image/png"}


BAD_ATTACHMENTS = [
    ("OUTPUT_TEXT", {"content": "x"}, "only OUTPUT_IMAGE and OUTPUT_DOCUMENT"),
    ("OUTPUT_IMAGE", {}, "exactly one of content"),
    ("OUTPUT_IMAGE", {"content": "x", "content_base64": "eA=="}, "exactly one of content"),
    ("OUTPUT_IMAGE", {"content_base64": "not base64!"}, "not valid base64"),
    ("OUTPUT_IMAGE", {"content_base64": base64.b64encode(
        b"x" * (MAX_INLINE_ATTACHMENT_BYTES + 1)).decode()}, "at most 131072 inline"),
]


@pytest.mark.parametrize(("kind", "attachment", "error"), BAD_ATTACHMENTS)
def test_inbox_post_refuses_a_bad_inline_attachment(kind, attachment, error):
    with pytest.raises(ToolError, match=error):
        inbox_post(_Context(), type=kind, title="t",
                   attachment={"filename": "f", "mime_type": "image/png", **attachment})


@pytest.mark.parametrize(("kind", "attachment", "error"), BAD_ATTACHMENTS)
def test_a_bad_inline_attachment_is_refused_when_prepared_without_its_bytes(
        kind, attachment, error):
    context = _Context()
    params = {"type": kind, "title": "t",
              "attachment": {"filename": "f", "mime_type": "image/png", **attachment}}
    prepared = SERVER_TOOLS["inbox_post"].prepare(context, params)
    assert prepared["attachment"].keys() == {"filename", "mime_type", "refused"}
    assert error in prepared["attachment"]["refused"] and not context.box.files
    with pytest.raises(ToolError, match=error):
        inbox_post(context, **prepared)
