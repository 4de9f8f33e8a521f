"""PostgreSQL ``RetentionStore``: deletes from the tables of the sessions, lanes, journal,
event outbox, deliveries and audit adapters (one database, so one transaction spans them).

Which sessions are due is one query (``_DUE``), as on SQLite: the CLOSED sessions of the
tenant created before the cutoff (the partial index ``sessions_closed`` of the sessions
adapter), closed before it (``updatedAt`` read as ``timestamptz``), with no process that is
not CLOSED or closed after the cutoff and no PENDING Inbox item from the session or one of
its processes (``NOT EXISTS`` on ``processes_by_session``, ``inbox_by_session`` and
``inbox_by_process``). Every condition is in the query, so a session held back never fills
the ``LIMIT`` in place of one that is due.

Atomicity (READ COMMITTED): each session is deleted in its own transaction, which locks the
session row ``FOR UPDATE`` and the ``lanes`` rows of its processes ``FOR UPDATE`` in
``process_id`` order (as every lane write does; ``SKIP LOCKED``: a session one of whose
lanes is busy elsewhere waits for the next purge), then checks with ``_DUE`` that it is
still due — under those locks nothing can reopen it or append to its processes — and
deletes children before parents: messages, chat, turns, timers, journal, event outbox,
lanes, processes, the session. A session is gone whole or not at all. Pods purging at once
meet on the session's row lock: the second finds it gone. Delivery records go in batches of
one ``DELETE … WHERE id IN (SELECT … ORDER BY created_ms LIMIT … FOR UPDATE SKIP LOCKED)``
(index ``deliveries_by_age``); audit records the same way (the audit adapter's index
``audit_by_tenant``: tenant, ``at_ms``, id).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from vancetope_brain.models import Session
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.retention import SESSION_KINDS, Due, RetentionStore
from vancetope_brain.store.sql import from_ms, to_ms

_TABLES = """
CREATE INDEX IF NOT EXISTS deliveries_by_age ON notification_deliveries (tenant_id, created_ms);
"""

_DUE = """
SELECT s.id, s.doc FROM sessions s
WHERE s.tenant_id = %(tenant)s AND s.doc->>'status' = 'CLOSED'
  AND s.created_ms < %(cutoff_ms)s
  AND (s.doc->>'updatedAt')::timestamptz < %(cutoff)s
  AND NOT EXISTS (
    SELECT 1 FROM processes p JOIN lanes l ON l.process_id = p.id
    WHERE p.tenant_id = s.tenant_id AND p.session_id = s.id
      AND (l.status <> 'CLOSED' OR (p.doc->>'updatedAt')::timestamptz >= %(cutoff)s))
  AND NOT EXISTS (
    SELECT 1 FROM inbox_items i
    WHERE i.tenant_id = s.tenant_id AND i.origin_session_id = s.id AND i.status = 'PENDING')
  AND NOT EXISTS (
    SELECT 1 FROM processes p JOIN inbox_items i
      ON i.tenant_id = p.tenant_id AND i.origin_process_id = p.id
    WHERE p.tenant_id = s.tenant_id AND p.session_id = s.id AND i.status = 'PENDING')
"""
"""The due sessions of ``%(tenant)s`` for the cutoff ``%(cutoff)s`` / ``%(cutoff_ms)s``; its
first terms are the partial index ``sessions_closed``'s."""

_OWNED = {"messages": "target_process_id", "chat": "process_id", "turns": "process_id",
          "turn_inspections": "process_id",
          "timers": "process_id", "journal": "process_id", "event_outbox": "process_id",
          "lanes": "process_id"}
"""The tables of a process's records, by the column naming the process (children first)."""

_MINE = "SELECT id FROM processes WHERE tenant_id = %(tenant)s AND session_id = %(session)s"


class PostgresRetention(PostgresAdapter, RetentionStore):
    tables = _TABLES

    def purge_closed_sessions(self, tenant_id: str, closed_before: datetime, *,
                              limit: int = 20) -> dict[str, int]:
        params = _params(tenant_id, closed_before)
        due = self.db.read(f"{_DUE} ORDER BY s.created_ms LIMIT %(limit)s",
                           {**params, "limit": limit})
        gone = dict.fromkeys(SESSION_KINDS, 0)
        for session_id, _ in due:
            with self.db.write() as conn:
                for kind, count in _purge_in(conn, {**params, "session": session_id}).items():
                    gone[kind] += count
        return gone

    def closed_sessions_due(self, tenant_id: str, closed_before: datetime) -> dict[str, Due]:
        params = _params(tenant_id, closed_before)
        sessions = [Session.load(doc) for _, doc in self.db.read(_DUE, params)]
        due = {"sessions": Due(len(sessions), min((s.updated_at for s in sessions),
                                                  default=None))}
        processes = (f"SELECT p.id FROM processes p WHERE p.tenant_id = %(tenant)s AND "
                     f"p.session_id IN (SELECT id FROM ({_DUE}) AS due)")
        due["processes"] = Due(self._count(f"SELECT count(*) FROM ({processes}) AS p", params))
        for table, column in _OWNED.items():
            if table in SESSION_KINDS:
                due[table] = Due(self._count(
                    f"SELECT count(*) FROM {table} WHERE tenant_id = %(tenant)s "
                    f"AND {column} IN ({processes})", params))
        return {kind: due[kind] for kind in SESSION_KINDS}

    def purge_deliveries(self, tenant_id: str, created_before: datetime, *,
                         limit: int = 500) -> int:
        return self.db.execute(
            "DELETE FROM notification_deliveries WHERE id IN ("
            "SELECT id FROM notification_deliveries WHERE tenant_id = %s AND created_ms < %s "
            "AND status <> 'QUEUED' ORDER BY created_ms LIMIT %s FOR UPDATE SKIP LOCKED)",
            (tenant_id, to_ms(created_before), limit))

    def deliveries_due(self, tenant_id: str, created_before: datetime) -> Due:
        count, oldest = self.db.read(
            "SELECT count(*), min(created_ms) FROM notification_deliveries "
            "WHERE tenant_id = %s AND created_ms < %s AND status <> 'QUEUED'",
            (tenant_id, to_ms(created_before)))[0]
        return Due(int(count), from_ms(oldest))

    def purge_audit(self, tenant_id: str, before: datetime, *, limit: int = 500) -> int:
        return self.db.execute(
            "DELETE FROM audit_log WHERE id IN ("
            "SELECT id FROM audit_log WHERE tenant_id = %s AND at_ms < %s "
            "ORDER BY at_ms LIMIT %s FOR UPDATE SKIP LOCKED)", (tenant_id, to_ms(before), limit))

    def audit_due(self, tenant_id: str, before: datetime) -> Due:
        count, oldest = self.db.read(
            "SELECT count(*), min(at_ms) FROM audit_log WHERE tenant_id = %s AND at_ms < %s",
            (tenant_id, to_ms(before)))[0]
        return Due(int(count), from_ms(oldest))

    def purge_inspections(self, tenant_id: str, before: datetime, *, limit: int = 500) -> int:
        return self.db.execute(
            "DELETE FROM turn_inspections WHERE id IN ("
            "SELECT id FROM turn_inspections WHERE tenant_id = %s AND at_ms < %s "
            "ORDER BY at_ms LIMIT %s FOR UPDATE SKIP LOCKED)", (tenant_id, to_ms(before), limit))

    def inspections_due(self, tenant_id: str, before: datetime) -> Due:
        count, oldest = self.db.read(
            "SELECT count(*), min(at_ms) FROM turn_inspections WHERE tenant_id = %s "
            "AND at_ms < %s", (tenant_id, to_ms(before)))[0]
        return Due(int(count), from_ms(oldest))

    def _count(self, sql: str, params: dict[str, Any]) -> int:
        return int(self.db.read(sql, params)[0][0])


def _params(tenant_id: str, cutoff: datetime) -> dict[str, Any]:
    return {"tenant": tenant_id, "cutoff": cutoff, "cutoff_ms": to_ms(cutoff)}


def _purge_in(conn: psycopg.Connection[Any], key: dict[str, Any]) -> dict[str, int]:
    """Lock the session and its lanes, check it is still due, and delete it children first
    inside ``conn``'s transaction; how many records of each kind went (all 0: not due, gone
    already, or a lane busy elsewhere)."""
    gone = dict.fromkeys(SESSION_KINDS, 0)
    if conn.execute("SELECT 1 FROM sessions WHERE tenant_id = %(tenant)s AND id = %(session)s "
                    "FOR UPDATE", key).fetchone() is None:
        return gone
    lanes = conn.execute("SELECT count(*) FROM processes WHERE tenant_id = %(tenant)s AND "
                         "session_id = %(session)s", key).fetchone()
    locked = conn.execute(f"SELECT process_id FROM lanes WHERE process_id IN ({_MINE}) "
                          "ORDER BY process_id FOR UPDATE SKIP LOCKED", key).fetchall()
    if lanes is None or len(locked) < lanes[0]:
        return gone  # a lane is busy elsewhere: the next purge looks again
    if conn.execute(f"{_DUE} AND s.id = %(session)s", key).fetchone() is None:
        return gone
    for table, column in _OWNED.items():
        count = conn.execute(f"DELETE FROM {table} WHERE tenant_id = %(tenant)s "
                             f"AND {column} IN ({_MINE})", key).rowcount
        if table in gone:
            gone[table] = count
    gone["processes"] = conn.execute(
        "DELETE FROM processes WHERE tenant_id = %(tenant)s AND session_id = %(session)s",
        key).rowcount
    gone["sessions"] = conn.execute(
        "DELETE FROM sessions WHERE tenant_id = %(tenant)s AND id = %(session)s", key).rowcount
    return gone
