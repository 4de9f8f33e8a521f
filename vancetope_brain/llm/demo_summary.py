"""The demo model's chat summary. Asked to summarise a chat that passed its budget
(``engines/history.py``: a ``<chat-transcript>`` of ``<line role=… seq=…>`` lines, after the
``<previous-summary>`` if there is one), it answers deterministically with the points of the
previous summary and one short point per user and assistant line, the newest ``KEPT`` of
them — the first words of what was said, not a real summary, and it says so.
"""

from __future__ import annotations

import re
import textwrap
from xml.sax.saxutils import unescape

from vancetope_brain.llm.base import LlmMessage

KEPT = 12
"""Points a demo summary keeps (the newest): it stays small however long the chat grows."""
HEADER = ("Summary by the offline demo model (the first words of each earlier message, not a "
          "real summary):")
_TRANSCRIPT = re.compile(r"<chat-transcript>(.*?)</chat-transcript>", re.DOTALL)
_PREVIOUS = re.compile(r"<previous-summary>(.*?)</previous-summary>", re.DOTALL)
_LINE = re.compile(r"<line role=\"(user|assistant)\"[^>]*>(.*?)</line>", re.DOTALL)
_WHO = {"user": "the user said", "assistant": "the assistant answered"}
_POINT = 60


def summary_answer(messages: list[LlmMessage]) -> str | None:
    """The summary a summarising request asks for; None for any other request."""
    last = messages[-1] if messages else None
    block = _TRANSCRIPT.search(last.content) if last is not None and last.role == "user" \
        else None
    if last is None or block is None:
        return None
    previous = _PREVIOUS.search(last.content)
    points = [line for line in unescape(previous.group(1)).splitlines()
              if line.startswith("- ")] if previous else []
    points += [f"- {_WHO[role]} “{textwrap.shorten(unescape(text), _POINT, placeholder='…')}”"
               for role, text in _LINE.findall(block.group(1))]
    return "\n".join([HEADER, *points[-KEPT:]])
