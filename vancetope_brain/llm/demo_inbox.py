"""The offline demo model's Inbox tour: phrases that make the asking process post Inbox
items through the real ``inbox_post`` tool, and the chat line that reports each answer.

``PHRASES`` maps what a user may say to the item types posted: one type ("ask me for
approval") or all eight ("show me every kind of inbox item"). The items are fixed
(``demo_items``), so a browser test can render and answer each one; the image is a PNG
drawn here with ``zlib`` and ``struct`` and the document a Markdown file, both sent inline
as the tool's ``attachment``. When an ``<inbox-answer>`` comes back, ``answer_report`` says
in the chat what the user answered ("You approved …", "You declined …").
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from typing import Any
from xml.sax.saxutils import unescape

from vancetope_brain.llm.base import LlmMessage, ToolCall

CALL_PREFIX = "demo_inbox_"
"""Tool call ids of the demo's posts: ``demo_inbox_<TYPE>``."""
DEMO_TAG = "demo"

ALL_TYPES = ("APPROVAL", "DECISION", "FEEDBACK", "ORDERING", "STRUCTURE_EDIT", "OUTPUT_TEXT",
             "OUTPUT_IMAGE", "OUTPUT_DOCUMENT")

PHRASES: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(r"\b(every|each|all)( eight| 8)? (kinds?|types?|sorts?) of inbox items?\b"
                r"|\bevery inbox item type\b", re.IGNORECASE), ALL_TYPES),
    (re.compile(r"\bask (me )?for (my )?(approval|sign[- ]?off)\b|\bask me to approve\b",
                re.IGNORECASE), ("APPROVAL",)),
    (re.compile(r"\bask me (for a decision|to decide|to choose)\b", re.IGNORECASE),
     ("DECISION",)),
    (re.compile(r"\bask me for feedback\b", re.IGNORECASE), ("FEEDBACK",)),
    (re.compile(r"\bask me to (order|rank|prioriti[sz]e)\b", re.IGNORECASE), ("ORDERING",)),
    (re.compile(r"\bask me to edit\b", re.IGNORECASE), ("STRUCTURE_EDIT",)),
    (re.compile(r"\b(show|send) me an? (image|picture)\b", re.IGNORECASE), ("OUTPUT_IMAGE",)),
    (re.compile(r"\b(show|send) me an? (document|file)\b", re.IGNORECASE),
     ("OUTPUT_DOCUMENT",)),
    (re.compile(r"\b(show|send) me an? (text|markdown)( item| output)?\b", re.IGNORECASE),
     ("OUTPUT_TEXT",)),
]
"""A user message → the item types the demo posts for it; the first match wins, and these
are tried before the delegation keywords (so "ask me for approval" is no vogon strategy)."""

LOW_PRIORITY = re.compile(r"\blow[- ]priority\b", re.IGNORECASE)
"""Said as well ("ask me for approval, low priority"): the items are LOW, so one with a
default is answered with it at once (``resolvedBy: AUTO_DEFAULT``), which the user can
revoke — the path of user-interaction.txt §7 to try in a client."""

SERVICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z][a-z0-9-]{2,30}$",
                 "description": "lower-case letters, digits and dashes"},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["name", "replicas"],
    "additionalProperties": False,
}
"""The STRUCTURE_EDIT item's schema: one patterned string, one bounded integer."""

REPORT_MARKDOWN = """\
## What the demo can show

The offline demo model did no real work, but the **Inbox** is real:

- asks: approval, decision, feedback, ordering, structure edit
- outputs: text like this one, an image, a document

```python
from vancetope_brain.llm.demo import DemoModel

DemoModel().complete([])  # the offline answer
```
"""

DOCUMENT_MARKDOWN = """\
# Vancetope demo document

This file was written by Vancetope's offline demo model and stored as an Inbox
attachment; its link is signed and expires.

| Engine | Ask the demo to … |
|---|---|
| marvin | research a question |
| vogon | run the strategy for a text |
| zaphod | weigh the pros and cons of a choice |
| ford | analyze something |
"""


def demo_png(width: int = 64, height: int = 40) -> bytes:
    """A small PNG, the same every time: a blue-to-teal gradient with a white V."""
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter type: none
        arm = (height - 1 - y) * (width / 4) / (height - 1)  # the V's half-width on this row
        for x in range(width):
            if abs(abs(x - width / 2) - arm) < 1.5:
                rows += b"\xff\xff\xff"
            else:
                rows += bytes((20, 60 + 120 * x // width, 160 + 60 * y // height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b""))


def demo_items() -> dict[str, dict[str, Any]]:
    """The ``inbox_post`` arguments of the demo's item of each type."""
    return {
        "APPROVAL": {
            "title": "Approve the demo deployment?",
            "body": "The offline demo model asks for your approval. Approve or decline; I "
                    "will say in the chat which you chose.",
            "payload": {"default": "no"}},
        "DECISION": {
            "title": "Which database should the demo use?", "criticality": "CRITICAL",
            "body": "Pick one, or write your own answer.",
            "payload": {"options": [
                {"value": "sqlite", "label": "SQLite", "description": "one file, no server"},
                {"value": "postgres", "label": "PostgreSQL",
                 "description": "a server, for many users"},
                {"value": "mongodb", "label": "MongoDB", "description": "documents"}],
                "allowFreeText": True, "default": "sqlite"}},
        "FEEDBACK": {
            "title": "How did the demo feel?", "criticality": "LOW",
            "body": "A sentence or two is plenty.",
            "payload": {"placeholder": "What worked, what did not?", "maxLength": 500}},
        "ORDERING": {
            "title": "Put the launch tasks in order",
            "body": "Drag the most important task to the top.",
            "payload": {"items": [{"id": "tests", "label": "Finish the tests"},
                                  {"id": "docs", "label": "Write the docs"},
                                  {"id": "release", "label": "Cut the release"},
                                  {"id": "announce", "label": "Announce it"}]}},
        "STRUCTURE_EDIT": {
            "title": "Edit the demo service settings",
            "body": "`name`: 3–31 lower-case letters, digits or dashes, starting with a "
                    "letter; `replicas`: 1 to 10.",
            "payload": {"schema": SERVICE_SCHEMA,
                        "value": {"name": "demo-service", "replicas": 2}}},
        "OUTPUT_TEXT": {
            "title": "Demo report", "body": REPORT_MARKDOWN, "payload": {"format": "markdown"}},
        "OUTPUT_IMAGE": {
            "title": "Demo image",
            "payload": {"caption": "A PNG the offline demo model drew"},
            "attachment": {"filename": "vancetope-demo.png", "mime_type": "image/png",
                           "content_base64": base64.b64encode(demo_png()).decode()}},
        "OUTPUT_DOCUMENT": {
            "title": "Demo document",
            "body": "A Markdown file to download.",
            "attachment": {"filename": "vancetope-demo.md", "mime_type": "text/markdown",
                           "content": DOCUMENT_MARKDOWN}},
    }


def inbox_calls(text: str) -> tuple[ToolCall, ...]:
    """The ``inbox_post`` calls a user message asks for; empty when it asks for none."""
    types = next((kinds for pattern, kinds in PHRASES if pattern.search(text)), ())
    items = demo_items()
    low = {"criticality": "LOW"} if LOW_PRIORITY.search(text) else {}
    return tuple(ToolCall(f"{CALL_PREFIX}{kind}", "inbox_post", json.dumps(
        {"type": kind, "tags": [DEMO_TAG], **items[kind], **low})) for kind in types)


def posted_report(messages: list[LlmMessage]) -> str | None:
    """After the demo's posts: which items are in the Inbox (or why not); None when the last
    messages are not the results of the demo's posts."""
    results = []
    for message in reversed(messages):
        call_id = message.tool_call_id or ""
        if message.role != "tool" or not call_id.startswith(CALL_PREFIX):
            break
        results.append((call_id.removeprefix(CALL_PREFIX), message.content))
    if not results:
        return None
    posted, failed, auto = [], [], []
    for kind, content in reversed(results):
        try:
            body = json.loads(content)
        except ValueError:
            body = {"error": content}
        if "result" in body:
            posted.append(kind)
            if (body["result"] or {}).get("resolvedBy") == "AUTO_DEFAULT":
                auto.append(kind)
        else:
            failed.append(f"{kind}: {body.get('error')}")
    asks = [k for k in posted if not k.startswith("OUTPUT_") and k not in auto]
    text = f"I put {_count(posted)} into your Inbox: {', '.join(posted)}. " if posted else ""
    if auto:
        text += (f"Being LOW with a default, {', '.join(auto)} {'was' if len(auto) == 1 else 'were'}"
                 " answered with the default at once (you can revoke that in the web "
                 "client's Inbox, which opens the question again). ")
    if asks:
        them = "it" if len(asks) == 1 else "them"
        text += (f"Answer {them} there — in the terminal `/inbox` lists {them} and `/answer "
                 "ITEM VALUE` answers one (an APPROVAL with yes or no), or use the web "
                 "client's Inbox — and I will tell you here what you answered. ")
    if failed:
        text += f"Posting failed for {'; '.join(failed)}. "
    return text + "(Offline demo model.)"


def _count(kinds: list[str]) -> str:
    return "an item" if len(kinds) == 1 else f"{len(kinds)} items"


_ANSWER = re.compile(r"<inbox-answer itemId=(\"[^\"]*\"|'[^']*') type=\"([A-Z_]+)\" "
                     r"title=(\"[^\"]*\"|'[^']*')>(.*?)</inbox-answer>", re.DOTALL)
_AUTO = "system:auto-default"


def answer_report(messages: list[LlmMessage]) -> str | None:
    """What the user answered, for each ``<inbox-answer>`` since the model last spoke; None
    unless the last message is one."""
    if not messages or not _ANSWER.search(messages[-1].content):
        return None
    lines: list[str] = []
    for message in messages:
        if message.role == "assistant":
            lines = []
        elif message.role == "user":
            lines += [_said(kind, _attr(title), unescape(body))
                      for _, kind, title, body in _ANSWER.findall(message.content)]
    return " ".join(lines) + " (Offline demo model.)"


def _attr(quoted: str) -> str:
    return unescape(quoted[1:-1], {"&quot;": '"', "&apos;": "'"})


def _said(kind: str, title: str, body: str) -> str:
    """One answer in words."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return f"You dismissed “{title}” without an answer."
    if answer.get("outcome") == "INSUFFICIENT_INFO":
        return f"You lack information to answer “{title}”: {answer.get('reason')}"
    if answer.get("outcome") == "UNDECIDABLE":
        return f"You cannot decide “{title}”: {answer.get('reason')}"
    value = answer.get("value") or {}
    auto = " (answered with its default)" if answer.get("answeredBy") == _AUTO else ""
    if kind == "APPROVAL":
        return f"You {'approved' if value.get('approved') else 'declined'} “{title}”{auto}."
    if kind == "DECISION":
        said = f"You chose {value['chosen']} for “{title}”" if value.get("chosen") \
            else f"You answered “{title}” in your own words"
        free = f" and wrote: {value['freeText']}" if value.get("freeText") else ""
        return f"{said}{free}{auto}."
    if kind == "FEEDBACK":
        return f"Your feedback on “{title}”{auto}: {value.get('text', '')}"
    if kind == "ORDERING":
        return f"Your order for “{title}”{auto}: {', '.join(value.get('orderedIds', []))}."
    return f"You set “{title}”{auto} to {_fields(value.get('value'))}."


def _fields(value: object) -> str:
    """A structure's value as a person reads it: ``name web-shop, replicas 3``."""
    if isinstance(value, dict):
        return ", ".join(f"{key} {_fields(field)}" for key, field in value.items()) or "nothing"
    if isinstance(value, list):
        return "[" + ", ".join(_fields(entry) for entry in value) + "]"
    return str(value)
