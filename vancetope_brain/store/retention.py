"""The retention port: what the purge deletes once a tenant's retention has passed.

Three kinds of data age out (``docs/operations.md``, "Data lifecycle"): a CLOSED session, deleted
whole with its processes and everything they own, the notification delivery log, the
operators' audit log (``AuditStore``'s records) and the inspector's turn records
(``InspectorStore``'s). What is
never deleted here: a session that is not CLOSED or has a process that is not CLOSED, a session
an Inbox item that is still PENDING came from (by its ``originSessionId`` or the
``originProcessId`` of one of the session's processes), Inbox items themselves (audit,
user-interaction §5), memory entries, knowledge documents, and a QUEUED delivery (the e-mail
batch still owes it).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from datetime import datetime

from vancetope_brain.store.backend import Port

SESSION_KINDS = ("sessions", "processes", "messages", "chat", "turns", "turn_inspections",
                 "timers", "journal", "event_outbox")
"""What a closed session is deleted with, by kind: the session document, its process
documents (with their lanes), the steer and inbox messages addressed to those processes
(dead letters too), their chat lines, turn records, inspector records, timers, journal entries and unpublished
events."""

DELIVERIES = "deliveries"
"""The kind of the notification delivery log."""

AUDIT = "audit"
"""The kind of the operators' audit log."""

INSPECTIONS = "inspections"
"""The kind of the inspector's turn records past their own retention (``InspectorStore``;
a CLOSED session's go with it as ``turn_inspections``)."""


@dataclass(frozen=True)
class Due:
    """What a purge would delete of one kind: how many records, and the oldest one's time
    (a session's closing, a delivery's creation, an audit record's ``at``; None where not told
    or nothing is due)."""

    count: int
    oldest: datetime | None = None


class RetentionStore(Port):
    """Deletes a tenant's data past its retention, in bounded batches.

    A session is *due* when it is CLOSED and was last changed (``updatedAt``: its closing)
    before ``closed_before``, every process of it is CLOSED and was last changed before
    ``closed_before`` too, and no PENDING Inbox item came from it or one of its processes.

    Atomicity: on SQLite and PostgreSQL one session goes in one transaction that checks it is
    still due (so nothing of it is ever half gone). On MongoDB (no multi-document
    transactions) a session's records go children first, process by process, the session
    document last: a crash part way leaves a session that is still due, with part of its
    chat, and the next purge finishes it. Idempotent: purging again deletes nothing more.
    """

    @abstractmethod
    def purge_closed_sessions(self, tenant_id: str, closed_before: datetime, *,
                              limit: int = 20) -> dict[str, int]:
        """Delete up to ``limit`` due sessions of the tenant (the longest closed first, as far
        as the adapter's index order tells) with everything ``SESSION_KINDS`` names; returns
        how many records of each kind went (``sessions`` 0: none was due)."""

    @abstractmethod
    def closed_sessions_due(self, tenant_id: str, closed_before: datetime) -> dict[str, Due]:
        """What ``purge_closed_sessions`` would delete now if unbounded, per kind of
        ``SESSION_KINDS`` (the dry run); ``oldest`` for ``sessions`` is the earliest
        closing."""

    @abstractmethod
    def purge_deliveries(self, tenant_id: str, created_before: datetime, *,
                         limit: int = 500) -> int:
        """Delete up to ``limit`` of the tenant's delivery records created before
        ``created_before`` that are not QUEUED, oldest first; returns how many."""

    @abstractmethod
    def deliveries_due(self, tenant_id: str, created_before: datetime) -> Due:
        """What ``purge_deliveries`` would delete now if unbounded."""

    @abstractmethod
    def purge_audit(self, tenant_id: str, before: datetime, *, limit: int = 500) -> int:
        """Delete up to ``limit`` of the tenant's audit records whose ``at`` is before
        ``before``, oldest first; returns how many."""

    @abstractmethod
    def audit_due(self, tenant_id: str, before: datetime) -> Due:
        """What ``purge_audit`` would delete now if unbounded."""

    @abstractmethod
    def purge_inspections(self, tenant_id: str, before: datetime, *, limit: int = 500) -> int:
        """Delete up to ``limit`` of the tenant's inspector records of turns started before
        ``before``, oldest first; returns how many."""

    @abstractmethod
    def inspections_due(self, tenant_id: str, before: datetime) -> Due:
        """What ``purge_inspections`` would delete now if unbounded."""
