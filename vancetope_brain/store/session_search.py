"""The session search port: a user finds their own conversations by the words of a session's
title or of a line of its chat (issue 29 item 7).

What is searched: the user's sessions that are not CLOSED (those a client can open: closing
a session archives it out of the search), their titles and the ``user`` and ``assistant``
lines of their chat process (the conversation a client shows; tool calls, events and errors
are not). A hit holds every word of the query (``documents.search_terms``: lowercased,
Latin diacritics folded, as SQLite FTS5's ``unicode61 remove_diacritics 2`` tokenizer
compares them; nothing typed is syntax). Both adapters share the rest here: which sessions,
the hits and their snippets, and their order.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterable, Sequence

from vancetope_brain.models import ChatMessage, ChatRole, Session, SessionStatus
from vancetope_brain.models.conversation import (
    MAX_HITS,
    SNIPPET_CHARS,
    SNIPPET_LEAD,
    ConversationHit,
    SnippetPart,
)
from vancetope_brain.store.backend import Port
from vancetope_brain.store.documents import index_terms

SEARCHED_ROLES = (ChatRole.USER, ChatRole.ASSISTANT)
"""The chat lines a search reads: what the user said and what Arthur answered."""

_TOKEN = re.compile(r"[^\W_]+")
"""A run of letters and digits, as ``index_terms`` cuts a text (kept here for positions)."""


class SessionSearch(Port):
    """Lexical search over one user's own sessions: their titles and their chat lines.

    One read; every hit is a session of ``user_id`` in ``tenant_id`` (never another user's
    of the same tenant), found as the module docstring says. Order: title hits first (the
    most recently changed session first), then line hits, newest line first (commit order);
    at most ``limit`` in all (capped at ``MAX_HITS``). A query without words finds nothing.
    The index follows the chat as lines are committed and purged, titles as they are set,
    and sessions as they close, with no call of this port (each adapter says how).
    """

    @abstractmethod
    def search_sessions(self, tenant_id: str, user_id: str, query: str, *,
                        limit: int = 20) -> list[ConversationHit]:
        """The user's sessions whose title, or one of whose chat lines, holds every word of
        ``query`` (free text), as ``ConversationHit``s with snippets."""


def searched(sessions: Iterable[Session]) -> dict[str, Session]:
    """The sessions a search reads, by their chat process id (the not CLOSED ones of a
    user; a session without a chat process has only its title searched, keyed by its id)."""
    return {session.chat_process_id or session.id: session for session in sessions
            if session.status is not SessionStatus.CLOSED and not session.system}


def capped(limit: int) -> int:
    """A requested number of hits, within 0..``MAX_HITS``."""
    return max(0, min(limit, MAX_HITS))


def title_hits(sessions: Iterable[Session], wanted: Sequence[str]) -> list[ConversationHit]:
    """The sessions whose title holds every word of ``wanted``, most recently changed
    first."""
    found = [s for s in sessions if wanted and set(wanted) <= set(index_terms(s.title))]
    found.sort(key=lambda s: (s.updated_at, s.id), reverse=True)
    return [ConversationHit(session_id=s.id, title=s.title, snippet=snippet(s.title, wanted),
                            at=s.updated_at) for s in found]


def line_hit(session: Session, line: ChatMessage, wanted: Sequence[str]) -> ConversationHit:
    """The hit of one chat line of ``session``."""
    return ConversationHit(session_id=session.id, title=session.title,
                           process_id=line.process_id, seq=line.seq, role=line.role.value,
                           snippet=snippet(line.content, wanted), at=line.created_at)


def holds_all(text: str, wanted: Sequence[str]) -> bool:
    """Whether ``text`` holds every word of ``wanted`` (what FTS5 matches for them)."""
    return bool(wanted) and set(wanted) <= set(index_terms(text))


def snippet(text: str, wanted: Sequence[str]) -> list[SnippetPart]:
    """At most ``SNIPPET_CHARS`` of ``text`` from a little before its first word of
    ``wanted``, in parts, the words of ``wanted`` marked; a ``…`` part where it was cut."""
    terms = set(wanted)
    found = [m for m in _TOKEN.finditer(text) if terms & set(index_terms(m.group()))]
    start = 0
    if found and found[0].start() > SNIPPET_LEAD:
        start = found[0].start() - SNIPPET_LEAD
        space = text.find(" ", start, found[0].start())
        start = space + 1 if space >= 0 else start
    end = min(len(text), start + SNIPPET_CHARS)
    parts = [SnippetPart(text="…")] if start else []
    at = start
    for m in found:
        if m.start() < start or m.end() > end:
            continue
        if m.start() > at:
            parts.append(SnippetPart(text=text[at:m.start()]))
        parts.append(SnippetPart(text=m.group(), match=True))
        at = m.end()
    if end > at:
        parts.append(SnippetPart(text=text[at:end]))
    if end < len(text):
        parts.append(SnippetPart(text="…"))
    return parts
