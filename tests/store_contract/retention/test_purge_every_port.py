"""The acceptance of issue 30's purge, on every backend: a tenant with 30-day retention loses
exactly its closed sessions' data older than that — and nothing else, read back through every
port that holds a tenant's data. Another tenant without retention settings loses nothing but
its audit records past the default ``retention.auditLogDays`` (400)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tests.store_contract.inspector._build import inspection
from vancetope_brain.models import (
    JournalEntry,
    ProcessStatus,
    SessionStatus,
    StepKind,
    StepState,
    Tenant,
    new_id,
    utcnow,
)
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.models.inbox import DeliveryStatus, InboxQuery, ItemStatus
from vancetope_brain.models.recipe import Recipe
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.models.tool_health import HealthState, ToolHealth
from vancetope_brain.services.retention import RetentionService
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import (
    AuditStore,
    Backend,
    DeliveryStore,
    DocumentStore,
    EventOutboxStore,
    IdentityStore,
    InspectorStore,
    JournalStore,
    LaneStore,
    MemoryStore,
    RecipeStore,
    RetentionStore,
    SessionStore,
    SettingStore,
    ToolHealthStore,
    UserInboxStore,
)
from vancetope_brain.store.sessions import every_session

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

S = ProcessStatus


def _tick() -> None:
    time.sleep(0.005)


def _session(world: World, tenant: str, *, close: bool = True) -> tuple[str, list[str]]:
    past = utcnow() - timedelta(hours=1)
    session = world.session(tenant, created_at=past)
    process = world.process(tenant, session.id, created_at=past)
    world.set_status(process, S.IDLE, chat=[world.line(process, "hello")])
    world.inspector.put_inspection(inspection(process, past))
    world.append(tenant, process.id, "unanswered")
    if close:
        world.set_status(process, S.CLOSED, chat=[world.line(process, "bye")])
        world.sessions.update_session_status(tenant, session.id, SessionStatus.CLOSED,
                                             allowed_from=frozenset({SessionStatus.OPEN}))
    return session.id, [process.id]


class Everything:
    """Reads back everything of a tenant through every port holding tenant data."""

    def __init__(self, backend: Backend) -> None:
        self.b = backend

    def __call__(self, tenant: str, sessions: list[str], processes: list[str],
                 memory: list[str], documents: list[str]) -> dict[str, Any]:
        b = self.b
        seen: dict[str, Any] = {}
        identity = b.port(IdentityStore)
        seen["users"] = identity.list_users(tenant)
        seen["tokens"] = [identity.list_tokens(tenant, u.id) for u in seen["users"]]
        seen["settings"] = b.port(SettingStore).list_settings(tenant, SettingScope.tenant())
        seen["recipes"] = b.port(RecipeStore).list_recipes(tenant, None)
        seen["tool_health"] = b.port(ToolHealthStore).list_tool_health(tenant)
        seen["sessions"] = list(every_session(b.port(SessionStore), tenant, "usr_1"))
        lanes = b.port(LaneStore)
        for pid in processes:
            seen[f"processes/{pid}"] = [p.id for s in sessions for p in
                                        b.port(SessionStore).list_processes(tenant, s)
                                        if p.id == pid]
            seen[f"chat/{pid}"] = lanes.chat_history(tenant, pid)
            seen[f"turns/{pid}"] = lanes.turn_records(tenant, pid)
            seen[f"messages/{pid}"] = lanes.pending_messages(tenant, pid)
            seen[f"events/{pid}"] = b.port(EventOutboxStore).pending_events(tenant, pid)
            seen[f"journal/{pid}"] = b.port(JournalStore).journal(tenant, pid)
            seen[f"inspections/{pid}"] = b.port(InspectorStore).list_inspections(tenant, pid)
        seen["inbox"] = b.port(UserInboxStore).list_inbox_items(tenant, InboxQuery(limit=100))
        seen["deliveries"] = b.port(DeliveryStore).list_deliveries(tenant)
        seen["audit"] = b.port(AuditStore).list_audit(tenant)
        seen["memory"] = [b.port(MemoryStore).get_memory(tenant, m) for m in memory]
        seen["documents"] = [b.port(DocumentStore).get_document(tenant, "default", d)
                             for d in documents]
        seen["chunks"] = [b.port(DocumentStore).read_chunks(tenant, "default", d)
                          for d in documents]
        return seen


def _populate(backend: Backend, world: World, tenant: str) -> dict[str, list[str]]:
    """One of everything in ``tenant``: a closed session meant to go (with an ANSWERED ask),
    one held back by a PENDING ask, an open one with a journal, a memory entry of the one
    meant to go, a knowledge document, delivery records old (SENT, QUEUED) and recent,
    audit records very old, old and recent."""
    from tests.store_contract.documents._build import indexed
    from tests.store_contract.memory._entries import entry

    user = world.user(tenant)
    world.token(tenant, f"hash-{tenant}", user_id=user)
    backend.port(RecipeStore).create_recipe(tenant, None, Recipe(name="analyze", engine="ford"))
    backend.port(ToolHealthStore).put_tool_health(
        ToolHealth(tenant_id=tenant, server="srv", state=HealthState.DOWN), expected_revision=None)
    gone_session, gone_processes = _session(world, tenant)
    answered = world.add_item(tenant, origin_process_id=gone_processes[0],
                              origin_session_id=gone_session)
    world.user_inbox.save_inbox_item(answered.model_copy(update={
        "status": ItemStatus.ANSWERED, "resolved_at": utcnow()}),
        expected_revision=answered.revision)
    held_session, held_processes = _session(world, tenant)
    world.add_item(tenant, origin_process_id=held_processes[0])  # PENDING: keeps it
    open_session, open_processes = _session(world, tenant, close=False)
    process = world.sessions.get_process(tenant, open_processes[0])
    epoch = world.lanes.acquire_epoch(tenant, process.id).epoch
    assert backend.port(JournalStore).record_steps(tenant, process.id, epoch, [JournalEntry(
        id=f"{process.id}:k", tenant_id=tenant, process_id=process.id, key="k", turn="t",
        kind=StepKind.TOOL, state=StepState.DONE)])
    remembered, _ = backend.port(MemoryStore).record(entry(
        tenant=tenant, session=gone_session, process=gone_processes[0]))
    doc = indexed(backend.port(DocumentStore), "Deploys run on Fridays.", tenant=tenant,
                  project="default")
    # The test's clock runs 30 days ahead (``now``): these are 45 and 10 days old then.
    deliveries = backend.port(DeliveryStore)
    for status in (DeliveryStatus.SENT, DeliveryStatus.QUEUED):
        deliveries.add_delivery(world.delivery(tenant, answered.id, status=status,
                                               created_at=utcnow() - timedelta(days=15)))
    deliveries.add_delivery(world.delivery(tenant, answered.id, status=DeliveryStatus.SENT,
                                           created_at=utcnow() + timedelta(days=20)))
    for days in (-15, 20):  # turn records 45 and 10 days old then
        backend.port(InspectorStore).put_inspection(
            inspection(process, utcnow() + timedelta(days=days)))
    for days in (-400, -15, 20):  # 430, 45 and 10 days old then
        backend.port(AuditStore).append_audit(AuditRecord(
            id=new_id("aud"), tenant_id=tenant, at=utcnow() + timedelta(days=days),
            actor="cli ops", action="user.create", target="usr_1", outcome="ok"))
    return {"gone_sessions": [gone_session], "gone_processes": gone_processes,
            "sessions": [held_session, open_session], "processes": held_processes + open_processes,
            "memory": [remembered.id], "documents": [doc.id]}


def test_thirty_days_retention_takes_exactly_the_old_closed_sessions_and_nothing_else(
        backend: Backend, world: World) -> None:
    identity = backend.port(IdentityStore)
    for tenant in ("ten_ret", "ten_keep"):
        identity.create_tenant(Tenant(id=tenant, name=tenant))
    settings = SettingsService(backend.port(SettingStore), identity)
    for key in ("retention.closedSessionDays", "retention.deliveryLogDays",
                "retention.auditLogDays"):
        settings.set("ten_ret", SettingScope.tenant(), key, 30)
    made = {t: _populate(backend, world, t) for t in ("ten_ret", "ten_keep")}
    _tick()
    cutoff = utcnow()
    _tick()
    recent, recent_processes = _session(world, "ten_ret")  # closed after the cutoff
    for tenant in made.values():
        tenant["sessions"] += [recent] if tenant is made["ten_ret"] else []
        tenant["processes"] += recent_processes if tenant is made["ten_ret"] else []
    read = Everything(backend)

    def everything(tenant: str) -> dict[str, Any]:
        m = made[tenant]
        return read(tenant, m["gone_sessions"] + m["sessions"],
                    m["gone_processes"] + m["processes"], m["memory"], m["documents"])

    before = {t: everything(t) for t in made}
    service = RetentionService(backend.port(RetentionStore), identity, settings)
    now = cutoff + timedelta(days=30)  # what was closed before the cutoff is 30 days old

    [due] = service.due(now, "ten_ret")
    assert due.due["sessions"].count == 1 and due.due["deliveries"].count == 1
    assert due.due["audit"].count == 2
    # By age (retention.turnRecordDays, 30 by default): each session's (its turn began an
    # hour before it was made) and the one 45 days old; the closed session's also with it.
    assert (due.due["inspections"].count, due.due["turn_inspections"].count) == (5, 1)
    [keep] = service.due(now, "ten_keep")
    assert (keep.due["sessions"].count, keep.due["audit"].count) == (0, 1)  # the default
    assert keep.audit_before == now - timedelta(days=400)
    purged = service.purge(now)
    assert purged["sessions"] == 1 and purged["processes"] == 1
    assert purged["chat"] == 2 and purged["turns"] == 2 and purged["messages"] == 1
    assert purged["deliveries"] == 1 and purged["audit"] == 3
    assert purged["turn_inspections"] == 1 and purged["inspections"] == 4 + 4
    assert service.purge(now) == dict.fromkeys(purged, 0)  # idempotent

    after = {t: everything(t) for t in made}
    kept = dict(before["ten_keep"])
    kept["audit"] = [r for r in kept["audit"] if r.at >= now - timedelta(days=400)]
    assert len(kept["audit"]) == 2
    for tenant, seen in (("ten_keep", kept), ("ten_ret", before["ten_ret"])):
        for pid in made[tenant]["processes"] + made[tenant]["gone_processes"]:
            seen[f"inspections/{pid}"] = [r for r in seen[f"inspections/{pid}"]
                                          if r.started_at >= now - timedelta(days=30)]
    assert after["ten_keep"] == kept
    expected = dict(before["ten_ret"])
    gone_session = made["ten_ret"]["gone_sessions"][0]
    expected["sessions"] = [s for s in expected["sessions"] if s.id != gone_session]
    for pid in made["ten_ret"]["gone_processes"]:
        for kind in ("processes", "chat", "turns", "messages", "events", "journal",
                     "inspections"):
            expected[f"{kind}/{pid}"] = []
    expected["deliveries"] = [d for d in expected["deliveries"]
                              if d.status is DeliveryStatus.QUEUED
                              or d.created_at > now - timedelta(days=30)]
    assert len(expected["deliveries"]) == 2
    expected["audit"] = [r for r in expected["audit"] if r.at >= now - timedelta(days=30)]
    assert len(expected["audit"]) == 1
    assert after["ten_ret"] == expected

