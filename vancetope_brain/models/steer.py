"""The SteerMessage union (arthur-engine.txt §2.3, user-interaction.txt §10.2) and its codec.

A SteerMessage is what a process receives; an ``InboxMessage`` is its
persisted envelope in the target process's inbox, with the per-process
sequence number, the optional idempotency key and the drain marks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models.base import Document, Wire, utcnow
from vancetope_brain.models.inbox import AnswerPayload, ItemType


class ProcessEventType(StrEnum):
    STARTED = "started"
    BLOCKED = "blocked"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"
    SUMMARY = "summary"
    DEAD_LETTER = "dead-letter"
    """Not a status change: a message to the child was set aside (``InboxMessage.dead_letter``);
    the child goes on. ``payload``: ``{messageId, attempts, reason}``."""


class ToolCallStatus(StrEnum):
    SUCCESS = "success"
    ERROR = "error"
    TIMEOUT = "timeout"


class UserChatInput(Wire):
    """The user typed in the chat."""

    kind: Literal["UserChatInput"] = "UserChatInput"
    from_user: str
    content: str = Field(min_length=1, max_length=100_000)


class ProcessEvent(Wire):
    """Another process of the session reports a status change."""

    kind: Literal["ProcessEvent"] = "ProcessEvent"
    source_process_id: str
    source_name: str | None = None
    """The reporting process's name, so the parent (and the user) can tell it apart."""
    type: ProcessEventType
    human_summary: str | None = None
    payload: dict[str, Any] | None = None


class ToolResult(Wire):
    """The result of an asynchronously dispatched tool call."""

    kind: Literal["ToolResult"] = "ToolResult"
    tool_call_id: str
    tool_name: str
    status: ToolCallStatus
    result: Any = None
    error: str | None = None


class ExternalCommand(Wire):
    """A high-level command addressed directly by a client (e.g. a UI button)."""

    kind: Literal["ExternalCommand"] = "ExternalCommand"
    command: str
    params: dict[str, Any] = Field(default_factory=dict)


class InboxAnswer(Wire):
    """The user (or whoever it was delegated to) answered an inbox item: ``answer`` is its
    AnswerPayload (user-interaction §6, §10.2); None means the item was dismissed (a skip,
    §5)."""

    kind: Literal["InboxAnswer"] = "InboxAnswer"
    inbox_item_id: str
    item_type: ItemType
    title: str = ""
    answer: AnswerPayload | None = None

    @model_validator(mode="before")
    @classmethod
    def _untyped_answer(cls, raw: Any) -> Any:
        """Inbox messages stored before the answer was typed hold a free ``{value, ...}``
        dict: read it as the DECIDED answer it was (an APPROVAL's bare value is
        ``approved``)."""
        answer = raw.get("answer") if isinstance(raw, dict) else None
        if not isinstance(answer, dict) or "outcome" in answer:
            return raw
        value = answer.get("value")
        if not isinstance(value, dict):
            kind = str(raw.get("itemType", raw.get("item_type", ""))).upper()
            value = {"approved": value} if kind == "APPROVAL" else {"value": value}
        return {**raw, "answer": {"outcome": "DECIDED", "value": value,
                                  "answeredBy": answer.get("answeredBy", "unknown")}}


SteerMessage = Annotated[
    UserChatInput | ProcessEvent | ToolResult | ExternalCommand | InboxAnswer,
    Field(discriminator="kind"),
]
_steer_adapter: TypeAdapter[SteerMessage] = TypeAdapter(SteerMessage)


def encode_steer(message: SteerMessage) -> dict[str, Any]:
    """The JSON-ready form of a SteerMessage; ``kind`` names the variant."""
    return message.dump()


def decode_steer(raw: dict[str, Any]) -> SteerMessage:
    """Parse a SteerMessage; raises InvalidInput naming the bad field."""
    try:
        return _steer_adapter.validate_python(raw)
    except ValidationError as e:
        raise InvalidInput(f"invalid steer message: {e.errors()[0]['msg']} "
                           f"at {'.'.join(map(str, e.errors()[0]['loc']))}") from e


class DeadLetter(Wire):
    """Why a message was set aside unprocessed (``InboxMessage.dead_letter``)."""

    reason: str
    attempts: int
    at: datetime = Field(default_factory=utcnow)

    @field_validator("at")
    @classmethod
    def _aware(cls, at: datetime) -> datetime:
        """A store that hands back naive UTC (BSON inside a document) reads as aware UTC."""
        return at.replace(tzinfo=UTC) if at.tzinfo is None else at


class InboxMessage(Document):
    """A SteerMessage persisted in its target process's inbox.

    ``seq`` is assigned by the store, strictly increasing per process in
    acceptance order. ``drained_at``/``drained_epoch`` are set by the turn
    that processed it, in the same atomic commit as that turn's effects.
    ``attempts`` counts the turns that began with this message in their batch
    (``LaneStore.acquire_epoch``), so one above zero on a pending message means
    a turn that read it never committed (its worker died or froze, or the store or
    Redis failed under it). ``dead_letter`` is set, with the drain marks, on a message
    that was set aside unprocessed; nothing is deleted.
    """

    id: str
    tenant_id: str
    target_process_id: str
    seq: int = 0
    idempotency_key: str | None = None
    sender_process_id: str | None = None
    message: SteerMessage
    created_at: datetime = Field(default_factory=utcnow)
    drained_at: datetime | None = None
    drained_epoch: int | None = None
    attempts: int = 0
    dead_letter: DeadLetter | None = None
