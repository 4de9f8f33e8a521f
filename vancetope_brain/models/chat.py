"""ChatMessage: the permanent, user-visible record of a process's conversation."""

from __future__ import annotations

import functools
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Document, utcnow
from vancetope_brain.models.knowledge import Citation

MAX_SOURCES = 20
"""Sources one chat line keeps (``rag.topK`` is at most 20)."""


class ChatRole(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    EVENT = "event"
    TOOL = "tool"
    ERROR = "error"


class ChatMessage(Document):
    """One line of a process chat. ``seq`` orders a process's chat (assigned at commit).

    ``source_message_id`` names the inbox message the line came from, if any;
    the store keeps (process, source_message_id, role) unique so a repeated
    commit cannot write a line twice. ``sources``: the passages of the project's documents
    a reply used (arthur-engine §3.8 item 4), shown under it; data, never markup. (Added
    in version 1 with an empty default: older records load as lines without sources.)
    """

    id: str
    tenant_id: str
    session_id: str
    process_id: str
    seq: int = 0
    role: ChatRole
    content: str
    source_message_id: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    sources: list[Citation] = Field(default_factory=list, max_length=MAX_SOURCES)
    created_at: datetime = Field(default_factory=utcnow)

    @functools.cached_property
    def derived(self) -> dict[str, Any]:
        """What readers computed from this committed line, kept with this object (never
        stored, dumped or compared): a committed line never changes, so whatever holds the
        object (a worker's chat cache) holds with it what each turn would compute again,
        and lets go of both together."""
        return {}
