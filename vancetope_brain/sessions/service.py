"""Creating interactive sessions (with their chat process) and steering processes."""

from __future__ import annotations

from vancetope_brain.engines import lifecycle
from vancetope_brain.engines.base import EngineRegistry
from vancetope_brain.engines.lifecycle import LifecycleCall
from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.identity import Principal
from vancetope_brain.lanes import Waker
from vancetope_brain.models import (
    ChatMessage,
    InboxMessage,
    ProcessStatus,
    Session,
    ThinkProcess,
    UserChatInput,
    new_id,
)
from vancetope_brain.settings import SettingsApi
from vancetope_brain.store import Store


class SessionService:
    def __init__(self, store: Store, waker: Waker, engines: EngineRegistry) -> None:
        self._store = store
        self._waker = waker
        self._engines = engines

    def create_interactive(self, who: Principal, title: str = "") -> Session:
        """Persist a session and its chat process, then start the process on its lane.

        The chat engine comes from ``session.defaultChatEngine``.
        """
        engine = self._engines.get(SettingsApi().get("session.defaultChatEngine"))
        session = Session(id=new_id("ses"), tenant_id=who.tenant_id, user_id=who.user_id,
                          title=title)
        self._store.create_session(session)
        process = ThinkProcess(id=new_id("proc"), tenant_id=who.tenant_id, session_id=session.id,
                               user_id=who.user_id, name="chat", engine=engine.name,
                               engine_version=engine.version, recipe_name=engine.name)
        self._store.create_process(process)
        self._store.set_chat_process(who.tenant_id, session.id, process.id)
        session.chat_process_id = process.id
        self._waker.wake(who.tenant_id, process.id)
        return session

    def get(self, who: Principal, session_id: str) -> Session:
        session = self._store.get_session(who.tenant_id, session_id)
        if session.user_id != who.user_id:
            raise NotFound(f"no session {session_id!r}")
        return session

    def list_sessions(self, who: Principal) -> list[Session]:
        return self._store.list_sessions(who.tenant_id, who.user_id)

    def process(self, who: Principal, process_id: str) -> ThinkProcess:
        """The process, if it belongs to one of the caller's sessions."""
        process = self._store.get_process(who.tenant_id, process_id)
        if process.user_id != who.user_id:
            raise NotFound(f"no process {process_id!r}")
        return process

    def processes(self, who: Principal, session_id: str) -> list[ThinkProcess]:
        self.get(who, session_id)
        return self._store.list_processes(who.tenant_id, session_id)

    def steer(self, who: Principal, process_id: str, content: str,
              idempotency_key: str | None = None) -> tuple[InboxMessage, bool]:
        """Persist user input into the process's inbox, then wake it.

        Returns the message and whether it is new (a repeated idempotency key
        stores nothing). CLOSED refuses; PAUSED and SUSPENDED queue without a wake.
        """
        process = self.process(who, process_id)
        if process.status is ProcessStatus.CLOSED:
            raise Conflict(f"process {process_id!r} is CLOSED "
                           f"({process.close_reason}); it takes no more messages")
        message = InboxMessage(id=new_id("msg"), tenant_id=who.tenant_id,
                               target_process_id=process_id, idempotency_key=idempotency_key,
                               message=UserChatInput(from_user=who.user_id, content=content))
        stored, created = self._store.append_message(message)
        if process.status.wakes_on_message:
            self._waker.wake(who.tenant_id, process_id)
        return stored, created

    def control(self, who: Principal, process_id: str, call: LifecycleCall) -> ThinkProcess:
        """Request a lifecycle call (pause / resume / suspend / stop) and wake the lane.

        Refused with ``Conflict`` when illegal in the current status (checked
        again atomically by the store, and once more on the lane, where a
        call overtaken meanwhile is dropped).
        """
        process = self.process(who, process_id)
        lifecycle.check(call, process.status)
        updated = self._store.request_control(who.tenant_id, process_id, call.value,
                                              lifecycle.ALLOWED_FROM[call])
        self._waker.wake(who.tenant_id, process_id)
        return updated

    def chat_history(self, who: Principal, process_id: str, *, before_seq: int | None = None,
                     limit: int = 100) -> list[ChatMessage]:
        self.process(who, process_id)
        return self._store.chat_history(who.tenant_id, process_id, before_seq=before_seq,
                                        limit=limit)
