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


# ── replies (server → client, ``replyTo`` = the request's id) ─────────────────

class SessionBound(Wire):
    """Reply to ``session-create`` / ``session-resume``: the session, its chat process, and the
    session's current last event ``seq`` (events after the requested ``lastSeq`` follow)."""

    session: dict[str, Any]
    chat_process_id: str | None
    last_seq: int


class SessionsListed(Wire):
    """Reply to ``session-list``."""

    sessions: list[dict[str, Any]]


class SteerAccepted(Wire):
    """Reply to ``process-steer``: the message is persisted in the inbox with this ``seq``;
    ``duplicate`` is true when the idempotency key was seen before (nothing new stored)."""

    message_id: str
    seq: int
    duplicate: bool


class ChatPage(Wire):
    """Reply to ``chat-history``: chat lines, oldest first."""

    messages: list[dict[str, Any]]


class Pong(Wire):
    """Reply to ``ping``."""


REPLIES: dict[str, type[Wire]] = {
    "session-create": SessionBound,
    "session-resume": SessionBound,
    "session-list": SessionsListed,
    "process-steer": SteerAccepted,
    "chat-history": ChatPage,
    "ping": Pong,
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
