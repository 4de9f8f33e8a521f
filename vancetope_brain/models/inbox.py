"""The user Inbox (user-interaction.txt §3–§8) and the notification delivery log (§12.6).

Not to be confused with a process's inbox of steer messages (``InboxMessage``):
an ``InboxItem`` is something a *user* must answer or look at.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Document, Wire, utcnow


class ItemType(StrEnum):
    APPROVAL = "APPROVAL"
    DECISION = "DECISION"
    FEEDBACK = "FEEDBACK"
    ORDERING = "ORDERING"
    STRUCTURE_EDIT = "STRUCTURE_EDIT"
    OUTPUT_TEXT = "OUTPUT_TEXT"
    OUTPUT_IMAGE = "OUTPUT_IMAGE"
    OUTPUT_DOCUMENT = "OUTPUT_DOCUMENT"

    @property
    def is_ask(self) -> bool:
        """Asks block their process until answered; outputs are informative."""
        return not self.value.startswith("OUTPUT_")


class Criticality(StrEnum):
    LOW = "LOW"
    NORMAL = "NORMAL"
    CRITICAL = "CRITICAL"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Criticality.LOW: 0, Criticality.NORMAL: 1, Criticality.CRITICAL: 2}


class ItemStatus(StrEnum):
    PENDING = "PENDING"
    ANSWERED = "ANSWERED"
    DISMISSED = "DISMISSED"
    ARCHIVED = "ARCHIVED"


class ResolvedBy(StrEnum):
    USER = "USER"
    AUTO_DEFAULT = "AUTO_DEFAULT"
    AUTO_RESOLVER = "AUTO_RESOLVER"  # reserved (v2 auto-resolver worker)
    DISMISSED = "DISMISSED"


class Outcome(StrEnum):
    DECIDED = "DECIDED"
    INSUFFICIENT_INFO = "INSUFFICIENT_INFO"
    UNDECIDABLE = "UNDECIDABLE"


AUTO_DEFAULT_ANSWERER = "system:auto-default"


class AnswerPayload(Wire):
    """The 3-state answer (§6). ``value`` for DECIDED, ``reason`` otherwise."""

    outcome: Outcome
    value: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=10_000)
    answered_by: str


class HistoryAction(StrEnum):
    CREATE = "CREATE"
    AUTO_ANSWER = "AUTO_ANSWER"
    ANSWER = "ANSWER"
    DISMISS = "DISMISS"
    DELEGATE = "DELEGATE"
    ARCHIVE = "ARCHIVE"
    REVOKE = "REVOKE"


class HistoryEntry(Wire):
    action: HistoryAction
    by: str                      # a user id, or ``system:…``
    at: datetime = Field(default_factory=utcnow)
    from_user: str | None = None
    to_user: str | None = None
    note: str | None = None


class InboxItem(Document):
    """One item of a user's Inbox. ``revision`` counts saves: every change is a
    compare-and-set on it (``UserInboxStore.save_inbox_item``)."""

    id: str
    tenant_id: str
    originator_user_id: str
    assigned_to_user_id: str
    origin_process_id: str | None = None
    origin_session_id: str | None = None
    idempotency_key: str | None = None
    type: ItemType
    criticality: Criticality = Criticality.NORMAL
    tags: list[str] = Field(default_factory=list)
    title: str
    body: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    status: ItemStatus = ItemStatus.PENDING
    requires_action: bool = True
    answer: AnswerPayload | None = None
    resolved_by: ResolvedBy | None = None
    resolved_at: datetime | None = None
    resolver_reason: str | None = None
    history: list[HistoryEntry] = Field(default_factory=list)
    revision: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    archived_at: datetime | None = None


@dataclass(frozen=True)
class NewItem:
    """What a creator says about an item (the service fills in the rest)."""

    type: ItemType
    title: str
    body: str | None = None
    payload: dict[str, Any] | None = None
    criticality: Criticality = Criticality.NORMAL
    tags: tuple[str, ...] = ()
    assigned_to: str | None = None       # default: the originator
    idempotency_key: str | None = None


@dataclass(frozen=True)
class InboxQuery:
    """Filters of ``UserInboxStore.list_inbox_items``; every given filter must hold.

    ``tags``: the item carries every one of them. ``before``: the (createdAt, id)
    of the last item of the previous page (results are newest first).
    """

    assigned_to: str | None = None
    statuses: frozenset[ItemStatus] | None = None
    criticalities: frozenset[Criticality] | None = None
    tags: tuple[str, ...] = ()
    origin_session_id: str | None = None
    origin_process_id: str | None = None
    requires_action: bool | None = None
    resolved_before: datetime | None = None
    before: tuple[datetime, str] | None = None
    limit: int = 50

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"InboxQuery.limit must be at least 1, not {self.limit}")


class DeliveryStatus(StrEnum):
    SENT = "SENT"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    QUEUED = "QUEUED"   # collected for the next e-mail batch; becomes SENT or FAILED


class NotificationDelivery(Document):
    """One attempt of one channel to tell one user about one item (§12.6).

    ``project_id``: the project the item was asked in, so a QUEUED delivery is sent with
    the same settings cascade (user → project → tenant) it was taken with; None for an
    item from outside any project (and in records written before it was kept).
    """

    id: str
    tenant_id: str
    item_id: str
    user_id: str
    project_id: str | None = None
    channel: str
    status: DeliveryStatus
    reason: str | None = None
    criticality: Criticality
    created_at: datetime = Field(default_factory=utcnow)
    sent_at: datetime | None = None
