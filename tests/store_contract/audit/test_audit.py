"""The audit log: appended once, read newest first per tenant or for every tenant, paged by
position."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vancetope_brain.errors import Conflict
from vancetope_brain.models import new_id
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.services import audit as service
from vancetope_brain.store import AuditStore
from vancetope_brain.store.audit import MAX_LISTED, AuditPosition
from vancetope_brain.store.sql import to_ms

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _record(audit: AuditStore, tenant: str, seconds: float, record_id: str | None = None,
            **fields: str) -> AuditRecord:
    record = AuditRecord(**{"id": record_id or new_id("aud"), "tenant_id": tenant,
                            "at": T0 + timedelta(seconds=seconds), "actor": "cli ops",
                            "action": "user.create", "target": "usr_1", "outcome": "ok",
                            **fields})
    audit.append_audit(record)
    return record


def _position(record: AuditRecord) -> AuditPosition:
    return AuditPosition(to_ms(record.at), record.id)


def test_records_come_back_whole_newest_first_per_tenant(audit: AuditStore) -> None:
    old = _record(audit, "ten_1", 1, action="token.revoke", target="tok_1", outcome="not_found")
    new = _record(audit, "ten_1", 2)
    other = _record(audit, "ten_2", 3)
    assert audit.list_audit("ten_1") == [new, old]
    assert audit.list_audit("ten_2") == [other]
    assert audit.list_audit("ten_3") == []
    assert audit.list_audit(None) == [other, new, old]  # every tenant: a system query


def test_a_taken_id_conflicts(audit: AuditStore) -> None:
    _record(audit, "ten_1", 1, "aud_1")
    with pytest.raises(Conflict):
        _record(audit, "ten_1", 2, "aud_1")


def test_pages_follow_the_position_and_equal_times_order_by_id(audit: AuditStore) -> None:
    same = [_record(audit, "ten_1", 5, f"aud_{n}") for n in ("a", "c", "b")]
    older = _record(audit, "ten_1", 4)
    _record(audit, "ten_2", 4.5)
    newest_first = [same[1], same[2], same[0], older]
    assert audit.list_audit("ten_1", limit=2) == newest_first[:2]
    assert audit.list_audit("ten_1", _position(same[2]), limit=2) == newest_first[2:]
    assert audit.list_audit("ten_1", _position(older)) == []
    assert audit.list_audit(None, _position(same[0]))[0].tenant_id == "ten_2"


def test_a_limit_of_0_lists_nothing_and_one_past_the_cap_what_there_is(
        audit: AuditStore) -> None:
    for n in range(3):
        _record(audit, "ten_1", n)
    assert len(audit.list_audit("ten_1", limit=0)) == 0
    assert len(audit.list_audit("ten_1", limit=MAX_LISTED + 1)) == 3


def test_actions_of_one_millisecond_are_listed_in_the_order_they_happened(
        audit: AuditStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's ids grow with the clock's nanoseconds: ``at`` ties (whole
    milliseconds) list newest first all the same."""
    frozen = datetime(2026, 12, 4, 12, 0, 0, 123456, tzinfo=UTC)
    monkeypatch.setattr(service, "utcnow", lambda: frozen)
    log = service.AuditLog(audit)
    actions = [f"user.create{i}" for i in range(20)]
    for action in actions:
        log.append("cli ops", action, "ten_1", "usr_1", "ok")
    assert [r.action for r in audit.list_audit("ten_1")] == actions[::-1]
