"""A session's title, as a session list shows it: given at creation or by ``session-rename``,
else taken from the user's first message, as chat UIs title a conversation. Pure functions.
"""

from __future__ import annotations

TITLE_MAX = 200
"""The longest title a client may give (``session-create``, ``session-rename``)."""
DERIVED_MAX = 60
"""The longest title taken from a message: a line of a session list."""
_TRIMMED = " ,.;:!?-–—"
"""What a title cut short does not end in before its ellipsis."""


def one_line(text: str) -> str:
    """``text`` on one line: every run of whitespace (line breaks too) one space, trimmed."""
    return " ".join(text.split())


def title_from_message(text: str, limit: int = DERIVED_MAX) -> str:
    """A title from the user's first message: on one line and at most ``limit`` characters,
    a longer one cut at its last word boundary with an ellipsis (mid-word only when that
    boundary would keep less than half of it: a long first word, a pasted URL)."""
    line = one_line(text)
    if len(line) <= limit:
        return line
    cut = line[:limit - 1]
    boundary = cut.rfind(" ")
    if boundary >= limit // 2:
        cut = cut[:boundary]
    return (cut.rstrip(_TRIMMED) or cut) + "…"
