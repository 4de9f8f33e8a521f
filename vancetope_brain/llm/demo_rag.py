"""The demo model's answers from the project's documents and memory: it reads the
``<rag-context>`` block Arthur's autoInject put into its own system prompt
(``engines/rag.py``) and, asked about the documents ("what do my documents say about X"),
quotes the passages it was given with their sources — or says that the search found
nothing. A lexical search finds words, not meanings; the answer says so. Asked what it
remembers ("what do you remember", "what did earlier work find"), it lists the entries of
the ``<project-memory>`` block (``engines/memory_summary.py``) with their ids.
"""

from __future__ import annotations

import re
from xml.sax.saxutils import unescape

from vancetope_brain.llm.base import LlmMessage

ASKS_DOCUMENTS = re.compile(r"\b(?:my|our|your|the|these|project'?s?) (?:documents|docs|files)\b",
                            re.IGNORECASE)
"""A user message that asks about the documents ("what do my documents say about …")."""
ASKS_MEMORY = re.compile(r"\bwhat (?:do|did) you remember\b|\b(?:earlier|previous|past) "
                         r"(?:work|runs?|sessions?)\b|\bproject'?s? memory\b", re.IGNORECASE)
"""A user message that asks what the project's memory holds ("what do you remember")."""
_ATTRIBUTE = re.compile(r"([\w-]+)=(\"[^\"]*\"|'[^']*')")
_EXCERPT = 220
_MARKDOWN = re.compile(r"([\\`*_\[\]<>&~])")
"""What Markdown (and the HTML in it) could read as markup in a quoted text."""
_SHOWN = 3


def passages(system: str) -> list[tuple[dict[str, str], str]]:
    """The passages of the ``<rag-context>`` block in ``system`` (attributes, text), both
    unescaped; none without a block."""
    return _items(system, "rag-context", "passage")


def _items(system: str, block: str, item: str) -> list[tuple[dict[str, str], str]]:
    """The ``item`` elements of the first ``block`` element in ``system`` (attributes,
    text), both unescaped; none without the block."""
    found = re.search(f"<{block}>(.*?)</{block}>", system, re.DOTALL)
    if found is None:
        return []
    element = re.compile(f"<{item}((?:\\s+[\\w-]+=(?:\"[^\"]*\"|'[^']*'))*)>(.*?)</{item}>",
                         re.DOTALL)
    return [({name: _unquote(value) for name, value in _ATTRIBUTE.findall(attributes)},
             unescape(text))
            for attributes, text in element.findall(found.group(1))]


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
    quoted = "\n".join(f"- “{_literal(_excerpt(text))}” — {_literal(source(attrs))}"
                       for attrs, text in found[:_SHOWN])
    more = f"\n\n…and {len(found) - _SHOWN} more passages." if len(found) > _SHOWN else ""
    return (f"Your documents say (offline demo model: I quote the passages the search found, "
            f"I do not understand them):\n\n{quoted}{more}")


def memory_answer(messages: list[LlmMessage]) -> str | None:
    """The answer to a last user message that asks what the project's memory holds, from
    the entries the system prompt holds; None when it does not ask."""
    last = messages[-1] if messages else None
    if last is None or last.role != "user" or not ASKS_MEMORY.search(last.content):
        return None
    entries = _items(messages[0].content if messages[0].role == "system" else "",
                     "project-memory", "entry")
    if not entries:
        return ("This project's memory holds nothing yet. (When a worker such as marvin "
                "finishes, its report is recorded there, and later sessions see it.)")
    listed = "\n".join(f"- {attrs.get('kind', 'entry')} {attrs.get('id', '?')} of "
                       f"{attrs.get('recorded', '?')}: “{_literal(_excerpt(text))}”"
                       for attrs, text in entries[:_SHOWN])
    more = f"\n\n…and {len(entries) - _SHOWN} more entries." if len(entries) > _SHOWN else ""
    return (f"From this project's memory (offline demo model: I list the entries I was "
            f"given, I do not understand them):\n\n{listed}{more}")


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


def _literal(text: str) -> str:
    """``text`` as Markdown that shows it as it is: a document's words are data, so nothing
    in them becomes a link, an image, emphasis, code or HTML in the reply."""
    return _MARKDOWN.sub(r"\\\1", text)


def _unquote(quoted: str) -> str:
    """An attribute's value as ``quoteattr`` wrote it (in either quotes), unescaped."""
    return unescape(quoted[1:-1], {"&quot;": '"', "&#10;": "\n", "&#13;": "\r", "&#9;": "\t"})
