"""The demo model's answers from the project's documents: it reads the ``<rag-context>`` block
Arthur's autoInject put into its own system prompt (``engines/rag.py``) and, asked about
the documents ("what do my documents say about X"), quotes the passages it was given with
their sources — or says that the search found nothing. A lexical search finds words, not
meanings; the answer says so.
"""

from __future__ import annotations

import re
from xml.sax.saxutils import unescape

from vancetope_brain.llm.base import LlmMessage

ASKS_DOCUMENTS = re.compile(r"\b(?:my|our|your|the|these|project'?s?) (?:documents|docs|files)\b",
                            re.IGNORECASE)
"""A user message that asks about the documents ("what do my documents say about …")."""
_BLOCK = re.compile(r"<rag-context>(.*?)</rag-context>", re.DOTALL)
_PASSAGE = re.compile(r"<passage((?:\s+[\w-]+=(?:\"[^\"]*\"|'[^']*'))*)>(.*?)</passage>",
                      re.DOTALL)
_ATTRIBUTE = re.compile(r"([\w-]+)=(\"[^\"]*\"|'[^']*')")
_EXCERPT = 220
_SHOWN = 3


def passages(system: str) -> list[tuple[dict[str, str], str]]:
    """The passages of the ``<rag-context>`` block in ``system`` (attributes, text), both
    unescaped; none without a block."""
    block = _BLOCK.search(system)
    if block is None:
        return []
    return [({name: _unquote(value) for name, value in _ATTRIBUTE.findall(attributes)},
             unescape(text))
            for attributes, text in _PASSAGE.findall(block.group(1))]


def documents_answer(messages: list[LlmMessage]) -> str | None:
    """The answer to a last user message that asks about the documents, from the passages
    the system prompt holds; None when it does not ask about them."""
    last = messages[-1] if messages else None
    if last is None or last.role != "user" or not ASKS_DOCUMENTS.search(last.content):
        return None
    system = messages[0].content if messages[0].role == "system" else ""
    found = passages(system)
    if not found:
        return ("I searched this project's documents and found no passage on that. (Offline "
                "demo model: the search matches words, not meanings — try a word the "
                "documents use.)")
    quoted = "\n".join(f"- “{_excerpt(text)}” — {source(attrs)}"
                       for attrs, text in found[:_SHOWN])
    more = f"\n\n…and {len(found) - _SHOWN} more passages." if len(found) > _SHOWN else ""
    return (f"Your documents say (offline demo model: I quote the passages the search found, "
            f"I do not understand them):\n\n{quoted}{more}")


def source(attrs: dict[str, str]) -> str:
    """A passage's source as one line: ``name › section, lines 3-9`` (or ``p. 4``)."""
    where = attrs.get("document", "?")
    if attrs.get("section"):
        where += f" › {attrs['section']}"
    if attrs.get("page"):
        where += f", p. {attrs['page']}"
    elif attrs.get("lines"):
        where += f", lines {attrs['lines']}"
    return where


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT else flat[:_EXCERPT - 1].rsplit(" ", 1)[0] + " …"


def _unquote(quoted: str) -> str:
    """An attribute's value as ``quoteattr`` wrote it (in either quotes), unescaped."""
    return unescape(quoted[1:-1], {"&quot;": '"', "&#10;": "\n", "&#13;": "\r", "&#9;": "\t"})
