"""ThinkProcess: one running instance of a think engine (think-engines.txt §5)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Document, utcnow


class ProcessStatus(StrEnum):
    INIT = "INIT"
    RUNNING = "RUNNING"
    IDLE = "IDLE"
    BLOCKED = "BLOCKED"
    PAUSED = "PAUSED"
    SUSPENDED = "SUSPENDED"
    CLOSED = "CLOSED"
    # What each status allows and leads to: ``models/lifecycle.py``.


class CloseReason(StrEnum):
    DONE = "DONE"
    STOPPED = "STOPPED"
    STALE = "STALE"
    FAILED = "FAILED"


class ThinkProcess(Document):
    """The process document. The brain owns it; engines change it only through their turn.

    ``epoch`` is the fencing token: every lane turn increments it when it takes
    the lease, and every write that commits the turn is conditional on it.
    ``next_seq`` is the last inbox sequence number handed out.
    ``recipe`` is the resolved recipe copied in at spawn (an ``AppliedRecipe``
    dump), so the process survives later edits of the recipe.
    ``pending_control`` is a requested lifecycle call (pause / resume / suspend /
    stop) that the next lane turn executes; a newer request replaces an older one.
    ``turn_attempts`` counts the turns begun (``LaneStore.acquire_epoch``) since the last
    commit: above zero when a turn starts, the one before it never committed.
    ``engine_failures`` counts the consecutive committed turns whose engine raised; a turn
    that succeeds resets it.
    ``originating_user_id`` / ``originating_session_id``: for a service process (whose
    ``user_id`` is ``_system``), the user and session whose turn caused its job
    (think-engines §7b "User Context Threading").
    """

    id: str
    tenant_id: str
    session_id: str
    user_id: str
    project_id: str = "default"
    parent_process_id: str | None = None
    name: str
    goal: str = ""
    engine: str
    engine_version: str
    recipe_name: str | None = None
    recipe: dict[str, Any] | None = None
    engine_params: dict[str, Any] = Field(default_factory=dict)
    engine_state: dict[str, Any] = Field(default_factory=dict)
    status: ProcessStatus = ProcessStatus.INIT
    close_reason: CloseReason | None = None
    last_error: str | None = None
    context_drift: bool = False
    chat_history_summary: str | None = None
    pending_control: str | None = None
    control_requested_at: datetime | None = None
    epoch: int = 0
    next_seq: int = 0
    turn_attempts: int = 0
    engine_failures: int = 0
    originating_user_id: str | None = None
    originating_session_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    @property
    def is_service(self) -> bool:
        """Spawned from a ``service`` recipe (think-engines §7b): never in a user's lists."""
        return (self.recipe or {}).get("category") == "service"
