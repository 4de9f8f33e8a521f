"""WebSocket frames: one envelope ``{type, id, replyTo, data}``, a pydantic model per data shape.

``REQUESTS`` maps each client frame type to its data model; ``PUSHES`` lists
what the server sends unasked. ``docs/protocol.md`` and
``docs/schemas/*.json`` are generated from these (``vancetope schemas``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Wire


class Envelope(Wire):
    """Every frame, both directions. ``id`` is set on requests; replies carry ``replyTo``."""

    type: str = Field(min_length=1, max_length=64)
    id: str | None = Field(default=None, max_length=128)
    reply_to: str | None = Field(default=None, max_length=128)
    data: dict[str, Any] = Field(default_factory=dict)


class ErrorData(Wire):
    """The data of an ``error`` frame; ``code`` is stable, ``message`` is for people."""

    code: str
    message: str


# ── requests (client → server); the reply has the same type and ``replyTo`` ──

class SessionCreate(Wire):
    """Create an interactive session with its chat process and bind this connection to it."""

    title: str = Field(default="", max_length=200)


class SessionResume(Wire):
    """Bind this connection to an existing session and replay the events after ``lastSeq``."""

    session_id: str = Field(max_length=64)
    last_seq: int = Field(default=0, ge=0)


class SessionList(Wire):
    """The caller's sessions."""


class ProcessSteer(Wire):
    """Send user input to a process of the bound session (arthur-engine §3.6 addressing)."""

    target_think_process_id: str = Field(max_length=64)
    content: str = Field(min_length=1, max_length=32_000)
    idempotency_key: str | None = Field(default=None, max_length=128)


class ChatHistory(Wire):
    """A page of a process's chat, oldest first; page backwards with ``beforeSeq``."""

    process_id: str = Field(max_length=64)
    before_seq: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=500)


class Ping(Wire):
    """Liveness check; the reply is an empty ``ping``."""


REQUESTS: dict[str, type[Wire]] = {
    "session-create": SessionCreate,
    "session-resume": SessionResume,
    "session-list": SessionList,
    "process-steer": ProcessSteer,
    "chat-history": ChatHistory,
    "ping": Ping,
}


# ── pushes (server → client) ────────────────────────────────────────────────

class Welcome(Wire):
    """First frame on every connection."""

    server_version: str
    tenant_id: str
    user_id: str
    llm: str
    max_frame_bytes: int


class EventData(Wire):
    """A session stream event (see ``vancetope_brain.events.StreamEvent``)."""

    seq: int
    session_id: str
    process_id: str
    type: str
    data: dict[str, Any]
    at: str


class EventsGap(Wire):
    """Events the client asked for are no longer kept; reload chat history, then go on live."""

    session_id: str
    requested_after: int
    first_available: int


PUSHES: dict[str, type[Wire]] = {
    "welcome": Welcome,
    "event": EventData,
    "events-gap": EventsGap,
    "error": ErrorData,
}
