"""System sessions (think-engines §7b "System Session Bootstrap").

One per (tenant, project, service), owned by ``_system`` (no user id can start with
``_``, so no user owns, lists or binds one), titled ``_<service>``, marked ``system``.
Created lazily by the service's first job, with the lifecycle of the service recipe's
``systemSession``: every job counts as activity, and a session idle past its
``idleTimeoutSec`` is SUSPENDED by the session sweep like any other; the next job
resumes it. A CLOSED one (an operator closed it) is replaced by a new one.

Retention: the housekeeping beat deletes ``_system``'s processes CLOSED for longer than
``retention`` seconds (``VANCETOPE_SERVICE_RETENTION``), with their chat and what else
their lanes own (``purge``), so closed diagnoses do not pile up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta

import redis

from vancetope_brain import keys
from vancetope_brain.events.presence import Presence
from vancetope_brain.identity import Principal
from vancetope_brain.models import OnDisconnect, Session, SessionStatus, SessionType, new_id
from vancetope_brain.models.recipe import SystemSessionSpec
from vancetope_brain.sessions.lifecycle import SessionLifecycle
from vancetope_brain.store import SessionStore
from vancetope_brain.store.sessions import every_session

log = logging.getLogger(__name__)

SYSTEM_USER = "_system"
"""The owner of every system session and its processes."""


def system_sessions(store: SessionStore, tenant_id: str) -> Iterator[Session]:
    """Every system session of the tenant, newest first, a page at a time (what
    ``vancetope admin system-session list`` shows)."""
    return (s for s in every_session(store, tenant_id, SYSTEM_USER) if s.system)


class SystemSessions:
    def __init__(self, *, store: SessionStore, lifecycle: SessionLifecycle, presence: Presence,
                 client: redis.Redis, retention: float = 604800.0) -> None:
        self._store = store
        self._retention = timedelta(seconds=retention)
        self._lifecycle = lifecycle
        self._presence = presence
        self._redis = client

    def open_for(self, tenant_id: str, project_id: str, service: str,
                 spec: SystemSessionSpec) -> Session:
        """The OPEN system session of the service in the project: found, resumed or
        created (one at a time per service, under a short Redis lock), its idle deadline
        pushed back by ``spec.idleTimeoutSec``."""
        with self._redis.lock(keys.system_session_lock(tenant_id, project_id, service),
                              timeout=10, blocking_timeout=10, thread_local=False):
            session = self.find(tenant_id, project_id, service)
            if session is None:
                session = Session(id=new_id("ses"), tenant_id=tenant_id, user_id=SYSTEM_USER,
                                  project_id=project_id, type=SessionType.AUTONOMOUS,
                                  title=f"_{service}", on_disconnect=OnDisconnect.KEEP_OPEN,
                                  idle_timeout_sec=spec.idle_timeout_sec, system=True)
                self._store.create_session(session)
            elif session.status is SessionStatus.SUSPENDED:
                session = self._lifecycle.resume(Principal(tenant_id, SYSTEM_USER), session.id)
        self._presence.touch(tenant_id, session.id, session.idle_timeout_sec)
        return session

    def find(self, tenant_id: str, project_id: str, service: str) -> Session | None:
        """The service's system session in the project that is not CLOSED, if any (read
        among the OPEN and SUSPENDED ones: one per project and service at most)."""
        return next((s for status in (SessionStatus.OPEN, SessionStatus.SUSPENDED)
                     for s in every_session(self._store, tenant_id, SYSTEM_USER, status=status)
                     if s.system and s.project_id == project_id and s.title == f"_{service}"),
                    None)

    def purge(self, now: datetime, *, limit: int = 100) -> int:
        """Delete up to ``limit`` service processes CLOSED longer than the retention, across
        tenants (housekeeping); the number deleted."""
        gone = self._store.purge_closed_processes(SYSTEM_USER, now - self._retention,
                                                  limit=limit)
        if gone:
            log.info("deleted %d service process(es) closed for over %s", len(gone),
                     self._retention)
        return len(gone)

