"""``vancetope chat --find TEXT``: the user's own sessions whose title or chat holds every
word of TEXT (``session-search``), one numbered hit each — the session's title, when, and a
snippet with the words found highlighted — and, on a terminal, the choice of one to open
(``vancetope chat`` then resumes it, showing the line found). The snippets are the
conversation's text: they reach rich as ``Text`` parts (never parsed for markup), their
control characters made inert (``printable``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Console
from rich.text import Text

from vancetope_gateway.chat_view import printable

MATCH_STYLE = "bold black on yellow"
"""How a word found is shown in a snippet."""


def hit_text(number: int, hit: dict[str, Any]) -> Text:
    """One hit: ``number. title · when · role`` and, indented, its snippet."""
    when = datetime.fromisoformat(hit["at"]).astimezone().strftime("%Y-%m-%d %H:%M")
    where = "title" if hit["seq"] is None else f"{hit['role']}, line {hit['seq']}"
    text = Text(f"{number:>2}. ", style="bold") + Text(printable(hit["title"]) or "Untitled",
                                                       style="bold")
    text.append(f"  · {when} · {where}\n    ", style="dim")
    for part in hit["snippet"]:
        text.append(printable(part["text"]).replace("\n", " "),
                    style=MATCH_STYLE if part["match"] else "")
    return text


def show_hits(console: Console, query: str, hits: list[dict[str, Any]]) -> None:
    """Print the hits, numbered from 1 (or that nothing matched)."""
    if not hits:
        console.print(Text(f"(no session of yours holds every word of “{printable(query)}”)",
                           style="dim"))
        return
    for number, hit in enumerate(hits, start=1):
        console.print(hit_text(number, hit))


def pick(hits: list[dict[str, Any]], ask: Any = input) -> dict[str, Any] | None:
    """Ask which hit to open (its number; nothing: none); the hit, or None."""
    while True:
        answer = ask(f"Open which session? [1-{len(hits)}, Enter: none] ").strip()
        if not answer:
            return None
        if answer.isdigit() and 1 <= int(answer) <= len(hits):
            return hits[int(answer) - 1]
