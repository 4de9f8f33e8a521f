"""Creating interactive sessions (with their chat process) and steering processes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from vancetope_brain.engines.base import DEFAULT_ENGINE
from vancetope_brain.engines.spawning import ProcessFactory
from vancetope_brain.errors import Conflict, InvalidInput, LimitExceeded, NotFound
from vancetope_brain.events.interrupts import Interrupts
from vancetope_brain.identity import Principal
from vancetope_brain.models import (
    ChatMessage,
    ExternalCommand,
    InboxMessage,
    OnDisconnect,
    ProcessStatus,
    Session,
    SessionStatus,
    SessionType,
    SteerMessage,
    ThinkProcess,
    ToolResult,
    UserChatInput,
    lifecycle,
    new_id,
)
from vancetope_brain.models.conversation import ConversationHit
from vancetope_brain.models.lifecycle import LifecycleCall
from vancetope_brain.models.wake import ProcessWaker
from vancetope_brain.sessions.titles import TITLE_MAX, one_line, title_from_message
from vancetope_brain.settings import SettingsApi, SettingsService
from vancetope_brain.store import IdentityStore, LaneStore, SessionSearch, SessionStore
from vancetope_brain.store.sessions import SessionPage

PAGE_LIMIT = 50
"""Sessions a page of ``list_sessions`` holds unless asked for fewer or more."""
PAGE_LIMIT_MAX = 200
"""The most sessions one page may hold (``session-list``'s and ``GET /sessions``' ``limit``)."""
COUNT_CAP = 1000
"""Where ``count_sessions`` stops counting a status: a count of ``COUNT_CAP`` reads "at
least" (what the ``welcome`` tells; a user's closed sessions are not counted past it)."""
TITLED_CACHE_MAX = 10_000
"""Sessions a ``SessionService`` remembers as titled (then it forgets them all and starts
over): ``steer`` reads the session for its title only while it may still be untitled."""


class SessionService:
    """``max_open_sessions``: sessions one user may have that are not CLOSED (OPEN or
    SUSPENDED: both hold processes); checked before anything is written, so a refused create
    leaves nothing. Creates racing each other (one per connection at most) may each pass it.
    """

    def __init__(self, *, sessions: SessionStore, lanes: LaneStore, identity: IdentityStore,
                 settings: SettingsService, waker: ProcessWaker, processes: ProcessFactory,
                 search: SessionSearch, max_open_sessions: int = 100,
                 interrupts: Interrupts | None = None) -> None:
        self.max_open_sessions = max_open_sessions
        self._interrupts = interrupts
        self._sessions = sessions
        self._lanes = lanes
        self._identity = identity
        self._settings = settings
        self._waker = waker
        self._processes = processes
        self._search = search
        # (tenant, session) found titled: a title is never taken back (``rename`` gives one
        # of at least a character), so a titled session needs no read per message.
        self._titled: set[tuple[str, str]] = set()

    def create(self, who: Principal, *, type: SessionType = SessionType.INTERACTIVE,
               title: str = "", project_id: str = "default",
               on_disconnect: OnDisconnect = OnDisconnect.SUSPEND,
               idle_timeout_sec: int = 1800, chat_recipe: str | None = None) -> Session:
        """Persist a session in one of the tenant's projects. An INTERACTIVE session gets its
        chat process (recipe ``chat_recipe`` if given, else engine from
        ``session.defaultChatEngine``), started on its lane.
        """
        self._identity.get_project(who.tenant_id, project_id)
        counts = self._sessions.count_sessions(who.tenant_id, who.user_id,
                                               cap=self.max_open_sessions)
        open_now = counts[SessionStatus.OPEN] + counts[SessionStatus.SUSPENDED]
        if open_now >= self.max_open_sessions:
            raise LimitExceeded(f"you have {open_now} sessions that are not CLOSED, the most "
                                f"you may have; close one first (session-close)")
        session = Session(id=new_id("ses"), tenant_id=who.tenant_id, user_id=who.user_id,
                          project_id=project_id, type=type, title=title,
                          on_disconnect=on_disconnect, idle_timeout_sec=idle_timeout_sec)
        self._sessions.create_session(session)
        if type is SessionType.INTERACTIVE:
            engine = None if chat_recipe is not None else SettingsApi(
                self._settings, who.tenant_id, project_id,
                who.user_id).get("session.defaultChatEngine")
            process = self._new_process(who, session, engine=engine, recipe=chat_recipe,
                                        name="chat")
            self._sessions.set_chat_process(who.tenant_id, session.id, process.id)
            session.chat_process_id = process.id
        return session

    def create_interactive(self, who: Principal, title: str = "") -> Session:
        return self.create(who, title=title)

    def create_process(self, who: Principal, session_id: str, engine: str | None = None, *,
                       recipe: str | None = None, template: str | None = None,
                       goal: str = "", name: str = "",
                       params: dict[str, Any] | None = None) -> ThinkProcess:
        """Persist a process in an OPEN session of the caller and start it on its own lane.

        By ``recipe``, or by ``engine`` (think-engines §8), else engine ``DEFAULT_ENGINE``.
        ``template`` (a workflow template, §9) is passed as the engine param ``template``.
        """
        session = self.get(who, session_id)
        if session.status is not SessionStatus.OPEN:
            raise Conflict(f"session {session_id!r} is {session.status.value}; "
                           "resume it before creating processes")
        if recipe is None and engine is None:
            engine = DEFAULT_ENGINE
        if template is not None:
            params = {**(params or {}), "template": template}
        return self._new_process(who, session, engine=engine, recipe=recipe, name=name,
                                 goal=goal, params=params)

    def _new_process(self, who: Principal, session: Session, *, engine: str | None,
                     name: str, recipe: str | None = None, goal: str = "",
                     params: dict[str, Any] | None = None) -> ThinkProcess:
        process = self._processes.build(
            tenant_id=who.tenant_id, project_id=session.project_id, session_id=session.id,
            user_id=who.user_id, siblings=self._sessions.list_processes(who.tenant_id, session.id),
            recipe=recipe, engine=engine, name=name, goal=goal,
            params=params)
        self._sessions.create_process(process)
        self._waker.wake(who.tenant_id, process.id)
        return process

    def start(self, who: Principal, process_id: str) -> ThinkProcess:
        """Kick a process that has not started yet (INIT); its start runs on its lane."""
        process = self.process(who, process_id)
        if process.status is not ProcessStatus.INIT:
            raise Conflict(f"process {process_id!r} has already started "
                           f"(it is {process.status.value})")
        self._waker.wake(who.tenant_id, process_id)
        return process

    def get(self, who: Principal, session_id: str) -> Session:
        """The caller's session; missing, another tenant's and another user's look the same."""
        return _owned(who, "session", session_id, self._sessions.get_session)

    def rename(self, who: Principal, session_id: str, title: str) -> Session:
        """Give the caller's session ``title`` (on one line), in any status: a title is only
        what a session list shows."""
        title = one_line(title)
        if not title or len(title) > TITLE_MAX:
            raise InvalidInput(f"a session title has 1 to {TITLE_MAX} characters, "
                               "not counting spaces at its ends")
        self.get(who, session_id)
        return self._sessions.set_details(who.tenant_id, session_id, title=title)

    def list_sessions(self, who: Principal, *, status: SessionStatus | None = None,
                      cursor: str | None = None, limit: int = PAGE_LIMIT) -> SessionPage:
        """A page of the caller's sessions, newest first (of ``status`` if given);
        ``cursor``: the previous page's ``next_cursor``. Never a system session (its owner
        ``_system`` is no user). Raises ``InvalidInput`` for a cursor not made here or a
        ``limit`` outside 1..``PAGE_LIMIT_MAX``."""
        if not 1 <= limit <= PAGE_LIMIT_MAX:
            raise InvalidInput(f"a page holds 1 to {PAGE_LIMIT_MAX} sessions, not {limit}")
        page = self._sessions.list_sessions(who.tenant_id, who.user_id, status=status,
                                            cursor=cursor, limit=limit)
        return SessionPage([s for s in page.sessions if not s.system], page.next_cursor)

    def count_sessions(self, who: Principal) -> dict[SessionStatus, int]:
        """The caller's sessions per status, each counted up to ``COUNT_CAP``."""
        return self._sessions.count_sessions(who.tenant_id, who.user_id, cap=COUNT_CAP)

    def search(self, who: Principal, query: str, limit: int) -> list[ConversationHit]:
        """The caller's own sessions whose title or chat holds every word of ``query``
        (``store.session_search``): never another user's, in this tenant or any other."""
        return self._search.search_sessions(who.tenant_id, who.user_id, query, limit=limit)

    def process(self, who: Principal, process_id: str) -> ThinkProcess:
        """The process, if it belongs to one of the caller's sessions (else like a missing one)."""
        return _owned(who, "process", process_id, self._sessions.get_process)

    def processes(self, who: Principal, session_id: str) -> list[ThinkProcess]:
        """The session's processes a user may see: service processes never are (they live in
        system sessions, which only operators list)."""
        self.get(who, session_id)
        return [p for p in self._sessions.list_processes(who.tenant_id, session_id)
                if not p.is_service]

    def steer(self, who: Principal, process_id: str, content: str,
              idempotency_key: str | None = None, *,
              session_id: str | None = None) -> tuple[InboxMessage, bool]:
        """Persist user input into the process's inbox, then wake it.

        Returns the message and whether it is new (a repeated idempotency key
        stores nothing). CLOSED refuses, and so does a process outside ``session_id``,
        when given (a client's bound session). PAUSED and SUSPENDED queue without a wake.
        INIT queues too: a message is not a lifecycle call (only ``start`` runs in INIT,
        think-engines §5); the lane delivers it to the first ``steer`` after the start.
        An untitled session is titled from the user's first message (``titles``).
        """
        message, created, process = self._deliver(
            who, process_id, UserChatInput(from_user=who.user_id, content=content),
            idempotency_key, session_id)
        if created:
            self._title_if_untitled(who, process.session_id, content)
        return message, created

    def _title_if_untitled(self, who: Principal, session_id: str, content: str) -> None:
        key = (who.tenant_id, session_id)
        if key in self._titled:
            return
        if not self._sessions.get_session(who.tenant_id, session_id).title:
            title = title_from_message(content)
            if not title:  # a message of spaces: the next one may title it
                return
            self._sessions.set_details(who.tenant_id, session_id, title=title,
                                       only_unset=True)
        if len(self._titled) >= TITLED_CACHE_MAX:
            self._titled.clear()
        self._titled.add(key)

    def command(self, who: Principal, process_id: str, command: str,
                params: dict[str, Any] | None = None, idempotency_key: str | None = None, *,
                session_id: str | None = None) -> tuple[InboxMessage, bool]:
        """Persist a client's ExternalCommand (arthur-engine §2.3: e.g. an Approve button)
        into the process's inbox, with the rules of ``steer``."""
        return self._deliver(who, process_id, ExternalCommand(command=command,
                                                              params=params or {}),
                             idempotency_key, session_id)[:2]

    def tool_result(self, who: Principal, process_id: str,
                    result: ToolResult) -> tuple[InboxMessage, bool]:
        """Persist the result of a client tool call that came after the call timed out
        (a ToolResult, arthur-engine §2.3) into the calling process's inbox, once per
        call, with the rules of ``steer``."""
        return self._deliver(who, process_id, result, f"tool-result:{result.tool_call_id}",
                             None)[:2]

    def _deliver(self, who: Principal, process_id: str, steer: SteerMessage,
                 idempotency_key: str | None,
                 session_id: str | None) -> tuple[InboxMessage, bool, ThinkProcess]:
        process = self.process(who, process_id)
        if session_id is not None and process.session_id != session_id:
            raise Conflict("the target process belongs to another session; resume that one")
        if process.status is ProcessStatus.CLOSED:
            raise Conflict(f"process {process_id!r} is CLOSED "
                           f"({process.close_reason}); it takes no more messages")
        message = InboxMessage(id=new_id("msg"), tenant_id=who.tenant_id,
                               target_process_id=process_id, idempotency_key=idempotency_key,
                               message=steer)
        stored, created = self._lanes.append_message(message)
        if process.status in lifecycle.WAKES_ON_MESSAGE:
            self._waker.wake(who.tenant_id, process_id)
        return stored, created, process

    def control(self, who: Principal, process_id: str, call: LifecycleCall, *,
                by_system: bool = False) -> ThinkProcess:
        """Request a lifecycle call (pause / resume / suspend / stop / reset) and wake the lane.

        Refused with ``Conflict`` when illegal in the current status (checked
        again atomically by the store, and once more on the lane, where a
        call overtaken meanwhile is dropped): in INIT every call is refused
        (think-engines §5), and the session's chat process cannot be stopped on its
        own (arthur-engine §3.1: it lives as long as its session; close the session).
        ``by_system``: the session's own cascades, which reach every process (see
        ``lifecycle.SYSTEM_ALLOWED_FROM``), the chat process included.
        """
        process = self.process(who, process_id)
        if why := lifecycle.refusal(call, process.status, by_system=by_system):
            raise Conflict(why)
        if not by_system and call is LifecycleCall.STOP:
            self._refuse_chat_stop(who, process)
        if process.context_drift and call in lifecycle.SETTLES_DRIFT:
            self._sessions.set_context_drift(who.tenant_id, process_id, False)
        updated = self._lanes.request_control(who.tenant_id, process_id, call.value,
                                              lifecycle.allowed_from(call, by_system=by_system))
        self._waker.wake(who.tenant_id, process_id)
        return updated

    def interrupt(self, who: Principal, process_id: str) -> tuple[ThinkProcess, bool]:
        """Stop the process's running turn (its reply in progress): the worker holding its
        lane, wherever it runs, cuts the model call at its next chunk and commits what was
        said, marked ``interrupted`` (``events/interrupts.py``). Returns the process and
        whether a turn was running to stop (a turn that just ended is not, and the next
        one is never stopped by this request). Refused with ``Conflict`` for a CLOSED
        process."""
        process = self.process(who, process_id)
        if process.status is ProcessStatus.CLOSED:
            raise Conflict(f"process {process_id!r} is CLOSED; it has no turn to interrupt")
        if process.status is not ProcessStatus.RUNNING or self._interrupts is None:
            return process, False
        self._interrupts.request(who.tenant_id, process.id, process.epoch)
        return process, True

    def _refuse_chat_stop(self, who: Principal, process: ThinkProcess) -> None:
        session = self._sessions.get_session(who.tenant_id, process.session_id)
        if session.chat_process_id == process.id and session.status is not SessionStatus.CLOSED:
            raise Conflict(f"process {process.id!r} is the chat of session {session.id!r} and "
                           f"lives as long as the session; close the session (session-close) "
                           f"to stop it")

    def wake(self, tenant_id: str, process_id: str) -> None:
        self._waker.wake(tenant_id, process_id)

    def chat_history(self, who: Principal, process_id: str, *, before_seq: int | None = None,
                     limit: int = 100) -> list[ChatMessage]:
        self.process(who, process_id)
        return self._lanes.chat_history(who.tenant_id, process_id, before_seq=before_seq,
                                        limit=limit)


T = TypeVar("T")


def _owned(who: Principal, kind: str, record_id: str, load: Callable[[str, str], T]) -> T:
    """The record if it is the caller's; one and the same NotFound for missing, another
    tenant's and another user's."""
    try:
        record = load(who.tenant_id, record_id)
    except NotFound:
        record = None
    if record is None or record.user_id != who.user_id:  # type: ignore[attr-defined]
        raise NotFound(f"no {kind} {record_id!r}") from None
    return record
