"""The sessions port: sessions and the process documents they own.

A user's sessions are read a page at a time (``list_sessions``) and counted up to a cap
(``count_sessions``), so a user with 10,000 closed sessions costs a read what one with 10
does. A page's ``next_cursor`` is opaque: ``<createdAt ms>|<key>``, the position of the
page's last session, where ``key`` is what breaks ties of one millisecond in the adapter's
order (the SQL row number: insertion order; MongoDB: the session id).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models import Fingerprint, Session, SessionStatus, SuspendCause, ThinkProcess
from vancetope_brain.store.backend import Port

BAD_CURSOR = "cursor is not a nextCursor of session-list"
"""The message of the ``InvalidInput`` (code ``invalid_input``) a cursor not made here
raises."""


@dataclass(frozen=True)
class SessionPage:
    """A page of ``SessionStore.list_sessions``: the sessions, newest first, and the cursor
    of the next page (None at the end)."""

    sessions: list[Session]
    next_cursor: str | None


def page_cursor(created_ms: int, key: object) -> str:
    """The cursor of the page after a session at (``created_ms``, ``key``)."""
    return f"{created_ms}|{key}"


def cursor_position(cursor: str) -> tuple[int, str]:
    """The (createdAt ms, key) a ``page_cursor`` holds. Raises ``InvalidInput``."""
    at, sep, key = cursor.partition("|")
    if not (sep and key and at.isascii() and at.isdigit()):
        raise InvalidInput(BAD_CURSOR)
    return int(at), key


def every_session(store: SessionStore, tenant_id: str, user_id: str, *,
                  status: SessionStatus | None = None,
                  page_size: int = 200) -> Iterator[Session]:
    """Each of the user's sessions (of ``status``), newest first, read a page at a time:
    for operators' and services' reads of a user whose sessions are few (the system user's);
    a request of a user reads one page."""
    cursor: str | None = None
    while True:
        page = store.list_sessions(tenant_id, user_id, status=status, cursor=cursor,
                                   limit=page_size)
        yield from page.sessions
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


class SessionStore(Port):
    """Sessions and their processes.

    Each call is one atomic write or read of one document. A process's lane
    fields (status, epoch, sequence counters, pending control) change only
    through ``LaneStore``; here a process is created and read, and its
    ``contextDrift`` flag set.
    """

    @abstractmethod
    def create_session(self, session: Session) -> None:
        """Insert a session."""

    @abstractmethod
    def get_session(self, tenant_id: str, session_id: str) -> Session:
        """The session. Raises ``NotFound``."""

    @abstractmethod
    def list_sessions(self, tenant_id: str, user_id: str, *,
                      status: SessionStatus | None = None, cursor: str | None = None,
                      limit: int) -> SessionPage:
        """A page of at most ``limit`` (≥ 1) of the user's sessions (of ``status`` if given),
        newest first (``createdAt`` descending, ties as the module says); ``cursor``: the
        ``next_cursor`` of the previous page read with the same ``status``. The query
        filters and orders on an index, so it reads the page, not the user's history.
        Raises ``InvalidInput`` for a cursor not made by ``next_cursor``."""

    @abstractmethod
    def count_sessions(self, tenant_id: str, user_id: str, *,
                       cap: int) -> dict[SessionStatus, int]:
        """How many of the user's sessions each status has, each counted up to ``cap`` (a
        count of ``cap`` means at least that many): index counts that read at most ``cap``
        entries a status."""

    @abstractmethod
    def set_chat_process(self, tenant_id: str, session_id: str, process_id: str) -> None:
        """Atomically set ``chatProcessId`` of the session. Raises ``NotFound``."""

    @abstractmethod
    def update_session_status(self, tenant_id: str, session_id: str, status: SessionStatus, *,
                              allowed_from: frozenset[SessionStatus],
                              suspend_cause: SuspendCause | None = None) -> Session:
        """Atomically move the session to ``status`` if its status is in ``allowed_from``;
        sets ``suspendCause`` (cleared unless given) and ``updatedAt``. Returns the updated
        session. Raises ``Conflict`` naming the current status, or ``NotFound``.
        """

    @abstractmethod
    def set_details(self, tenant_id: str, session_id: str, *, title: str | None = None,
                    fingerprint: Fingerprint | None = None,
                    only_unset: bool = False) -> Session:
        """Set what clients tell of a session, each field given: its ``title``, the
        ``fingerprint`` of the client that bound it (and ``updatedAt``). With ``only_unset``
        each only where the session has none yet (an empty title, no fingerprint),
        atomically: the first bind's fingerprint wins, and a title taken from a message
        never replaces one. Returns the session as stored. Raises ``NotFound``."""

    @abstractmethod
    def create_process(self, process: ThinkProcess) -> None:
        """Insert a process document (status INIT, epoch 0)."""

    @abstractmethod
    def get_process(self, tenant_id: str, process_id: str) -> ThinkProcess:
        """The process. Raises ``NotFound``."""

    @abstractmethod
    def list_processes(self, tenant_id: str, session_id: str, *,
                       open_only: bool = False) -> list[ThinkProcess]:
        """The session's processes, oldest first; with ``open_only`` those not CLOSED (the
        query skips CLOSED ones: a session's cap check reads only what it counts)."""

    @abstractmethod
    def purge_closed_processes(self, user_id: str, closed_before: datetime, *,
                               limit: int = 100) -> list[ThinkProcess]:
        """SYSTEM query across tenants (housekeeping): delete up to ``limit`` of the
        ``user_id``'s CLOSED processes last changed (``updatedAt``, the closing commit)
        before ``closed_before``, with what their lanes own (inbox messages, chat, turn
        records, timers, journal, event outbox); returns the deleted processes."""

    @abstractmethod
    def set_context_drift(self, tenant_id: str, process_id: str, drift: bool) -> None:
        """Set the process's ``contextDrift`` flag. Raises ``NotFound``."""
