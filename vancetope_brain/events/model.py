"""The StreamEvent record (arthur-engine.txt §2.6 ChatStreamEvent, plus committed chat lines)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Wire, utcnow


class EventType(StrEnum):
    TOKEN = "token"                              # data: {text}
    # What the process streamed since its last chat-message, turn-restarted or stream-reset
    # is not its reply (a plain-text attempt sent back, text before tool calls): drop it.
    # data: {reason: "respond-required" | "tool-calls" | "not-the-reply"}
    STREAM_RESET = "stream-reset"
    TOOL_CALL_STARTED = "tool-call-started"      # data: {toolCallId, toolName, params}
    TOOL_CALL_COMPLETED = "tool-call-completed"  # data: {toolCallId, status}
    PROCESS_SPAWNED = "process-spawned"          # data: {childProcessId, goal}
    STATUS_CHANGED = "status-changed"            # data: {from, to, reason (closed)}
    CHAT_MESSAGE = "chat-message"                # data: the committed ChatMessage
    # A turn runs again after its attempt died (a killed worker, a store or Redis failure):
    # what that attempt streamed is void. data: {epoch}
    TURN_RESTARTED = "turn-restarted"
    # zaphod's council as it stands (docs/engines.md "zaphod"). data: {pattern, round,
    # rounds, sequential, phase, heads: [{name, round, status, processId}], missingHeads}
    COUNCIL_UPDATED = "council-updated"
    TASK_TREE = "task-tree"                      # data: {tree} — a marvin tree snapshot
    TASK_NODE = "task-node"                      # data: {node} — one marvin node changed
    # data: {strategy, phase, index, iteration, step: started|waiting|gate|finished, ...}
    VOGON_PHASE = "vogon-phase"
    # Addressed to one connection; gateways turn it into a ``tool-call`` frame and never
    # show it to anyone else. data: {toolCallId, toolName, params, connectionId, timeoutSec}
    CLIENT_TOOL_REQUEST = "client-tool-request"
    # Only in a user's feed (keys.user_feed); gateways push them as frames of the same name.
    INBOX_ITEM_ADDED = "inbox-item-added"        # data: {item: the item, as the user sees it}
    INBOX_ITEM_UPDATED = "inbox-item-updated"    # data: {item}
    # A knowledge document the user added changed status (PENDING, INDEXING, READY, FAILED)
    # or was deleted. data: {document: DocumentView}
    DOCUMENT_UPDATED = "document-updated"
    DOCUMENT_DELETED = "document-deleted"


class StreamEvent(Wire):
    """One event of a session. ``seq`` is contiguous within the session's log; a log that
    was lost (Redis restart, expiry) starts again above every earlier seq, so a client
    holding an old seq sees a gap, never a repeat.
    """

    seq: int
    session_id: str
    process_id: str
    type: EventType
    data: dict[str, Any] = Field(default_factory=dict)
    at: datetime = Field(default_factory=utcnow)
