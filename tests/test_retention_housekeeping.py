"""The retention purge runs in the housekeeping beat, in bounded batches, for the tenants that
set a retention only — and for every tenant's audit log, capped by default
(``vancetope_brain/services/retention.py``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

import workers.parts
from vancetope_brain.errors import NotFound
from vancetope_brain.models import (
    ProcessStatus,
    Session,
    SessionStatus,
    ThinkProcess,
    new_id,
    utcnow,
)
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.services.retention import (
    AUDIT_BATCH,
    AUDIT_PER_RUN,
    SESSION_BATCH,
    SESSIONS_PER_RUN,
)
from vancetope_brain.store import AuditStore, SessionStore


def _closed_session(store: SessionStore, tenant: str) -> str:
    session = Session(id=new_id("ses"), tenant_id=tenant, user_id="ada",
                      status=SessionStatus.CLOSED)
    store.create_session(session)
    store.create_process(ThinkProcess(id=new_id("proc"), tenant_id=tenant,
                                      session_id=session.id, user_id="ada", name="chat",
                                      engine="ford", engine_version="1",
                                      status=ProcessStatus.CLOSED))
    return session.id


def test_the_housekeeping_beat_purges_a_bounded_batch_of_the_tenants_with_retention(
        embedded, monkeypatch: pytest.MonkeyPatch) -> None:
    brain = embedded.brain
    brain.identity.create_tenant("Retains", "ret")
    brain.settings.set("ret", SettingScope.tenant(), "retention.closedSessionDays", 30)
    store = brain.store.port(SessionStore)
    mine = [_closed_session(store, "ret") for _ in range(3)]
    kept = _closed_session(store, "acme")  # acme sets no retention: kept forever
    later = utcnow() + timedelta(days=31)
    retention = embedded.worker_parts.retention

    assert retention.purge(utcnow())["sessions"] == 0  # not 30 days closed yet
    assert retention.purge(later, sessions=2)["sessions"] == 2  # the cap of one run
    monkeypatch.setattr(workers.parts, "utcnow", lambda: later)
    assert embedded.worker_parts.housekeeping() >= 1  # the last one, in the beat job
    for session_id in mine:
        with pytest.raises(NotFound):
            store.get_session("ret", session_id)
    assert store.get_session("acme", kept).status is SessionStatus.CLOSED
    assert SESSION_BATCH <= SESSIONS_PER_RUN


def test_the_housekeeping_beat_purges_old_audit_records_in_bounded_batches_by_default_too(
        embedded, monkeypatch: pytest.MonkeyPatch) -> None:
    brain = embedded.brain
    for tenant in ("aud_short", "aud_default"):
        brain.identity.create_tenant(tenant, tenant)
    brain.settings.set("aud_short", SettingScope.tenant(), "retention.auditLogDays", 30)
    audit = brain.store.port(AuditStore)
    now = utcnow()

    def record(tenant: str, days_old: int) -> str:
        made = AuditRecord(id=new_id("aud"), tenant_id=tenant, at=now - timedelta(days=days_old),
                           actor="cli ops", action="user.create", target="usr_1", outcome="ok")
        audit.append_audit(made)
        return made.id

    for days_old in (31, 32, 33):
        record("aud_short", days_old)
    recent = record("aud_short", 29)
    kept = record("aud_default", 100)  # no retention set: the default, 400 days
    record("aud_default", 401)
    retention = embedded.worker_parts.retention

    assert retention.purge(now, audit=2)["audit"] == 2  # the cap of one run
    monkeypatch.setattr(workers.parts, "utcnow", lambda: now)
    assert embedded.worker_parts.housekeeping() >= 2  # the rest, in the beat job
    assert [r.id for r in audit.list_audit("aud_short")] == [recent]
    assert [r.id for r in audit.list_audit("aud_default")] == [kept]
    assert AUDIT_BATCH <= AUDIT_PER_RUN
