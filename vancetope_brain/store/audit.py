"""The audit port: the operators' audit log, appended and read newest first."""

from __future__ import annotations

from abc import abstractmethod
from typing import NamedTuple

from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.store.backend import Port

MAX_LISTED = 1000
"""Most records one ``list_audit`` call returns."""


class AuditPosition(NamedTuple):
    """A record's place in the log's order: its time in milliseconds, then its id."""

    at_ms: int
    id: str


class AuditStore(Port):
    """Audit records: each appended once and never changed; only the housekeeping's
    retention purge deletes them, once older than the tenant's ``retention.auditLogDays``
    (``RetentionStore.purge_audit``). An operator's record outlives what it acted on.

    Order: newest first by (``at`` in milliseconds, ``id``), both descending.
    """

    @abstractmethod
    def append_audit(self, record: AuditRecord) -> None:
        """Insert the record (one atomic write). Raises ``Conflict`` if its id exists."""

    @abstractmethod
    def list_audit(self, tenant_id: str | None, before: AuditPosition | None = None,
                   limit: int = 100) -> list[AuditRecord]:
        """At most ``min(limit, MAX_LISTED)`` records of the tenant, newest first, only those
        strictly before ``before`` if given. ``tenant_id=None`` is a system query (a
        platform operator's): every tenant's records."""
