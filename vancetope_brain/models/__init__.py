"""Persisted documents (pydantic) and the SteerMessage union with its codec.

Every document carries ``schemaVersion``; ``tests/fixtures/records/`` holds
checked-in JSON of each version that must keep loading. Field names are
snake_case in Python and camelCase on the wire and in the store.

The ground floor: value types and the protocols the floors above see each other
through (``wake.ProcessWaker``); nothing here imports another package of the brain
except ``errors``, and nothing here does I/O. The catalogued documents (``recipe``,
``strategy``, ``workflow_template``) live here with what validates them: the bounded Jinja2
sandbox (``sandbox``, ``render``) and ``markup.tagged``, so a store port and the service over
it both see them from below; likewise a setting's scope (``settings``).
"""

from vancetope_brain.models.base import Document, new_id, utcnow
from vancetope_brain.models.chat import ChatMessage, ChatRole
from vancetope_brain.models.identity import ApiToken, Project, Role, Tenant, User
from vancetope_brain.models.journal import JournalEntry, StepKind, StepState
from vancetope_brain.models.process import (
    CloseReason,
    ProcessStatus,
    ThinkProcess,
)
from vancetope_brain.models.session import (
    Fingerprint,
    OnDisconnect,
    Session,
    SessionStatus,
    SessionType,
    SuspendCause,
)
from vancetope_brain.models.steer import (
    DeadLetter,
    ExternalCommand,
    InboxAnswer,
    InboxMessage,
    ProcessEvent,
    SteerMessage,
    ToolResult,
    UserChatInput,
    decode_steer,
    encode_steer,
)
from vancetope_brain.models.turn import (
    Committed,
    OutboxEvent,
    Timer,
    TurnCommit,
    TurnEvent,
    TurnRecord,
    TurnStart,
)

__all__ = [
    "ApiToken", "ChatMessage", "DeadLetter", "Fingerprint", "OnDisconnect", "SuspendCause",
    "ChatRole", "CloseReason", "Committed", "Document", "ExternalCommand",
    "InboxAnswer", "InboxMessage", "JournalEntry", "OutboxEvent", "ProcessEvent", "Project",
    "ProcessStatus", "Role", "Session", "SessionStatus", "SessionType", "StepKind", "StepState",
    "SteerMessage", "Tenant", "ThinkProcess", "Timer", "ToolResult", "TurnCommit", "TurnEvent",
    "TurnRecord", "TurnStart", "User", "UserChatInput", "decode_steer", "encode_steer",
    "new_id", "utcnow",
]
