"""Memory: the entries processes record (the spec's ``ThinkProcessMemoryEntry``, arthur-engine
§2.5 ``context.memory().recordTurn(...)``) and how they are searched (arthur-engine §2.2,
§3.8; think-engines §4).

An entry lives at one level of the scope chain (``MemoryScope``: process → session →
project → group → tenant) under that level's id; the process that recorded it, and where
that process ran, are kept with it. A reader asks for several scopes at once (the cascade,
innermost first, is the caller's order); each hit says its scope. Search is lexical: text
and tags are cut into terms by ``terms`` here, the same way on every backend, so no text
ever reaches a store as query syntax.

The spec names no kinds of entry; ``MemoryKind`` is ours. The caps below are the documented
limits (docs/configuration.md, "Memory").
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple, Self

from pydantic import Field, model_validator

from vancetope_brain.models.base import Document, Wire, new_id, utcnow

MAX_TEXT_CHARS = 8_000
"""Characters of an entry's text."""
MAX_TAGS = 16
"""Tags of one entry."""
TAG_CHARS = 64
"""Characters of one tag."""
SOURCE_CHARS = 512
"""Characters of an entry's ``source``."""
KEY_CHARS = 200
"""Characters of an idempotency key."""
MAX_ENTRIES_PER_SCOPE = 5_000
"""Entries one scope (one process, session, project, group or the tenant) holds; one more is
refused with ``memory_full`` and nothing is stored."""
MAX_RESULTS = 100
"""Entries one listing or search returns at most (a larger ``limit`` is lowered to it)."""
MAX_SCOPES = 8
"""Scopes one listing or search reads at once (the chain has five levels)."""
MAX_QUERY_TERMS = 32
"""Terms of a search query used (the first ones; the rest are ignored)."""
TERM_CHARS = 64
"""Longer runs of letters and digits (encoded blobs, hashes) are not terms."""

_TERM = re.compile(r"[^\W_]+")


class MemoryScope(StrEnum):
    """The level of the scope chain an entry lives at; its ``scope_id`` is that level's id
    (the tenant's own id for TENANT)."""

    PROCESS = "process"
    SESSION = "session"
    PROJECT = "project"
    GROUP = "group"
    TENANT = "tenant"


class MemoryKind(StrEnum):
    """TURN: what a turn of a process noted (``recordTurn``). NOTE: a free note (a tool's
    ``memory_record``). FACT, DECISION: a statement or a choice worth keeping. REPORT: a
    worker's result (marvin's aggregate, vogon's synthesis; a done event's ``report_id``).
    SUMMARY: a summary of other entries or of a conversation."""

    TURN = "turn"
    NOTE = "note"
    FACT = "fact"
    DECISION = "decision"
    REPORT = "report"
    SUMMARY = "summary"


class ScopeRef(NamedTuple):
    """One scope a reader asks for: a level and its id."""

    level: MemoryScope
    id: str


class MemoryEntry(Document):
    """One memory entry. ``process_id`` recorded it; ``project_id`` and ``session_id`` say
    where that process ran (``project_id`` is None only at TENANT scope, whose entries belong
    to no project). ``source`` says what produced the text (``"marvin:aggregate"``, a
    process id, a document citation). ``idempotency_key``: a second record of the same
    (tenant, process, key) stores nothing and returns the first, so a re-run turn does not
    record twice."""

    id: str = Field(default_factory=lambda: new_id("mem"))
    tenant_id: str
    scope: MemoryScope
    scope_id: str = Field(min_length=1)
    project_id: str | None = None
    session_id: str | None = None
    process_id: str
    kind: MemoryKind
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)
    source: str = Field(default="", max_length=SOURCE_CHARS)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=KEY_CHARS)
    created_at: datetime = Field(default_factory=utcnow)

    @model_validator(mode="after")
    def _scope_matches_where_it_ran(self) -> Self:
        if any(not tag or len(tag) > TAG_CHARS for tag in self.tags):
            raise ValueError(f"a tag has 1 to {TAG_CHARS} characters")
        own = {MemoryScope.PROCESS: self.process_id, MemoryScope.SESSION: self.session_id,
               MemoryScope.PROJECT: self.project_id,
               MemoryScope.TENANT: self.tenant_id}.get(self.scope, self.scope_id)
        if own != self.scope_id:
            raise ValueError(f"a {self.scope} entry's scopeId is its {self.scope} id")
        if (self.project_id is None) != (self.scope is MemoryScope.TENANT):
            raise ValueError("projectId is set unless the entry is at tenant scope")
        return self

    @property
    def scope_ref(self) -> ScopeRef:
        return ScopeRef(self.scope, self.scope_id)

    def indexed_terms(self) -> list[str]:
        """Every term of its text and tags, repeats kept (what a search counts)."""
        return terms(" ".join([self.text, *self.tags]))


class MemoryHit(Wire):
    """One entry a search found (its scope is the entry's). ``score`` is 0..1: the share of
    the query's best possible BM25 score the entry reaches, so a threshold means the same
    whatever the query's length."""

    entry: MemoryEntry
    score: float = Field(ge=0.0, le=1.0)


def terms(text: str) -> list[str]:
    """The terms of free text, in order with repeats: runs of letters and digits, NFKC-folded
    and case-folded; runs longer than ``TERM_CHARS`` are dropped. Everything else
    (punctuation, quotes, operators of any query language) only separates terms."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [term for term in _TERM.findall(folded) if len(term) <= TERM_CHARS]


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, first ones first, at most ``MAX_QUERY_TERMS``."""
    return list(dict.fromkeys(terms(text)))[:MAX_QUERY_TERMS]
