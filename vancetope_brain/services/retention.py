"""The retention purge (issue 30 item 5; ``docs/operations.md``, "Data lifecycle").

Per tenant, the settings ``retention.closedSessionDays`` and ``retention.deliveryLogDays``
(tenant level only; unset: kept forever) say how long a CLOSED session and a delivery record
are kept, ``retention.auditLogDays`` (default 400) how long an audit record is, and
``retention.turnRecordDays`` (default 30) how long an inspector turn record is (a CLOSED
session's go with it sooner). The
housekeeping beat runs ``purge`` — never a request or a turn — which deletes at most
``SESSIONS_PER_RUN`` sessions, ``DELIVERIES_PER_RUN`` delivery records and
``AUDIT_PER_RUN`` audit records and ``INSPECTIONS_PER_RUN`` turn records per run, in batches
(``SESSION_BATCH``, ``DELIVERY_BATCH``, ``AUDIT_BATCH``, ``INSPECTION_BATCH``) per tenant, the tenants taken in an order that turns by one each run so
that none waits behind a tenant with a large backlog. What is
due and what is kept is the store's (``store.retention.RetentionStore``); each session goes
whole or not at all (on MongoDB: children first, finished by the next run).

``vancetope admin purge --dry-run`` reads ``due``; without ``--dry-run`` it runs ``purge``
until nothing due is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from vancetope_brain.errors import VancetopeError
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import IdentityStore, RetentionStore
from vancetope_brain.store.retention import AUDIT, DELIVERIES, INSPECTIONS, SESSION_KINDS, Due

log = logging.getLogger(__name__)

SESSIONS_PER_RUN = 100
"""The most CLOSED sessions one housekeeping run deletes, over all tenants."""
SESSION_BATCH = 20
"""Sessions one store call deletes (each in its own transaction on SQL stores)."""
DELIVERIES_PER_RUN = 5000
"""The most delivery records one housekeeping run deletes, over all tenants."""
DELIVERY_BATCH = 1000
"""Delivery records one store call (one statement) deletes."""
AUDIT_PER_RUN = 5000
"""The most audit records one housekeeping run deletes, over all tenants."""
AUDIT_BATCH = 1000
"""Audit records one store call (one statement) deletes."""

INSPECTIONS_PER_RUN = 5000
"""The most inspector turn records one housekeeping run deletes, over all tenants."""
INSPECTION_BATCH = 500
"""Turn records one store call (one statement) deletes (each up to ``MAX_TURN_CHARS``)."""

KINDS = (*SESSION_KINDS, DELIVERIES, AUDIT, INSPECTIONS)
"""What a purge counts, by kind."""

SESSION_DAYS = "retention.closedSessionDays"
DELIVERY_DAYS = "retention.deliveryLogDays"
AUDIT_DAYS = "retention.auditLogDays"
INSPECTION_DAYS = "retention.turnRecordDays"


@dataclass(frozen=True)
class TenantDue:
    """What is due in one tenant now: per kind, the count and the oldest record's time, and
    the cutoffs that made it so (None: the tenant keeps that kind forever)."""

    tenant_id: str
    sessions_before: datetime | None
    deliveries_before: datetime | None
    audit_before: datetime | None
    inspections_before: datetime | None
    due: dict[str, Due]

    def before(self, kind: str) -> datetime | None:
        """The cutoff of one kind of ``KINDS``."""
        if kind == DELIVERIES:
            return self.deliveries_before
        if kind == INSPECTIONS:
            return self.inspections_before
        return self.audit_before if kind == AUDIT else self.sessions_before


class RetentionService:
    def __init__(self, store: RetentionStore, identity: IdentityStore,
                 settings: SettingsService) -> None:
        self._store = store
        self._identity = identity
        self._settings = settings
        self._turn = 0

    def cutoffs(self, tenant_id: str, now: datetime
                ) -> tuple[datetime | None, datetime | None, datetime | None, datetime | None]:
        """The tenant's cutoffs now: closed sessions, delivery records, audit records,
        inspector turn records (None: kept)."""
        days = [self._settings.resolve(tenant_id, None, None, key)
                for key in (SESSION_DAYS, DELIVERY_DAYS, AUDIT_DAYS, INSPECTION_DAYS)]
        sessions, deliveries, audit, inspections = (
            None if d is None else now - timedelta(days=d) for d in days)
        return sessions, deliveries, audit, inspections

    def due(self, now: datetime, tenant_id: str | None = None) -> list[TenantDue]:
        """What a purge would delete now, per tenant (every tenant, or only ``tenant_id``)."""
        found = []
        for tenant in self._tenants(tenant_id):
            sessions, deliveries, audit, inspections = self.cutoffs(tenant, now)
            due = dict.fromkeys(KINDS, Due(0))
            if sessions is not None:
                due.update(self._store.closed_sessions_due(tenant, sessions))
            if deliveries is not None:
                due[DELIVERIES] = self._store.deliveries_due(tenant, deliveries)
            if audit is not None:
                due[AUDIT] = self._store.audit_due(tenant, audit)
            if inspections is not None:
                due[INSPECTIONS] = self._store.inspections_due(tenant, inspections)
            found.append(TenantDue(tenant, sessions, deliveries, audit, inspections, due))
        return found

    def purge(self, now: datetime, tenant_id: str | None = None, *,
              sessions: int = SESSIONS_PER_RUN, deliveries: int = DELIVERIES_PER_RUN,
              audit: int = AUDIT_PER_RUN, inspections: int = INSPECTIONS_PER_RUN,
              progress: Callable[[str, dict[str, int]], None] | None = None) -> dict[str, int]:
        """One bounded purge (the housekeeping's): at most ``sessions`` sessions,
        ``deliveries`` delivery records and ``audit`` audit records over the tenants (or
        ``tenant_id`` only), in batches; ``progress(tenant, counts)`` after each batch that
        deleted something.
        Returns the counts by kind of ``KINDS``. A tenant whose purge fails is logged and
        skipped (the next run tries again)."""
        total = dict.fromkeys(KINDS, 0)
        tenants = self._tenants(tenant_id)
        if tenant_id is None and tenants:  # a different tenant first each run
            self._turn = (self._turn + 1) % len(tenants)
            tenants = tenants[self._turn:] + tenants[:self._turn]
        caps = {"sessions": sessions, DELIVERIES: deliveries, AUDIT: audit,
                INSPECTIONS: inspections}
        for tenant in tenants:
            if all(total[kind] >= cap for kind, cap in caps.items()):
                break
            try:
                self._purge_tenant(tenant, now, total, caps, progress)
            except VancetopeError:
                log.exception("retention purge of tenant %s failed; the next run retries",
                              tenant)
        if any(total[kind] for kind in caps):
            log.info("retention purge: %s", ", ".join(f"{n} {kind}"
                                                      for kind, n in total.items() if n))
        return total

    def _purge_tenant(self, tenant: str, now: datetime, total: dict[str, int],
                      caps: dict[str, int],
                      progress: Callable[[str, dict[str, int]], None] | None) -> None:
        closed_before, created_before, audit_before, inspections_before = \
            self.cutoffs(tenant, now)
        while closed_before is not None and total["sessions"] < caps["sessions"]:
            limit = min(SESSION_BATCH, caps["sessions"] - total["sessions"])
            gone = self._store.purge_closed_sessions(tenant, closed_before, limit=limit)
            for kind, count in gone.items():
                total[kind] += count
            if gone["sessions"] and progress is not None:
                progress(tenant, gone)
            if gone["sessions"] < limit:
                break  # nothing more is due (or what is left is busy: the next run)
        for kind, before, batch, purge in (
                (DELIVERIES, created_before, DELIVERY_BATCH, self._store.purge_deliveries),
                (AUDIT, audit_before, AUDIT_BATCH, self._store.purge_audit),
                (INSPECTIONS, inspections_before, INSPECTION_BATCH,
                 self._store.purge_inspections)):
            while before is not None and total[kind] < caps[kind]:
                limit = min(batch, caps[kind] - total[kind])
                count = purge(tenant, before, limit=limit)
                total[kind] += count
                if count and progress is not None:
                    progress(tenant, {kind: count})
                if count < limit:
                    break

    def _tenants(self, tenant_id: str | None) -> list[str]:
        if tenant_id is not None:
            return [tenant_id]
        return [tenant.id for tenant in self._identity.list_tenants()]
