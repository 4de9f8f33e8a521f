"""The sessions port: sessions and the process documents they own."""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime

from vancetope_brain.models import Fingerprint, Session, SessionStatus, SuspendCause, ThinkProcess
from vancetope_brain.store.backend import Port


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
    def list_sessions(self, tenant_id: str, user_id: str) -> list[Session]:
        """The user's sessions, newest first."""

    @abstractmethod
    def count_open_sessions(self, tenant_id: str, user_id: str) -> int:
        """How many of the user's sessions are not CLOSED (an indexed count, however many
        sessions the user closed)."""

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
