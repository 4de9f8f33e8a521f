"""What a search of a user's own conversations finds (``store.session_search``): a session
whose title, or a chat line of whose chat, holds every word asked, with a snippet that
marks the words found. The snippet is the user's and Arthur's text, data for clients to show
as text, never markup: its parts say which runs matched, so no client parses anything."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from vancetope_brain.models.base import Wire

MAX_QUERY_CHARS = 200
"""Characters of a ``session-search`` query at most."""
MAX_HITS = 50
"""Hits one search returns at most (``session-search``'s ``limit``, 20 unless asked)."""
SNIPPET_CHARS = 160
"""Characters of a line a hit shows at most, around its first match."""
SNIPPET_LEAD = 50
"""Characters of a snippet before its first match, at most."""


class SnippetPart(Wire):
    """A run of a snippet's text; ``match``: it is one of the words searched."""

    text: str
    match: bool = False


class ConversationHit(Wire):
    """A session of the user, found by its title (``seq`` None) or by one line of its chat
    (``processId`` the session's chat process, ``seq`` the line's). ``at``: when the line was
    written, or when the session last changed for a title hit."""

    session_id: str
    title: str
    process_id: str | None = None
    seq: int | None = None
    role: str | None = None
    snippet: list[SnippetPart] = Field(default_factory=list)
    at: datetime
