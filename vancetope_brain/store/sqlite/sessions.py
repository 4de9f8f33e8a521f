"""SQLite ``SessionStore``: tables ``sessions``, ``processes`` and ``lanes``.

A process is two rows: its document in ``processes`` and, in ``lanes``, the
fields a lane turn changes (status, epoch, seqs, pending control, turn attempts),
which are
authoritative over ``doc``; ``load_process`` merges them. ``insert_process_in``
writes both inside the caller's transaction, so ``commit_turn`` (lanes) spawns
children atomically with the rest of its turn.

Atomicity: each call is one ``BEGIN IMMEDIATE`` transaction;
``update_session_status`` reads and rewrites the session inside it, so the
status check and the move are one step; so do ``set_details``, whose conditions (no
fingerprint, no title yet) are so checked in the step that writes.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

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
from vancetope_brain.store.sessions import SessionPage, SessionStore, page_cursor
from vancetope_brain.store.sql import from_ms, iso, row_position, sql_literals, to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all, load_one

UNSETTLED_LANES = f"status IN ({sql_literals(lifecycle.UNSETTLED)})"
"""The lanes the sweeper wakes without a message: the predicate of the partial index
``lanes_unsettled``, which ``SqliteLanes.unsettled`` repeats word for word."""

_TABLES = f"""
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, user_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions (tenant_id, user_id, created_ms);
CREATE INDEX IF NOT EXISTS sessions_open ON sessions (tenant_id, user_id)
    WHERE json_extract(doc, '$.status') != 'CLOSED';
-- A page of the user's sessions of one status, newest first, and their counts.
CREATE INDEX IF NOT EXISTS sessions_by_status
    ON sessions (tenant_id, user_id, json_extract(doc, '$.status'), created_ms);
-- The retention purge's candidates (``retention.py``): only CLOSED sessions.
CREATE INDEX IF NOT EXISTS sessions_closed ON sessions (tenant_id, created_ms)
    WHERE json_extract(doc, '$.status') = 'CLOSED';
CREATE TABLE IF NOT EXISTS processes (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, session_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS processes_by_session ON processes (tenant_id, session_id, created_ms);
-- The per-turn hot fields of a process, in a narrow row of their own.
-- (Columns added by a migration must be added in _MIGRATIONS too.)
CREATE TABLE IF NOT EXISTS lanes (
    process_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, status TEXT NOT NULL,
    epoch INTEGER NOT NULL, next_seq INTEGER NOT NULL, next_chat_seq INTEGER NOT NULL,
    pending_control TEXT, control_requested_ms INTEGER,
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
    2: ("ALTER TABLE lanes ADD COLUMN pending_control TEXT",
        "ALTER TABLE lanes ADD COLUMN control_requested_ms INTEGER"),
    7: ("ALTER TABLE lanes ADD COLUMN turn_attempts INTEGER NOT NULL DEFAULT 0",),
}

_PROCESS_SELECT = (
    "SELECT p.doc, l.status, l.epoch, l.next_seq, l.pending_control, l.control_requested_ms, "
    "l.turn_attempts FROM lanes l JOIN processes p ON p.id = l.process_id"
)
_PROCESS_BY_ID = f"{_PROCESS_SELECT} WHERE l.process_id = ? AND l.tenant_id = ?"

_PROCESS_OWNED = ("chat", "turns", "turn_inspections", "timers", "journal", "event_outbox",
                  "lanes")
"""The tables whose rows a process owns by ``process_id`` (deleted with it)."""

ProcessRow = tuple[str, str, int, int, str | None, int | None, int]
"""What ``load_process`` reads: doc, status, epoch, next_seq, pending_control,
control_requested_ms, turn_attempts."""


def load_process(row: ProcessRow) -> ThinkProcess:
    """A process from its row: ``doc`` with the ``lanes`` fields over it."""
    doc, status, epoch, next_seq, pending_control, control_requested_ms, turn_attempts = row
    raw = json.loads(doc)
    raw.update(status=status, epoch=epoch, nextSeq=next_seq, pendingControl=pending_control,
               controlRequestedAt=from_ms(control_requested_ms), turnAttempts=turn_attempts)
    return ThinkProcess.load(raw)


def process_row_in(conn: sqlite3.Connection, tenant_id: str, process_id: str) -> ProcessRow:
    """The process's row inside an open write transaction. Raises ``NotFound``."""
    row: ProcessRow | None = conn.execute(_PROCESS_BY_ID, (process_id, tenant_id)).fetchone()
    if row is None:
        raise NotFound(f"process {process_id} not found")
    return row


def insert_process_in(conn: sqlite3.Connection, process: ThinkProcess) -> None:
    """``create_process`` inside an open write transaction."""
    conn.execute(
        "INSERT INTO processes (id, tenant_id, session_id, created_ms, doc) "
        "VALUES (?, ?, ?, ?, ?)",
        (process.id, process.tenant_id, process.session_id, to_ms(process.created_at),
         process.model_dump_json(by_alias=True)),
    )
    conn.execute(
        "INSERT INTO lanes (process_id, tenant_id, status, epoch, next_seq, next_chat_seq, "
        "pending_control, control_requested_ms, turn_attempts) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)",
        (process.id, process.tenant_id, process.status.value, process.epoch,
         process.next_seq, process.pending_control,
         None if process.control_requested_at is None
         else to_ms(process.control_requested_at), process.turn_attempts),
    )


class SqliteSessions(SqliteAdapter, SessionStore):
    tables = _TABLES
    migrations = _MIGRATIONS

    def create_session(self, session: Session) -> None:
        self.db.execute(
            "INSERT INTO sessions (id, tenant_id, user_id, created_ms, doc) VALUES (?, ?, ?, ?, ?)",
            (session.id, session.tenant_id, session.user_id, to_ms(session.created_at),
             session.model_dump_json(by_alias=True)),
        )

    def get_session(self, tenant_id: str, session_id: str) -> Session:
        return load_one(Session, self.db.read("SELECT doc FROM sessions WHERE id = ? AND "
                                              "tenant_id = ?", (session_id, tenant_id)),
                        f"session {session_id} not found")

    def list_sessions(self, tenant_id: str, user_id: str, *,
                      status: SessionStatus | None = None, cursor: str | None = None,
                      limit: int) -> SessionPage:
        # Ordered by sessions_by_user (or sessions_by_status, whose expression the status
        # filter repeats word for word); every SQLite index ends in the rowid.
        where = "tenant_id = ? AND user_id = ?"
        params: list[object] = [tenant_id, user_id]
        if status is not None:
            where += " AND json_extract(doc, '$.status') = ?"
            params.append(status.value)
        if cursor is not None:
            created_ms, row = row_position(cursor)
            where += " AND created_ms <= ? AND (created_ms < ? OR rowid < ?)"
            params += [created_ms, created_ms, row]
        rows = self.db.read(f"SELECT doc, created_ms, rowid FROM sessions WHERE {where} "
                            "ORDER BY created_ms DESC, rowid DESC LIMIT ?", (*params, limit + 1))
        page = rows[:limit]
        return SessionPage(
            sessions=load_all(Session, page),
            next_cursor=page_cursor(page[-1][1], page[-1][2]) if len(rows) > limit else None)

    def count_sessions(self, tenant_id: str, user_id: str, *,
                       cap: int) -> dict[SessionStatus, int]:
        # One capped count a status, each on sessions_by_status.
        counts = self.db.read("SELECT " + ", ".join([
            "(SELECT count(*) FROM (SELECT 1 FROM sessions WHERE tenant_id = ? AND user_id = ? "
            "AND json_extract(doc, '$.status') = ? LIMIT ?))"] * len(SessionStatus)),
            tuple(v for s in SessionStatus for v in (tenant_id, user_id, s.value, cap)))[0]
        return dict(zip(SessionStatus, map(int, counts), strict=True))

    def set_chat_process(self, tenant_id: str, session_id: str, process_id: str) -> None:
        cursor = self.db.execute(
            "UPDATE sessions SET doc = json_set(doc, '$.chatProcessId', ?, '$.updatedAt', ?) "
            "WHERE id = ? AND tenant_id = ?",
            (process_id, iso(utcnow()), session_id, tenant_id),
        )
        if cursor.rowcount == 0:
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
            conn.execute("UPDATE sessions SET doc = ? WHERE id = ?",
                         (updated.model_dump_json(by_alias=True), session_id))
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
            conn.execute("UPDATE sessions SET doc = ? WHERE id = ?",
                         (updated.model_dump_json(by_alias=True), session_id))
        return updated

    def create_process(self, process: ThinkProcess) -> None:
        with self.db.write() as conn:
            insert_process_in(conn, process)

    def get_process(self, tenant_id: str, process_id: str) -> ThinkProcess:
        rows = self.db.read(_PROCESS_BY_ID, (process_id, tenant_id))
        if not rows:
            raise NotFound(f"process {process_id} not found")
        return load_process(rows[0])

    def list_processes(self, tenant_id: str, session_id: str, *,
                       open_only: bool = False) -> list[ThinkProcess]:
        closed = (ProcessStatus.CLOSED.value,) if open_only else ()
        still_open = "AND l.status != ? " if open_only else ""
        rows = self.db.read(
            f"{_PROCESS_SELECT} WHERE p.tenant_id = ? AND p.session_id = ? {still_open}"
            "ORDER BY p.created_ms, p.rowid",
            (tenant_id, session_id, *closed),
        )
        return [load_process(row) for row in rows]

    def purge_closed_processes(self, user_id: str, closed_before: datetime, *,
                               limit: int = 100) -> list[ThinkProcess]:
        # A process last changed before the cutoff was created before it: the created_ms
        # bound keeps the scan on old rows; updatedAt is checked on the loaded documents.
        with self.db.write() as conn:
            rows = conn.execute(
                f"{_PROCESS_SELECT} WHERE l.status = ? AND p.created_ms < ? "
                "AND json_extract(p.doc, '$.userId') = ? ORDER BY p.created_ms LIMIT ?",
                (ProcessStatus.CLOSED.value, to_ms(closed_before), user_id, limit)).fetchall()
            gone = [p for p in map(load_process, rows) if p.updated_at < closed_before]
            for process in gone:
                key = (process.id, process.tenant_id)
                conn.execute("DELETE FROM messages WHERE target_process_id = ? "
                             "AND tenant_id = ?", key)
                for table in _PROCESS_OWNED:
                    conn.execute(f"DELETE FROM {table} WHERE process_id = ? AND tenant_id = ?",
                                 key)
                conn.execute("DELETE FROM processes WHERE id = ? AND tenant_id = ?", key)
        return gone

    def set_context_drift(self, tenant_id: str, process_id: str, drift: bool) -> None:
        cursor = self.db.execute(
            "UPDATE processes SET doc = json_set(doc, '$.contextDrift', json(?)) "
            "WHERE id = ? AND tenant_id = ?",
            ("true" if drift else "false", process_id, tenant_id))
        if cursor.rowcount == 0:
            raise NotFound(f"process {process_id} not found")


def _session_in(conn: sqlite3.Connection, tenant_id: str, session_id: str) -> Session:
    """The session as ``conn``'s write transaction sees it, for a read-modify-write."""
    row = conn.execute("SELECT doc FROM sessions WHERE id = ? AND tenant_id = ?",
                       (session_id, tenant_id)).fetchone()
    if row is None:
        raise NotFound(f"session {session_id} not found")
    return Session.load(json.loads(row[0]))
