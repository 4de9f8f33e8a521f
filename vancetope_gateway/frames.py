"""WebSocket frames: one envelope ``{type, id, replyTo, data}``, a pydantic model per data shape.

Each request type is declared once, with its handler, in ``vancetope_gateway.handlers``;
``REQUESTS`` (each client frame type's data model) and ``REPLIES`` (its reply's) are read
from there. ``PUSHES`` lists what the server sends unasked. ``docs/protocol.md`` and
``docs/schemas/*.json`` are generated from these (``vancetope schemas``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from vancetope_brain.models.base import Wire
from vancetope_brain.models.knowledge import DocumentView
from vancetope_gateway.handlers import FRAMES
from vancetope_gateway.handlers.inbox import InboxPendingSummary

NotifyMode = Literal["all", "critical-only", "none"]


class Envelope(Wire):
    """Every frame, both directions. ``id`` is set on requests; replies carry ``replyTo``."""

    type: str = Field(min_length=1, max_length=64)
    id: str | None = Field(default=None, min_length=1, max_length=128)
    reply_to: str | None = Field(default=None, max_length=128)
    data: dict[str, Any] = Field(default_factory=dict)


class ErrorData(Wire):
    """The data of an ``error`` frame; ``code`` is stable, ``message`` is for people."""

    code: str
    message: str


REQUESTS: dict[str, type[Wire]] = {name: f.request for name, f in FRAMES.items()}
REPLIES: dict[str, type[Wire]] = {name: f.reply for name, f in FRAMES.items()}


# ── pushes (server → client) ────────────────────────────────────────────────

class Welcome(Wire):
    """First frame on every connection: who you are, the server, your sessions at a glance.
    ``notifyMode`` echoes the ``?notifyMode=`` of the connect URL (default ``all``);
    ``sessions`` counts your sessions of each status up to 1,000 (1,000 reads "at least")."""

    server_version: str
    tenant_id: str
    user_id: str
    llm: str
    max_frame_bytes: int
    notify_mode: NotifyMode
    sessions: dict[str, int]


class EventData(Wire):
    """A session stream event (see ``vancetope_brain.events.StreamEvent``)."""

    seq: int
    session_id: str
    process_id: str
    type: str
    data: dict[str, Any]
    at: str


class EventsGap(Wire):
    """Events this client should have had are gone (no longer kept, or lost with the log, e.g.
    a Redis restart) — on resume or live: reload chat history, then go on with the events that
    follow. ``firstAvailable``: the seq of the next event, or 0 when the log holds nothing now."""

    session_id: str
    requested_after: int
    first_available: int


class ToolCall(Wire):
    """A process asks this connection to run one of its registered tools; answer with
    ``tool-result`` within ``timeoutSec``."""

    tool_call_id: str
    tool_name: str
    params: dict[str, Any]
    timeout_sec: float


class InboxPush(Wire):
    """``inbox-item-added`` (a new item for you, or one delegated to you) and
    ``inbox-item-updated`` (status or assignment changed). ``notifyMode`` critical-only
    passes only CRITICAL additions; none passes no additions."""

    item: dict[str, Any]


class DocumentPush(Wire):
    """``document-updated`` (a knowledge document you added changed status: PENDING,
    INDEXING, READY or FAILED) and ``document-deleted``, on every connection of yours."""

    document: DocumentView


PUSHES: dict[str, type[Wire]] = {
    "welcome": Welcome,
    "inbox-pending-summary": InboxPendingSummary,
    "inbox-item-added": InboxPush,
    "inbox-item-updated": InboxPush,
    "document-updated": DocumentPush,
    "document-deleted": DocumentPush,
    "tool-call": ToolCall,
    "event": EventData,
    "events-gap": EventsGap,
    "error": ErrorData,
}
