"""Session: the owner of processes, bound to one user (think-engines.txt §5)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from vancetope_brain.models.base import Document, utcnow


class SessionType(StrEnum):
    INTERACTIVE = "INTERACTIVE"
    AUTONOMOUS = "AUTONOMOUS"


class SessionStatus(StrEnum):
    OPEN = "OPEN"
    SUSPENDED = "SUSPENDED"
    CLOSED = "CLOSED"


class Session(Document):
    id: str
    tenant_id: str
    user_id: str
    project_id: str = "default"
    type: SessionType = SessionType.INTERACTIVE
    status: SessionStatus = SessionStatus.OPEN
    title: str = ""
    chat_process_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
