"""SQLite ``RetentionStore``: deletes from the tables of the sessions, lanes, journal, event
outbox, deliveries and audit adapters (one file, so one transaction spans them).

Which sessions are due is one query (``_DUE``): the CLOSED sessions of the tenant created
before the cutoff (the partial index ``sessions_closed`` of the sessions adapter; a session
closed before the cutoff was created before it), closed before it (``updatedAt``, compared as
``julianday``: documents spell times with or without fractions of a second, so their text
does not order), with no process that is not CLOSED or closed after the cutoff and no PENDING
Inbox item from the session or one of its processes (``NOT EXISTS`` on ``processes_by_session``
and ``inbox_by_session`` / ``inbox_by_process``). Every condition is in the query, so a
session held back (by a PENDING ask, say) never fills the ``LIMIT`` in place of one that is
due.

Atomicity: each session is deleted in its own ``BEGIN IMMEDIATE`` transaction, which first
checks with ``_DUE`` that it is still due, then deletes children before parents: messages,
chat (the ``chat_unindexed`` trigger of the session search adapter takes each line out of
its index), turns, timers, journal, event outbox, lanes, processes, the session. A session
is gone whole or not at all; transactions stay short (one session's rows), so a purge never
holds the write lock for long. Delivery records go in batches of one ``DELETE … LIMIT``
(through ``rowid IN (SELECT …)``: the oldest first by ``deliveries_by_age``); audit records
the same way, the oldest first by the audit adapter's ``audit_by_tenant`` (tenant, ``at_ms``,
id).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from vancetope_brain.models import Session
from vancetope_brain.store.retention import SESSION_KINDS, Due, RetentionStore
from vancetope_brain.store.sql import from_ms, iso, to_ms
from vancetope_brain.store.sqlite import SqliteAdapter

_TABLES = """
CREATE INDEX IF NOT EXISTS deliveries_by_age ON notification_deliveries (tenant_id, created_ms);
CREATE INDEX IF NOT EXISTS timers_by_process ON timers (tenant_id, process_id);
"""

_DUE = """
SELECT sessions.id, sessions.doc FROM sessions
WHERE sessions.tenant_id = :tenant AND json_extract(doc, '$.status') = 'CLOSED'
  AND sessions.created_ms < :cutoff_ms
  AND julianday(json_extract(sessions.doc, '$.updatedAt')) < julianday(:cutoff)
  AND NOT EXISTS (
    SELECT 1 FROM processes p JOIN lanes l ON l.process_id = p.id
    WHERE p.tenant_id = sessions.tenant_id AND p.session_id = sessions.id
      AND (l.status != 'CLOSED'
           OR julianday(json_extract(p.doc, '$.updatedAt')) >= julianday(:cutoff)))
  AND NOT EXISTS (
    SELECT 1 FROM inbox_items i
    WHERE i.tenant_id = sessions.tenant_id AND i.origin_session_id = sessions.id
      AND i.status = 'PENDING')
  AND NOT EXISTS (
    SELECT 1 FROM processes p JOIN inbox_items i
      ON i.tenant_id = p.tenant_id AND i.origin_process_id = p.id
    WHERE p.tenant_id = sessions.tenant_id AND p.session_id = sessions.id
      AND i.status = 'PENDING')
"""
"""The due sessions of ``:tenant`` for the cutoff ``:cutoff`` (ISO) / ``:cutoff_ms``. The
first terms are the partial index ``sessions_closed``'s, word for word."""

_OWNED = {"messages": "target_process_id", "chat": "process_id", "turns": "process_id",
          "turn_inspections": "process_id",
          "timers": "process_id", "journal": "process_id", "event_outbox": "process_id",
          "lanes": "process_id"}
"""The tables of a process's records, by the column naming the process (children first)."""


class SqliteRetention(SqliteAdapter, RetentionStore):
    tables = _TABLES

    def purge_closed_sessions(self, tenant_id: str, closed_before: datetime, *,
                              limit: int = 20) -> dict[str, int]:
        params = _params(tenant_id, closed_before)
        due = self.db.read(f"{_DUE} ORDER BY sessions.created_ms LIMIT :limit",
                           {**params, "limit": limit})
        gone = dict.fromkeys(SESSION_KINDS, 0)
        for session_id, _ in due:
            with self.db.write() as conn:
                if conn.execute(f"{_DUE} AND sessions.id = :session",
                                {**params, "session": session_id}).fetchone() is None:
                    continue  # no longer due (a new PENDING ask, say)
                for kind, count in _delete_session(conn, tenant_id, session_id).items():
                    gone[kind] += count
        return gone

    def closed_sessions_due(self, tenant_id: str, closed_before: datetime) -> dict[str, Due]:
        params = _params(tenant_id, closed_before)
        sessions = [Session.load(json.loads(doc))
                    for _, doc in self.db.read(_DUE, params)]
        due = {"sessions": Due(len(sessions), min((s.updated_at for s in sessions),
                                                  default=None))}
        processes = (f"SELECT p.id FROM processes p WHERE p.tenant_id = :tenant AND "
                     f"p.session_id IN (SELECT id FROM ({_DUE}))")
        due["processes"] = Due(self._count(f"SELECT count(*) FROM ({processes})", params))
        for table, column in _OWNED.items():
            if table in SESSION_KINDS:
                due[table] = Due(self._count(
                    f"SELECT count(*) FROM {table} WHERE tenant_id = :tenant "
                    f"AND {column} IN ({processes})", params))
        return {kind: due[kind] for kind in SESSION_KINDS}

    def purge_deliveries(self, tenant_id: str, created_before: datetime, *,
                         limit: int = 500) -> int:
        return self.db.execute(
            "DELETE FROM notification_deliveries WHERE rowid IN ("
            "SELECT rowid FROM notification_deliveries WHERE tenant_id = ? AND created_ms < ? "
            "AND status != 'QUEUED' ORDER BY created_ms LIMIT ?)",
            (tenant_id, to_ms(created_before), limit)).rowcount

    def deliveries_due(self, tenant_id: str, created_before: datetime) -> Due:
        count, oldest = self.db.read(
            "SELECT count(*), min(created_ms) FROM notification_deliveries "
            "WHERE tenant_id = ? AND created_ms < ? AND status != 'QUEUED'",
            (tenant_id, to_ms(created_before)))[0]
        return Due(int(count), from_ms(oldest))

    def purge_audit(self, tenant_id: str, before: datetime, *, limit: int = 500) -> int:
        return self.db.execute(
            "DELETE FROM audit_log WHERE rowid IN ("
            "SELECT rowid FROM audit_log WHERE tenant_id = ? AND at_ms < ? "
            "ORDER BY at_ms LIMIT ?)", (tenant_id, to_ms(before), limit)).rowcount

    def audit_due(self, tenant_id: str, before: datetime) -> Due:
        count, oldest = self.db.read(
            "SELECT count(*), min(at_ms) FROM audit_log WHERE tenant_id = ? AND at_ms < ?",
            (tenant_id, to_ms(before)))[0]
        return Due(int(count), from_ms(oldest))

    def purge_inspections(self, tenant_id: str, before: datetime, *, limit: int = 500) -> int:
        return self.db.execute(
            "DELETE FROM turn_inspections WHERE rowid IN ("
            "SELECT rowid FROM turn_inspections WHERE tenant_id = ? AND at_ms < ? "
            "ORDER BY at_ms LIMIT ?)", (tenant_id, to_ms(before), limit)).rowcount

    def inspections_due(self, tenant_id: str, before: datetime) -> Due:
        count, oldest = self.db.read(
            "SELECT count(*), min(at_ms) FROM turn_inspections WHERE tenant_id = ? "
            "AND at_ms < ?", (tenant_id, to_ms(before)))[0]
        return Due(int(count), from_ms(oldest))

    def _count(self, sql: str, params: dict[str, object]) -> int:
        return int(self.db.read(sql, params)[0][0])


def _params(tenant_id: str, cutoff: datetime) -> dict[str, object]:
    return {"tenant": tenant_id, "cutoff": iso(cutoff), "cutoff_ms": to_ms(cutoff)}


def _delete_session(conn: sqlite3.Connection, tenant_id: str,
                    session_id: str) -> dict[str, int]:
    """Delete the session and what its processes own inside ``conn``'s transaction, children
    first; how many records of each kind went."""
    key = {"tenant": tenant_id, "session": session_id}
    mine = "SELECT id FROM processes WHERE tenant_id = :tenant AND session_id = :session"
    gone = {}
    for table, column in _OWNED.items():
        gone[table] = conn.execute(f"DELETE FROM {table} WHERE tenant_id = :tenant "
                                   f"AND {column} IN ({mine})", key).rowcount
    gone["processes"] = conn.execute(
        "DELETE FROM processes WHERE tenant_id = :tenant AND session_id = :session",
        key).rowcount
    gone["sessions"] = conn.execute(
        "DELETE FROM sessions WHERE tenant_id = :tenant AND id = :session", key).rowcount
    return {kind: gone[kind] for kind in SESSION_KINDS}
