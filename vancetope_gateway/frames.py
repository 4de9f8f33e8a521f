"""WebSocket frames: one envelope ``{type, id, replyTo, data}``, a pydantic model per data shape.

``REQUESTS`` maps each client frame type to its data model and ``REPLIES`` to
the model of its reply; ``PUSHES`` lists what the server sends unasked.
``docs/protocol.md`` and ``docs/schemas/*.json`` are generated from these
(``vancetope schemas``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from vancetope_brain.models import Fingerprint, OnDisconnect, SessionStatus, SessionType
from vancetope_brain.models.base import Wire

Id = Field(min_length=1, max_length=64)
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


# ── requests (client → server); the reply has the same type and ``replyTo`` ──

class SessionCreate(Wire):
    """Create a session and bind this connection to it. INTERACTIVE sessions get a chat
    process (engine from ``session.defaultChatEngine``); AUTONOMOUS ones get none."""

    title: str = Field(default="", max_length=200)
    type: SessionType = SessionType.INTERACTIVE
    project_id: str = Field(default="default", min_length=1, max_length=64)
    on_disconnect: OnDisconnect = OnDisconnect.SUSPEND
    idle_timeout_sec: int = Field(default=1800, ge=10, le=30 * 86400)
    fingerprint: Fingerprint | None = None


class SessionResume(Wire):
    """Bind this connection to an existing session (resuming it if SUSPENDED) and replay
    the events after ``lastSeq``. The fingerprint is checked (think-engines §6)."""

    session_id: str = Id
    last_seq: int = Field(default=0, ge=0)
    fingerprint: Fingerprint | None = None


class SessionList(Wire):
    """The caller's sessions, newest first, optionally of one status."""

    status: SessionStatus | None = None


class SessionRef(Wire):
    """Names a session of the caller (``session-get``, ``session-suspend``, ``session-close``)."""

    session_id: str = Id


class ProcessCreate(Wire):
    """Create a process in the bound session and start it on its own lane."""

    engine: str = Field(min_length=1, max_length=64)
    goal: str = Field(default="", max_length=32_000)
    name: str = Field(default="", max_length=100)
    params: dict[str, Any] = Field(default_factory=dict)


class ProcessRef(Wire):
    """Names a process of the caller (``process-start`` / ``-pause`` / ``-resume`` / ``-stop`` /
    ``-reset`` / ``-status``)."""

    process_id: str = Id


class ProcessList(Wire):
    """Processes of a session (default: the bound one); non-terminal unless ``all``."""

    session_id: str | None = Field(default=None, max_length=64)
    all: bool = False


class ProcessSteer(Wire):
    """Send user input to a process of the bound session (arthur-engine §3.6 addressing)."""

    target_think_process_id: str = Id
    content: str = Field(min_length=1, max_length=32_000)
    idempotency_key: str | None = Field(default=None, max_length=128)


class ChatHistory(Wire):
    """A page of a process's chat, oldest first; page backwards with ``beforeSeq``."""

    process_id: str = Id
    before_seq: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=500)


class EventsResume(Wire):
    """Replay the bound session's events after ``lastSeq``, then continue live."""

    last_seq: int = Field(ge=0)


class ClientToolDef(Wire):
    """A tool the client executes on its machine (arthur-engine §2.2: transparent to engines)."""

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str = Field(default="", max_length=4000)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object",
                                                                "properties": {}})
    safety: Literal["SAFE_PROBE", "MUTATING"] = "MUTATING"


class ClientToolsRegister(Wire):
    """Offer (replace) this connection's client-side tools to the bound session's processes."""

    tools: list[ClientToolDef] = Field(max_length=200)


class ToolResultData(Wire):
    """The result of a ``tool-call`` this connection received."""

    tool_call_id: str = Field(min_length=1, max_length=64)
    status: Literal["success", "error"]
    result: Any = None
    error: str | None = Field(default=None, max_length=32_000)


class Empty(Wire):
    """No data (``ping``, ``think-engines-list``)."""


REQUESTS: dict[str, type[Wire]] = {
    "session-create": SessionCreate,
    "session-resume": SessionResume,
    "session-list": SessionList,
    "session-get": SessionRef,
    "session-suspend": SessionRef,
    "session-close": SessionRef,
    "process-create": ProcessCreate,
    "process-start": ProcessRef,
    "process-pause": ProcessRef,
    "process-resume": ProcessRef,
    "process-stop": ProcessRef,
    "process-reset": ProcessRef,
    "process-status": ProcessRef,
    "process-list": ProcessList,
    "process-steer": ProcessSteer,
    "chat-history": ChatHistory,
    "events-resume": EventsResume,
    "client-tools-register": ClientToolsRegister,
    "tool-result": ToolResultData,
    "think-engines-list": Empty,
    "ping": Empty,
}


# ── replies (server → client, ``replyTo`` = the request's id) ─────────────────

class SessionBound(Wire):
    """Reply to ``session-create`` / ``session-resume``: the session, its chat process, the
    session's current last event ``seq`` (events after the requested ``lastSeq`` follow),
    and whether its processes were left SUSPENDED because the working directory changed."""

    session: dict[str, Any]
    chat_process_id: str | None
    last_seq: int
    context_drift: bool = False


class SessionsListed(Wire):
    """Reply to ``session-list``."""

    sessions: list[dict[str, Any]]


class SessionDetail(Wire):
    """Reply to ``session-get`` / ``session-suspend`` / ``session-close``: the session and all
    its processes."""

    session: dict[str, Any]
    processes: list[dict[str, Any]]


class ProcessReply(Wire):
    """Reply to ``process-create`` and the process commands: the process as it is now (a
    lifecycle call is then executed on the process's lane; watch ``status-changed``)."""

    process: dict[str, Any]


class ProcessesListed(Wire):
    """Reply to ``process-list``."""

    processes: list[dict[str, Any]]


class SteerAccepted(Wire):
    """Reply to ``process-steer``: the message is persisted in the inbox with this ``seq``;
    ``duplicate`` is true when the idempotency key was seen before (nothing new stored)."""

    message_id: str
    seq: int
    duplicate: bool


class ChatPage(Wire):
    """Reply to ``chat-history``: chat lines, oldest first."""

    messages: list[dict[str, Any]]


class EventsResumed(Wire):
    """Reply to ``events-resume``: the session's current last ``seq``; the missed events follow."""

    last_seq: int


class ClientToolsRegistered(Wire):
    """Reply to ``client-tools-register``: how many tools this connection now offers."""

    registered: int


class ToolResultAccepted(Wire):
    """Reply to ``tool-result``: the result reached the waiting process."""


class EnginesListed(Wire):
    """Reply to ``think-engines-list``: the registry (name, title, description, version)."""

    engines: list[dict[str, Any]]


class Pong(Wire):
    """Reply to ``ping``."""


REPLIES: dict[str, type[Wire]] = {
    "session-create": SessionBound,
    "session-resume": SessionBound,
    "session-list": SessionsListed,
    "session-get": SessionDetail,
    "session-suspend": SessionDetail,
    "session-close": SessionDetail,
    "process-create": ProcessReply,
    "process-start": ProcessReply,
    "process-pause": ProcessReply,
    "process-resume": ProcessReply,
    "process-stop": ProcessReply,
    "process-reset": ProcessReply,
    "process-status": ProcessReply,
    "process-list": ProcessesListed,
    "process-steer": SteerAccepted,
    "chat-history": ChatPage,
    "events-resume": EventsResumed,
    "client-tools-register": ClientToolsRegistered,
    "tool-result": ToolResultAccepted,
    "think-engines-list": EnginesListed,
    "ping": Pong,
}


# ── pushes (server → client) ────────────────────────────────────────────────

class Welcome(Wire):
    """First frame on every connection: who you are, the server, your sessions at a glance.
    ``notifyMode`` echoes the ``?notifyMode=`` of the connect URL (default ``all``)."""

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
    """Events the client asked for are no longer kept; reload chat history, then go on live."""

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


PUSHES: dict[str, type[Wire]] = {
    "welcome": Welcome,
    "tool-call": ToolCall,
    "event": EventData,
    "events-gap": EventsGap,
    "error": ErrorData,
}
