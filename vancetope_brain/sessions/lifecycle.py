"""The session lifecycle (think-engines.txt §5-§6): binding clients, the onDisconnect policy,
the suspend cascade, resume with the client fingerprint, close, and the idle sweep.

Every process-level effect goes through lifecycle calls on the processes' own
lanes (``SessionService.control``); this module only decides which.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from vancetope_brain.errors import Conflict, FingerprintMismatch, NotFound
from vancetope_brain.events.presence import Presence
from vancetope_brain.identity import Principal
from vancetope_brain.models import (
    Fingerprint,
    OnDisconnect,
    ProcessStatus,
    Session,
    SessionStatus,
    SuspendCause,
    ThinkProcess,
    lifecycle,
)
from vancetope_brain.models.lifecycle import LifecycleCall
from vancetope_brain.sessions.service import SessionService
from vancetope_brain.store import LaneStore, SessionStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Bound:
    session: Session
    context_drift: bool


class SessionLifecycle:
    def __init__(self, *, store: SessionStore, lanes: LaneStore, sessions: SessionService,
                 presence: Presence) -> None:
        self._store = store
        self._lanes = lanes
        self._sessions = sessions
        self._presence = presence

    # ── clients ─────────────────────────────────────────────────────────
    def bind(self, who: Principal, session_id: str, connection_id: str,
             fingerprint: Fingerprint | None) -> Bound:
        """Attach a client connection; a SUSPENDED session resumes.

        Fingerprint policy (think-engines §6): the first fingerprint is stored;
        another machine is refused (``fingerprint_mismatch``) and the session stays
        as it was; the same machine in another working directory resumes the
        session but leaves its suspended processes SUSPENDED with ``contextDrift``
        for the user to decide (resume, stop or reset each). A client that sends
        none (a browser: no machine id, no working directory, no client tools) binds
        any session of its user, reading and writing through the server; the client
        tools stay with the fingerprint's machine (``check_tool_host``), and processes
        a drift left SUSPENDED stay so for the user's decision.
        """
        with self._presence.lock(session_id):
            session = self._sessions.get(who, session_id)
            if session.status is SessionStatus.CLOSED:
                raise Conflict(f"session {session_id!r} is CLOSED; create a new one")
            drift = self._check_fingerprint(session, fingerprint)
            self._presence.bind(who.tenant_id, session_id, connection_id)
            self._presence.touch(who.tenant_id, session_id, session.idle_timeout_sec)
            if session.status is SessionStatus.SUSPENDED:
                session, left = self._resume(who, session, drift,
                                             located=fingerprint is not None)
                drift = drift or left
            return Bound(session, drift)

    def check_tool_host(self, who: Principal, session_id: str,
                        fingerprint: Fingerprint | None) -> None:
        """Refuse (``fingerprint_mismatch``) a connection that bound with ``fingerprint``
        offering client tools to the session when a fingerprint of another machine, or
        one it did not send, is stored: client tools act on files of the machine the
        session was started on (think-engines §6), so only a client there offers them."""
        stored = self._sessions.get(who, session_id).fingerprint
        if stored is not None and (fingerprint is None or
                                   fingerprint.machine_id != stored.machine_id):
            raise FingerprintMismatch(
                "this session's client tools stay with the machine it was started on; this "
                "connection did not bind with that machine's fingerprint")

    def unbind(self, who: Principal, session_id: str, connection_id: str) -> None:
        """Detach a connection; when it was the session's last, apply ``onDisconnect``."""
        with self._presence.lock(session_id):
            self._presence.unbind(session_id, connection_id)
            if self._presence.count(session_id) == 0:
                self._last_client_gone(who.tenant_id, session_id)

    # ── explicit commands ───────────────────────────────────────────────
    def suspend(self, who: Principal, session_id: str,
                cause: SuspendCause = SuspendCause.USER) -> Session:
        """OPEN → SUSPENDED; every process that is not CLOSED gets ``suspend`` on its own
        lane (think-engines §6), PAUSED ones too: the lane remembers the pause (the suspend's
        turn record keeps the status it found), and the session's resume returns them to
        PAUSED, so a user's pause outlives the session's suspend and resume. A process not
        started yet (INIT) goes SUSPENDED without an engine call and starts on resume.
        """
        self._sessions.get(who, session_id)
        session = self._store.update_session_status(
            who.tenant_id, session_id, SessionStatus.SUSPENDED,
            allowed_from=frozenset({SessionStatus.OPEN}), suspend_cause=cause)
        self._cascade(who, session, LifecycleCall.SUSPEND)
        return session

    def resume(self, who: Principal, session_id: str) -> Session:
        """SUSPENDED → OPEN without a client, its suspended processes resumed: a system
        session's next job (think-engines §7b). Raises ``Conflict`` unless SUSPENDED."""
        return self._resume(who, self._sessions.get(who, session_id), drift=False)[0]

    def close(self, who: Principal, session_id: str) -> Session:
        """→ CLOSED; every process is stopped (CLOSED / STOPPED) on its own lane."""
        self._sessions.get(who, session_id)
        session = self._store.update_session_status(
            who.tenant_id, session_id, SessionStatus.CLOSED,
            allowed_from=frozenset({SessionStatus.OPEN, SessionStatus.SUSPENDED}))
        self._cascade(who, session, LifecycleCall.STOP)
        self._presence.forget(who.tenant_id, session_id)
        self._presence.drop_activity(who.tenant_id, session_id)
        return session

    # ── beat ────────────────────────────────────────────────────────────
    def sweep(self) -> int:
        """Apply ``onDisconnect`` to sessions whose gateway vanished, and suspend sessions
        idle past their timeout with no client bound. Returns how many sessions changed.
        """
        changed = 0
        for tenant_id, session_id in list(self._presence.abandoned()):
            with self._presence.lock(session_id):
                if self._presence.count(session_id) == 0:
                    changed += self._last_client_gone(tenant_id, session_id)
        for tenant_id, session_id in list(self._presence.idle()):
            if self._presence.count(session_id):
                continue  # a client is bound (no lock taken: that client's leaving decides)
            # Checked again under the lock a bind takes: a client binding meanwhile either
            # comes first (counted here) or after the suspend (and resumes the session).
            with self._presence.lock(session_id):
                if self._presence.count(session_id):
                    continue
                self._presence.drop_activity(tenant_id, session_id)
                session = self._stored(tenant_id, session_id)
                if session is not None and session.status is SessionStatus.OPEN:
                    changed += self._suspend_quietly(session, SuspendCause.IDLE)
        return changed

    # ── internals ───────────────────────────────────────────────────────
    def _stored(self, tenant_id: str, session_id: str) -> Session | None:
        """The session, or None (its presence forgotten) when the store has none: a stale
        Redis entry must not stop the sweep for every other session."""
        try:
            return self._store.get_session(tenant_id, session_id)
        except NotFound:
            log.warning("presence of session %s, which the store does not have; dropped",
                        session_id)
            self._presence.forget(tenant_id, session_id)
            return None

    def _last_client_gone(self, tenant_id: str, session_id: str) -> int:
        session = self._stored(tenant_id, session_id)
        self._presence.forget(tenant_id, session_id)
        if session is None or session.status is not SessionStatus.OPEN:
            return 0
        if session.on_disconnect is OnDisconnect.SUSPEND:
            return self._suspend_quietly(session, SuspendCause.DISCONNECT)
        if session.on_disconnect is OnDisconnect.CLOSE:
            self.close(Principal(tenant_id, session.user_id), session_id)
            return 1
        self._presence.touch(tenant_id, session_id, session.idle_timeout_sec)
        return 0

    def _suspend_quietly(self, session: Session, cause: SuspendCause) -> int:
        try:
            self.suspend(Principal(session.tenant_id, session.user_id), session.id, cause)
        except Conflict:  # suspended or closed meanwhile
            return 0
        return 1

    def _resume(self, who: Principal, session: Session, drift: bool,
                located: bool = True) -> tuple[Session, bool]:
        """Reopen the session and its suspended processes. ``located``: the client sent a
        fingerprint (else it cannot tell whether it is back where a drift was found, and
        leaves drifted processes SUSPENDED). Returns the session and whether processes were
        left SUSPENDED with ``contextDrift``."""
        session = self._store.update_session_status(
            who.tenant_id, session.id, SessionStatus.OPEN,
            allowed_from=frozenset({SessionStatus.SUSPENDED}))
        left = False
        for process in self._store.list_processes(who.tenant_id, session.id):
            # A suspend still waiting for its lane counts as suspended: resume replaces it.
            if process.status is not ProcessStatus.SUSPENDED and \
                    process.pending_control != LifecycleCall.SUSPEND:
                continue
            if drift:
                self._store.set_context_drift(who.tenant_id, process.id, True)
                left = True
            elif process.context_drift and not located:
                left = True
            else:
                if process.context_drift:  # the original client is back where it was
                    self._store.set_context_drift(who.tenant_id, process.id, False)
                self._undo_suspend(who, process)
        return session, left

    def _undo_suspend(self, who: Principal, process: ThinkProcess) -> None:
        """Resume a SUSPENDED process, or replace a suspend still waiting for its lane with
        a call the lane drops: a resume where the suspend would have found it running, a
        pause (dropped, as it is PAUSED already) where the user had paused it. The status
        may move meanwhile (the suspend ran): then the current one decides, once more."""
        for _ in range(2):
            call = LifecycleCall.PAUSE if process.status is ProcessStatus.PAUSED \
                else LifecycleCall.RESUME
            try:
                self._lanes.request_control(who.tenant_id, process.id, call,
                                            lifecycle.UNDO_SUSPEND_FROM[call])
            except Conflict as e:
                log.info("session resume: %s of %s skipped: %s", call.value, process.id, e)
                process = self._store.get_process(who.tenant_id, process.id)
                continue
            self._sessions.wake(who.tenant_id, process.id)
            return

    def _cascade(self, who: Principal, session: Session, call: LifecycleCall) -> None:
        for process in self._store.list_processes(who.tenant_id, session.id):
            if process.status in lifecycle.CASCADE_SKIPS[call]:
                continue
            if call is LifecycleCall.SUSPEND and process.pending_control == LifecycleCall.PAUSE:
                # Replacing the user's pause would lose it: its lane pauses, then finds the
                # session SUSPENDED and suspends (LaneRunner._suspend_if_session_is).
                continue
            self._request(who, process.id, call)

    def _request(self, who: Principal, process_id: str, call: LifecycleCall) -> None:
        try:
            self._sessions.control(who, process_id, call, by_system=True)
        except Conflict as e:  # changed status meanwhile (e.g. still INIT, or just closed)
            log.info("session cascade: %s of %s skipped: %s", call.value, process_id, e)

    def _check_fingerprint(self, session: Session, fingerprint: Fingerprint | None) -> bool:
        stored = session.fingerprint
        if stored is None:
            if fingerprint is not None:
                self._store.set_details(session.tenant_id, session.id, fingerprint=fingerprint,
                                         only_unset=True)
            return False
        if fingerprint is None:  # a browser: nothing of that machine is reached from here
            return False
        if fingerprint.machine_id != stored.machine_id:
            raise FingerprintMismatch(
                "this session is bound to another machine; create a new session here "
                "(the original client can still resume it, and a browser can open it)")
        return fingerprint.working_dir != stored.working_dir
