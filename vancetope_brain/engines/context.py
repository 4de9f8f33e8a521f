"""ThinkEngineContext: the only way an engine reaches the world (arthur-engine.txt §2.2).

Built fresh for each lifecycle call. Chat lines and status decisions are
buffered here and committed by the lane runner in one fenced write; events
go out live. ``llm()`` and ``tools()`` are the only ways out of a turn.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from vancetope_brain.errors import Fenced
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.llm import ChatModel, LlmMessage, LlmResponse, TokenSink, ToolSpec
from vancetope_brain.models import (
    ChatMessage,
    ChatRole,
    CloseReason,
    InboxMessage,
    ProcessStatus,
    ThinkProcess,
    new_id,
)
from vancetope_brain.settings import SettingsApi
from vancetope_brain.store import Store
from vancetope_brain.tools import ServerTools, ToolDispatcher, ToolSource

RESET_MARK = "reset"
"""``meta`` key of the chat line a reset leaves; history before it is not the engine's memory."""


@dataclass(frozen=True)
class Scope:
    tenant_id: str
    session_id: str
    process_id: str
    user_id: str


@dataclass
class TurnState:
    """What the turn has decided so far; the runner turns it into a ``TurnCommit``."""

    drained: list[InboxMessage] = field(default_factory=list)
    chat: list[ChatMessage] = field(default_factory=list)
    status: ProcessStatus | None = None
    close_reason: CloseReason | None = None
    engine_state: dict[str, Any] | None = None


class ChatApi:
    """The process's chat: committed history plus this turn's buffered lines."""

    def __init__(self, ctx: ThinkEngineContext) -> None:
        self._ctx = ctx

    def append(self, role: ChatRole, content: str, *, source: InboxMessage | None = None,
               meta: dict[str, Any] | None = None) -> ChatMessage:
        """Buffer a line; it is written, numbered and announced when the turn commits."""
        s = self._ctx.scope
        line = ChatMessage(id=new_id("chat"), tenant_id=s.tenant_id, session_id=s.session_id,
                           process_id=s.process_id, role=role, content=content,
                           source_message_id=source.id if source else None, meta=meta or {})
        self._ctx.turn.chat.append(line)
        return line

    def history(self, limit: int = 200) -> list[ChatMessage]:
        """The last ``limit`` lines since the last reset, committed ones first, then this turn's."""
        s = self._ctx.scope
        committed = self._ctx._store.chat_history(s.tenant_id, s.process_id, limit=limit)
        lines = (committed + self._ctx.turn.chat)[-limit:]
        resets = [i for i, line in enumerate(lines) if line.meta.get(RESET_MARK)]
        return lines[resets[-1] + 1:] if resets else lines


class EventPublisher:
    """Live events of this process into its session's stream."""

    def __init__(self, ctx: ThinkEngineContext) -> None:
        self._ctx = ctx

    def emit(self, type: EventType, data: dict[str, Any]) -> int:
        s = self._ctx.scope
        return self._ctx._events.publish(s.session_id, s.process_id, type, data)

    def token(self, text: str) -> None:
        self.emit(EventType.TOKEN, {"text": text})


class FencedModel:
    """Wraps the turn's model: refuses to start or finish a call once the lease is lost."""

    def __init__(self, model: ChatModel, lease_lost: threading.Event) -> None:
        self.name = model.name
        self._model = model
        self._lost = lease_lost

    def complete(self, messages: list[LlmMessage], *, tools: list[ToolSpec] | None = None,
                 on_token: TokenSink | None = None) -> LlmResponse:
        self._check()
        if on_token is not None:
            sink = on_token

            def on_token(text: str) -> None:
                # A fenced turn must not stream a reply that will never be committed.
                self._check()
                sink(text)

        response = self._model.complete(messages, tools=tools, on_token=on_token)
        self._check()
        return response

    def _check(self) -> None:
        if self._lost.is_set():
            raise Fenced("the lane lease was lost; this turn must write nothing")


class ProcessesApi:
    """Read access to the processes of this session."""

    def __init__(self, ctx: ThinkEngineContext) -> None:
        self._ctx = ctx

    def current(self) -> ThinkProcess:
        return self._ctx.process

    def list(self) -> list[ThinkProcess]:
        s = self._ctx.scope
        return self._ctx._store.list_processes(s.tenant_id, s.session_id)


class ThinkEngineContext:
    """Access surface of one lifecycle call. Engines must not keep it past the call."""

    def __init__(self, *, process: ThinkProcess, store: Store, events: EventBus,
                 model: ChatModel, lease_lost: threading.Event, settings: SettingsApi,
                 tool_pool: frozenset[str], tool_sources: list[ToolSource] | None = None) -> None:
        self.process = process
        self.scope = Scope(process.tenant_id, process.session_id, process.id, process.user_id)
        self.turn = TurnState()
        self._store = store
        self._events = events
        self._model = FencedModel(model, lease_lost)
        self._settings = settings
        self._tools = ToolDispatcher(tool_pool,
                                     sources=[ServerTools(self), *(tool_sources or [])])
        self._pending: list[InboxMessage] | None = None

    @property
    def user(self) -> str:
        return self.scope.user_id

    def chat(self) -> ChatApi:
        return ChatApi(self)

    def llm(self) -> ChatModel:
        return self._model

    def tools(self) -> ToolDispatcher:
        return self._tools

    def settings(self) -> SettingsApi:
        return self._settings

    def events(self) -> EventPublisher:
        return EventPublisher(self)

    def processes(self) -> ProcessesApi:
        return ProcessesApi(self)

    def has_pending(self) -> bool:
        return bool(self._load_pending())

    def drain_pending(self) -> list[InboxMessage]:
        """All pending messages in sequence order; they count as drained when the turn commits.

        Returns the persisted envelopes (``.message`` is the SteerMessage) so
        chat lines can name the message they came from.
        """
        pending = self._load_pending()
        self._pending = []
        self.turn.drained.extend(pending)
        return pending

    def set_status(self, status: ProcessStatus, close_reason: CloseReason | None = None) -> None:
        """The status the process has when this turn commits (IDLE if never set)."""
        if status in (ProcessStatus.INIT, ProcessStatus.RUNNING):
            raise ValueError(f"an engine cannot end a turn in {status}")
        if (status is ProcessStatus.CLOSED) != (close_reason is not None):
            raise ValueError("CLOSED needs a close reason, and only CLOSED has one")
        self.turn.status, self.turn.close_reason = status, close_reason

    def save_state(self, state: dict[str, Any]) -> None:
        """Replace ``process.engineState`` when the turn commits."""
        self.turn.engine_state = state

    def _load_pending(self) -> list[InboxMessage]:
        if self._pending is None:
            s = self.scope
            self._pending = self._store.pending_messages(s.tenant_id, s.process_id)
        return self._pending
