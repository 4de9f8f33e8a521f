"""The operators' audit log (``AuditLog``): every operator write, by the ``/admin/`` API or the
admin CLI, appended as an ``AuditRecord`` with its outcome, and read back newest first."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from vancetope_brain.errors import InvalidInput, VancetopeError
from vancetope_brain.models import utcnow
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.store import Backend
from vancetope_brain.store.audit import AuditPosition, AuditStore

PAGE_LIMIT = 50
"""An audit page's default size; at most ``MAX_LISTED``."""
PAGE_LIMIT_MAX = 500
"""The largest page (below the store's ``MAX_LISTED``: a page reads one record more, to
know whether another page follows)."""

OK = "ok"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Acting:
    """The action an ``AuditLog.action`` block runs: it may name its tenant and target once
    it knows them (a tenant it created)."""

    tenant_id: str
    target: str


@dataclass(frozen=True)
class AuditPage:
    records: list[AuditRecord]
    next_cursor: str | None
    """Pass as ``cursor`` for the next (older) page; None when this one was the last."""


class AuditLog:
    def __init__(self, store: AuditStore) -> None:
        self._store = store

    @classmethod
    def on(cls, store: Backend) -> AuditLog:
        return cls(store.port(AuditStore))

    @contextmanager
    def action(self, actor: str, action: str, tenant_id: str, target: str
               ) -> Iterator[Acting]:
        """Run the block as one operator action and append its record: outcome ``ok``, or the
        stable code of the ``VancetopeError`` it raised (re-raised). Any other exception is
        recorded as ``internal``. ``target`` must name no secret."""
        acting = Acting(tenant_id, target)
        try:
            yield acting
        except VancetopeError as e:
            self.append(actor, action, acting.tenant_id, acting.target, e.code)
            raise
        except Exception:
            self.append(actor, action, acting.tenant_id, acting.target, "internal")
            raise
        self.append(actor, action, acting.tenant_id, acting.target, OK)

    def append(self, actor: str, action: str, tenant_id: str, target: str,
               outcome: str) -> AuditRecord:
        now = utcnow()
        # Newest first is by ``at``, then by id: an id that grows with the clock's
        # nanoseconds keeps the actions of one millisecond in the order they happened.
        record = AuditRecord(id=f"aud_{time.time_ns():016x}{secrets.token_hex(4)}",
                             tenant_id=tenant_id, actor=actor, action=action,
                             target=target, outcome=outcome,
                             at=now.replace(microsecond=now.microsecond // 1000 * 1000))
        self._store.append_audit(record)
        return record

    def page(self, tenant_id: str | None, cursor: str | None = None,
             limit: int = PAGE_LIMIT) -> AuditPage:
        """A page of the tenant's records (every tenant's for None), newest first."""
        if not 1 <= limit <= PAGE_LIMIT_MAX:
            raise InvalidInput(f"limit must be between 1 and {PAGE_LIMIT_MAX}")
        records = self._store.list_audit(tenant_id, _position(cursor), limit + 1)
        if len(records) <= limit:
            return AuditPage(records, None)
        last = records[limit - 1]
        return AuditPage(records[:limit], f"{_ms(last.at)}:{last.id}")


def _ms(moment: datetime) -> int:
    """Milliseconds since the epoch, as the store orders records."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _position(cursor: str | None) -> AuditPosition | None:
    if cursor is None:
        return None
    at, _, record_id = cursor.partition(":")
    if not at.isdigit() or not record_id:
        raise InvalidInput(f"not an audit cursor: {cursor!r}")
    return AuditPosition(int(at), record_id)
