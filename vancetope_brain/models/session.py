"""Session: the owner of processes, bound to one user (think-engines.txt §5)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from vancetope_brain.models.base import Document, Wire, utcnow


class SessionType(StrEnum):
    INTERACTIVE = "INTERACTIVE"
    AUTONOMOUS = "AUTONOMOUS"


class SessionStatus(StrEnum):
    OPEN = "OPEN"
    SUSPENDED = "SUSPENDED"
    CLOSED = "CLOSED"


class OnDisconnect(StrEnum):
    """What happens when the last client of a session goes away (think-engines §6)."""

    SUSPEND = "SUSPEND"
    KEEP_OPEN = "KEEP_OPEN"
    CLOSE = "CLOSE"


class SuspendCause(StrEnum):
    DISCONNECT = "DISCONNECT"
    IDLE = "IDLE"
    USER = "USER"


class Fingerprint(Wire):
    """The client context a session was first bound from (think-engines §6)."""

    machine_id: str = Field(min_length=1, max_length=200)
    working_dir: str = Field(min_length=1, max_length=4096)
    user_home: str | None = Field(default=None, max_length=4096)
    os_user: str | None = Field(default=None, max_length=200)


class Session(Document):
    """A user's session. ``fingerprint`` is stored at the first bind that carries one.
    ``system``: a service's session (think-engines §7b), owned by the user ``_system``,
    never listed to a user (``vancetope_brain.services.system_sessions``)."""

    id: str
    tenant_id: str
    user_id: str
    project_id: str = "default"
    type: SessionType = SessionType.INTERACTIVE
    status: SessionStatus = SessionStatus.OPEN
    title: str = ""
    chat_process_id: str | None = None
    on_disconnect: OnDisconnect = OnDisconnect.SUSPEND
    idle_timeout_sec: int = 1800
    suspend_cause: SuspendCause | None = None
    fingerprint: Fingerprint | None = None
    system: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
