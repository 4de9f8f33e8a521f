"""PostgreSQL ``SessionStore``: tables ``sessions``, ``processes`` and ``lanes``.

A process is two rows: its document in ``processes`` and, in ``lanes``, the
fields a lane turn changes (status, epoch, seqs, pending control, turn attempts),
which are authoritative over ``doc``; ``load_process`` merges them.
``insert_process_in`` writes both inside the caller's transaction, so ``commit_turn``
(lanes) spawns children atomically with the rest of its turn.

The ``lanes`` row is the lock of its process: every write that decides on a lane's
state (``acquire_epoch``, ``request_control``, ``append_in``, ``commit_turn``, the
journal's ``record_steps``, a dead letter's requeue, ``fire_timer``, the purge) first
takes it ``FOR UPDATE`` (``lane_lock_in``), so those writes of one process run one
after the other and its sequence numbers are gap-free and visible in order. A
transaction that locks several lanes locks them in ``process_id`` order.

Atomicity: each call is one transaction at READ COMMITTED. ``update_session_status``
and ``set_details`` read the session ``FOR UPDATE`` and rewrite it, so the status check
(or the "not set yet" check) and the write are one step; ``set_chat_process`` and
``set_context_drift`` are single ``UPDATE``s of the document. ``purge_closed_processes``
takes the lanes of the CLOSED processes it deletes ``FOR UPDATE SKIP LOCKED`` (pods
purging at once share the work; a lane busy elsewhere waits for the next batch).

Order: ``row_no`` (an identity column) breaks ties of ``created_ms`` in insertion
order, as SQLite's ``rowid`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import (
    Fingerprint,
    ProcessStatus,
    Session,
    SessionStatus,
    SuspendCause,
    ThinkProcess,
    lifecycle,
    utcnow,
)
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, load_all, load_one
from vancetope_brain.store.sessions import SessionPage, SessionStore, page_cursor
from vancetope_brain.store.sql import from_ms, iso, row_position, sql_literals, to_ms

UNSETTLED_LANES = f"status IN ({sql_literals(lifecycle.UNSETTLED)})"
"""The lanes the sweeper wakes without a message: the predicate of the partial index
``lanes_unsettled``, which ``PostgresLanes.unsettled`` repeats word for word."""

_TABLES = f"""
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, user_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL, doc JSONB NOT NULL,
    row_no BIGINT GENERATED ALWAYS AS IDENTITY
);
-- A page of the user's sessions, newest first, in index order (no sort of their history).
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions (tenant_id, user_id, created_ms, row_no);
CREATE INDEX IF NOT EXISTS sessions_open ON sessions (tenant_id, user_id)
    WHERE doc->>'status' <> 'CLOSED';
-- A page of the user's sessions of one status, newest first, and their counts.
CREATE INDEX IF NOT EXISTS sessions_by_status
    ON sessions (tenant_id, user_id, (doc->>'status'), created_ms, row_no);
-- The retention purge's candidates (``retention.py``): only CLOSED sessions.
CREATE INDEX IF NOT EXISTS sessions_closed ON sessions (tenant_id, created_ms)
    WHERE doc->>'status' = 'CLOSED';
CREATE TABLE IF NOT EXISTS processes (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, session_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL, doc JSONB NOT NULL,
    row_no BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX IF NOT EXISTS processes_by_session ON processes (tenant_id, session_id, created_ms);
CREATE INDEX IF NOT EXISTS processes_by_age ON processes (created_ms);
-- The per-turn hot fields of a process, in a narrow row of their own (and its lock).
CREATE TABLE IF NOT EXISTS lanes (
    process_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, status TEXT NOT NULL,
    epoch BIGINT NOT NULL, next_seq BIGINT NOT NULL, next_chat_seq BIGINT NOT NULL,
    pending_control TEXT, control_requested_ms BIGINT,
    turn_attempts INTEGER NOT NULL DEFAULT 0
);
-- The sweeper's lifecycle calls left waiting: only lanes with a pending call.
CREATE INDEX IF NOT EXISTS lanes_control
    ON lanes (control_requested_ms) WHERE pending_control IS NOT NULL;
-- The sweeper's unsettled lanes (a lost start, a dead turn): only INIT and RUNNING ones.
CREATE INDEX IF NOT EXISTS lanes_unsettled
    ON lanes (process_id) WHERE {UNSETTLED_LANES};
"""

_MIGRATIONS = {
    # 3: sessions_by_user gains row_no (the table script makes it anew).
    3: ("DROP INDEX IF EXISTS sessions_by_user",),
}

PROCESS_COLUMNS = ("p.doc, l.status, l.epoch, l.next_seq, l.pending_control, "
                   "l.control_requested_ms, l.turn_attempts")
"""A ``ProcessRow`` of ``lanes l JOIN processes p``."""
_PROCESS_SELECT = f"SELECT {PROCESS_COLUMNS} FROM lanes l JOIN processes p ON p.id = l.process_id"
PROCESS_BY_ID = f"{_PROCESS_SELECT} WHERE l.process_id = %s AND l.tenant_id = %s"

_PROCESS_OWNED = ("chat", "turns", "turn_inspections", "timers", "journal", "event_outbox",
                  "lanes")
"""The tables whose rows a process owns by ``process_id`` (deleted with it)."""

ProcessRow = tuple[dict[str, Any], str, int, int, str | None, int | None, int]
"""What ``load_process`` reads: doc, status, epoch, next_seq, pending_control,
control_requested_ms, turn_attempts."""


def load_process(row: ProcessRow) -> ThinkProcess:
    """A process from its row: ``doc`` with the ``lanes`` fields over it."""
    doc, status, epoch, next_seq, pending_control, control_requested_ms, turn_attempts = row
    raw = dict(doc)
    raw.update(status=status, epoch=epoch, nextSeq=next_seq, pendingControl=pending_control,
               controlRequestedAt=from_ms(control_requested_ms), turnAttempts=turn_attempts)
    return ThinkProcess.load(raw)


def process_row_in(conn: psycopg.Connection[Any], tenant_id: str,
                   process_id: str) -> ProcessRow:
    """The process's row inside an open transaction, its ``lanes`` row locked
    ``FOR UPDATE`` until the transaction ends. Raises ``NotFound``."""
    row: ProcessRow | None = conn.execute(f"{PROCESS_BY_ID} FOR UPDATE OF l",
                                          (process_id, tenant_id)).fetchone()
    if row is None:
        raise NotFound(f"process {process_id} not found")
    return row


def lane_lock_in(conn: psycopg.Connection[Any], process_ids: Sequence[str]) -> None:
    """Lock the ``lanes`` rows of ``process_ids`` (those that exist) ``FOR UPDATE``, in
    ``process_id`` order, inside an open transaction: what a transaction that will touch
    several lanes does first, so that two such transactions never deadlock."""
    ids = sorted(set(process_ids))
    if len(ids) > 1:
        conn.execute('SELECT 1 FROM lanes WHERE process_id = ANY(%s) '
                     'ORDER BY process_id COLLATE "C" FOR UPDATE', (ids,))


def insert_process_in(conn: psycopg.Connection[Any], process: ThinkProcess) -> None:
    """``create_process`` inside an open transaction."""
    conn.execute(
        "INSERT INTO processes (id, tenant_id, session_id, created_ms, doc) "
        "VALUES (%s, %s, %s, %s, %s)",
        (process.id, process.tenant_id, process.session_id, to_ms(process.created_at),
         doc_json(process)),
    )
    conn.execute(
        "INSERT INTO lanes (process_id, tenant_id, status, epoch, next_seq, next_chat_seq, "
        "pending_control, control_requested_ms, turn_attempts) "
        "VALUES (%s, %s, %s, %s, %s, 0, %s, %s, %s)",
        (process.id, process.tenant_id, process.status.value, process.epoch,
         process.next_seq, process.pending_control,
         None if process.control_requested_at is None
         else to_ms(process.control_requested_at), process.turn_attempts),
    )


class PostgresSessions(PostgresAdapter, SessionStore):
    tables = _TABLES
    migrations = _MIGRATIONS

    def create_session(self, session: Session) -> None:
        self.db.execute(
            "INSERT INTO sessions (id, tenant_id, user_id, created_ms, doc) "
            "VALUES (%s, %s, %s, %s, %s)",
            (session.id, session.tenant_id, session.user_id, to_ms(session.created_at),
             doc_json(session)),
        )

    def get_session(self, tenant_id: str, session_id: str) -> Session:
        return load_one(Session, self.db.read("SELECT doc FROM sessions WHERE id = %s AND "
                                              "tenant_id = %s", (session_id, tenant_id)),
                        f"session {session_id} not found")

    def list_sessions(self, tenant_id: str, user_id: str, *,
                      status: SessionStatus | None = None, cursor: str | None = None,
                      limit: int) -> SessionPage:
        # Read in the order of sessions_by_user, or of sessions_by_status, whose expression
        # the status filter repeats word for word.
        where = "tenant_id = %s AND user_id = %s"
        params: list[object] = [tenant_id, user_id]
        if status is not None:
            where += " AND doc->>'status' = %s"
            params.append(status.value)
        if cursor is not None:
            created_ms, row = row_position(cursor)
            where += " AND created_ms <= %s AND (created_ms < %s OR row_no < %s)"
            params += [created_ms, created_ms, row]
        rows = self.db.read(f"SELECT doc, created_ms, row_no FROM sessions WHERE {where} "
                            "ORDER BY created_ms DESC, row_no DESC LIMIT %s", (*params, limit + 1))
        page = rows[:limit]
        return SessionPage(
            sessions=load_all(Session, page),
            next_cursor=page_cursor(page[-1][1], page[-1][2]) if len(rows) > limit else None)

    def count_sessions(self, tenant_id: str, user_id: str, *,
                       cap: int) -> dict[SessionStatus, int]:
        # One capped count a status, each on sessions_by_status.
        counts = self.db.read("SELECT " + ", ".join([
            "(SELECT count(*) FROM (SELECT 1 FROM sessions WHERE tenant_id = %s "
            "AND user_id = %s AND doc->>'status' = %s LIMIT %s) AS capped)"] * len(SessionStatus)),
            tuple(v for s in SessionStatus for v in (tenant_id, user_id, s.value, cap)))[0]
        return dict(zip(SessionStatus, map(int, counts), strict=True))

    def set_chat_process(self, tenant_id: str, session_id: str, process_id: str) -> None:
        changed = self.db.execute(
            "UPDATE sessions SET doc = doc || jsonb_build_object('chatProcessId', %s::text, "
            "'updatedAt', %s::text) WHERE id = %s AND tenant_id = %s",
            (process_id, iso(utcnow()), session_id, tenant_id),
        )
        if changed == 0:
            raise NotFound(f"session {session_id} not found")

    def update_session_status(self, tenant_id: str, session_id: str, status: SessionStatus, *,
                              allowed_from: frozenset[SessionStatus],
                              suspend_cause: SuspendCause | None = None) -> Session:
        with self.db.write() as conn:
            current = _session_in(conn, tenant_id, session_id)
            if current.status not in allowed_from:
                raise Conflict(f"session {session_id} is {current.status.value}; cannot make it "
                               f"{status.value}")
            updated = current.model_copy(update={"status": status, "suspend_cause": suspend_cause,
                                                 "updated_at": utcnow()})
            conn.execute("UPDATE sessions SET doc = %s WHERE id = %s",
                         (doc_json(updated), session_id))
        return updated

    def set_details(self, tenant_id: str, session_id: str, *, title: str | None = None,
                    fingerprint: Fingerprint | None = None,
                    only_unset: bool = False) -> Session:
        with self.db.write() as conn:
            current = _session_in(conn, tenant_id, session_id)
            change: dict[str, object] = {}
            if title is not None and not (only_unset and current.title):
                change["title"] = title
            if fingerprint is not None and not (only_unset and current.fingerprint):
                change["fingerprint"] = fingerprint
            if not change:
                return current
            updated = current.model_copy(update={**change, "updated_at": utcnow()})
            conn.execute("UPDATE sessions SET doc = %s WHERE id = %s",
                         (doc_json(updated), session_id))
        return updated

    def create_process(self, process: ThinkProcess) -> None:
        with self.db.write() as conn:
            insert_process_in(conn, process)

    def get_process(self, tenant_id: str, process_id: str) -> ThinkProcess:
        rows = self.db.read(PROCESS_BY_ID, (process_id, tenant_id))
        if not rows:
            raise NotFound(f"process {process_id} not found")
        return load_process(rows[0])

    def list_processes(self, tenant_id: str, session_id: str, *,
                       open_only: bool = False) -> list[ThinkProcess]:
        closed = (ProcessStatus.CLOSED.value,) if open_only else ()
        still_open = "AND l.status <> %s " if open_only else ""
        rows = self.db.read(
            f"{_PROCESS_SELECT} WHERE p.tenant_id = %s AND p.session_id = %s {still_open}"
            "ORDER BY p.created_ms, p.row_no",
            (tenant_id, session_id, *closed),
        )
        return [load_process(row) for row in rows]

    def purge_closed_processes(self, user_id: str, closed_before: datetime, *,
                               limit: int = 100) -> list[ThinkProcess]:
        # A process last changed before the cutoff was created before it: the created_ms
        # bound keeps the scan on old rows; updatedAt is checked on the loaded documents.
        # The lanes are locked (skipping those another purge or a late append holds), and
        # their status is read under the lock, so nothing reopens what is deleted.
        with self.db.write() as conn:
            rows = conn.execute(
                f"{_PROCESS_SELECT} WHERE l.status = %s AND p.created_ms < %s "
                "AND p.doc->>'userId' = %s ORDER BY p.created_ms LIMIT %s "
                "FOR UPDATE OF l SKIP LOCKED",
                (ProcessStatus.CLOSED.value, to_ms(closed_before), user_id, limit)).fetchall()
            gone = [p for p in map(load_process, rows) if p.updated_at < closed_before]
            by_tenant: dict[str, list[str]] = {}
            for process in gone:
                by_tenant.setdefault(process.tenant_id, []).append(process.id)
            for tenant_id, ids in by_tenant.items():
                conn.execute("DELETE FROM messages WHERE target_process_id = ANY(%s) "
                             "AND tenant_id = %s", (ids, tenant_id))
                for table in _PROCESS_OWNED:
                    conn.execute(f"DELETE FROM {table} WHERE process_id = ANY(%s) "
                                 "AND tenant_id = %s", (ids, tenant_id))
                conn.execute("DELETE FROM processes WHERE id = ANY(%s) AND tenant_id = %s",
                             (ids, tenant_id))
        return gone

    def set_context_drift(self, tenant_id: str, process_id: str, drift: bool) -> None:
        changed = self.db.execute(
            "UPDATE processes SET doc = jsonb_set(doc, '{contextDrift}', to_jsonb(%s::boolean)) "
            "WHERE id = %s AND tenant_id = %s", (drift, process_id, tenant_id))
        if changed == 0:
            raise NotFound(f"process {process_id} not found")


def _session_in(conn: psycopg.Connection[Any], tenant_id: str, session_id: str) -> Session:
    """The session locked ``FOR UPDATE`` in ``conn``'s transaction, for a
    read-modify-write."""
    row = conn.execute("SELECT doc FROM sessions WHERE id = %s AND tenant_id = %s FOR UPDATE",
                       (session_id, tenant_id)).fetchone()
    if row is None:
        raise NotFound(f"session {session_id} not found")
    return Session.load(row[0])
