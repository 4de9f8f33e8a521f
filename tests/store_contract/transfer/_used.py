"""A used store, built through the public ports, and the means to move it: every kind
exported page by page, and imported kind by kind as ``vancetope admin import`` does."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from tests.store_contract.inspector._build import inspection
from vancetope_brain.models import (
    ChatRole,
    DeadLetter,
    JournalEntry,
    Project,
    StepKind,
    StepState,
    Timer,
    TurnEvent,
    new_id,
    utcnow,
)
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.models.inbox import DeliveryStatus, InboxQuery, ItemStatus
from vancetope_brain.models.memory import MemoryScope, ScopeRef
from vancetope_brain.models.recipe import Recipe
from vancetope_brain.models.schedule import RunStatus, Schedule, ScheduleRun, run_ids
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.models.tool_health import HealthState, ToolHealth
from vancetope_brain.models.usage import UsageKey, UsageRow
from vancetope_brain.models.webhooks import (
    WebhookDelivery,
    WebhookDeliveryStatus,
    WebhookEvent,
    WebhookSubscription,
)
from vancetope_brain.store import (
    AuditStore,
    Backend,
    DeadLetterStore,
    DeliveryStore,
    DocumentStore,
    DocumentVectors,
    EventOutboxStore,
    IdentityStore,
    InspectorStore,
    JournalStore,
    LaneStore,
    MemoryStore,
    RecipeStore,
    ScheduleStore,
    SessionSearch,
    SessionStore,
    SettingStore,
    TimerStore,
    ToolHealthStore,
    TransferStore,
    UsageStore,
    UserInboxStore,
    WebhookStore,
)
from vancetope_brain.store.sessions import every_session
from vancetope_brain.store.transfer import KINDS

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

MODEL = "embed-small"
FAR = utcnow().replace(year=utcnow().year + 1)
DAY = date(2026, 12, 4)
"""Past every timer ``build`` sets."""
NOT_EVERYWHERE = frozenset({"knowledge_vector_generations"})
"""Kinds a used store may hold no record of: a vector generation stamps a SQL store's
cached vectors; MongoDB caches none and keeps only the generations it imported."""
INSIDE_A_PARENT = frozenset({"lanes", "knowledge_vectors"})
"""Kinds MongoDB keeps inside their parent's document (a lane in its process's, a vector in
its chunk's): their records are imported after their parents', never alone."""
PAGE = 3
"""A page size smaller than most kinds' record count, so every export crosses pages."""


@dataclass
class Used:
    """The ids of what ``build`` made, for reading it back through the ports."""

    tenants: list[str] = field(default_factory=list)
    users: dict[str, list[str]] = field(default_factory=dict)  # tenant -> its users
    token_hashes: list[str] = field(default_factory=list)
    processes: dict[str, list[str]] = field(default_factory=dict)  # tenant -> processes
    sessions: dict[str, list[str]] = field(default_factory=dict)  # tenant -> sessions
    lane: tuple[str, str] = ("", "")  # (tenant, process) with drained and pending messages
    memory_scopes: list[ScopeRef] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)  # of (tenant A, project "default")


def build(backend: Backend, world: World) -> Used:
    """One store used as a deployment uses it: two tenants with projects, users, tokens (one
    revoked), settings at each level, recipes, sessions whose processes ran turns (chat
    lines, drained and pending messages, a dead letter, timers, events, a journal, a spawned
    child), Inbox items pending and answered, deliveries, tool health, memory in several
    scopes, and knowledge documents with chunks and vectors."""
    used = Used()
    for name in ("Acme", "Globex"):
        tenant = world.tenant()
        used.tenants.append(tenant)
        for project in ("default", "prj_b"):
            world.identity.create_project(Project(id=project, tenant_id=tenant, name=project))
        used.users[tenant] = [world.user(tenant) for _ in range(2 if name == "Acme" else 1)]
        used.sessions[tenant], used.processes[tenant] = [], []
    tenant, other = used.tenants
    alice = used.users[tenant][0]
    minted = utcnow()
    for n in range(3):  # a millisecond apart: MongoDB orders equal times by id, not insertion
        token = world.token(tenant, f"hash-{tenant}-{n}", user_id=alice,
                            created_at=minted + timedelta(milliseconds=n))
        used.token_hashes.append(token.token_hash)
    world.identity.revoke_token(tenant, token.id)
    _settings(backend, tenant, alice)
    recipes = backend.port(RecipeStore)
    recipes.create_recipe(tenant, None, Recipe(name="analyze", engine="ford"))
    recipes.create_recipe(tenant, "prj_b", Recipe(name="review", engine="ford"))
    for t in (tenant, other):
        _conversation(world, used, t, "Deploys run on Fridays after the budget review.")
    _lane(backend, world, used, tenant)
    _inbox(backend, world, used, tenant)
    health = backend.port(ToolHealthStore)
    for server in ("search", "files", "Zeta", "émile"):  # byte order: Z < f < s < é
        health.put_tool_health(ToolHealth(tenant_id=tenant, server=server,
                                          state=HealthState.DOWN), expected_revision=None)
    _memory(backend, used, tenant)
    _knowledge(backend, used, tenant)
    add_webhooks(backend, tenant)
    add_schedules(backend, tenant, alice)
    for outcome in ("ok", "not_found"):
        backend.port(AuditStore).append_audit(AuditRecord(
            id=new_id("aud"), tenant_id=tenant, at=utcnow().replace(microsecond=0),
            actor="cli ops", action="token.revoke", target=token.id, outcome=outcome))
    return used


def add_schedules(backend: Backend, tenant: str, user: str) -> None:
    """Two schedules (one paused), the first with runs: started, claimed and done."""
    schedules = backend.port(ScheduleStore)
    made = [Schedule(id=f"sch_{n}", tenant_id=tenant, project_id="default", user_id=user,
                     name=f"brief {n}", cron="*/5 * * * *", recipe="vogon-cron",
                     paused=n == 1, next_run_at=None if n else FAR,
                     created_at=utcnow() + timedelta(milliseconds=n)) for n in range(2)]
    for schedule in made:
        schedules.put_schedule(schedule)
    for n, status in enumerate((RunStatus.STARTED, None, RunStatus.DONE)):
        tick = FAR.replace(microsecond=0) - timedelta(minutes=5 * (n + 1))
        run_id, session_id, process_id = run_ids(tenant, "sch_0", tick)
        schedules.claim_run(ScheduleRun(id=run_id, tenant_id=tenant, schedule_id="sch_0",
                                        user_id=user, tick=tick, session_id=session_id,
                                        process_id=process_id))
        if status is not None:
            schedules.mark_run(tenant, run_id, status, tick)


def _settings(backend: Backend, tenant: str, user: str) -> None:
    settings = backend.port(SettingStore)
    settings.set_setting(tenant, SettingScope.tenant(), "retention.closedSessionDays", 30)
    settings.set_setting(tenant, SettingScope.tenant(), "inbox.autoArchiveAfterDays", 7)
    settings.set_setting(tenant, SettingScope.project("prj_b"), "llm.profile", "fast")
    settings.set_setting(tenant, SettingScope.user(user), "ui.theme", {"dark": True})


def _conversation(world: World, used: Used, tenant: str, text: str) -> None:
    """A titled session whose chat process ran two turns, one spawning a child."""
    session = world.session(tenant, title="Release planning")
    process = world.process(tenant, session.id)
    world.sessions.set_chat_process(tenant, session.id, process.id)
    used.sessions[tenant].append(session.id)
    lanes = world.lanes
    for n, line in enumerate((text, "Noted: Friday deploys."), start=1):
        asked = world.append(tenant, process.id, f"question {n}")
        epoch = lanes.acquire_epoch(tenant, process.id, [asked.id]).epoch
        child = world.process(tenant, session.id, parent_process_id=process.id) if n == 1 else None
        if child is not None:
            used.processes[tenant].append(child.id)
        role = ChatRole.USER if n == 1 else ChatRole.ASSISTANT
        assert lanes.commit_turn(tenant, process.id, epoch, world.turn(
            process, epoch, drained=[asked.id],
            chat=[world.line(process, line, role=role, source=asked.id)],
            events=[TurnEvent("status-changed", {"from": "RUNNING", "to": "IDLE"})],
            timers=[Timer(id=f"{process.id}:wake{n}", tenant_id=tenant, process_id=process.id,
                          key=f"wake{n}", due_at=utcnow() + timedelta(hours=n))],
            usage=[UsageRow(UsageKey(tenant, "usr_1", "default", session.id, model, DAY),
                            100 * n, 10 * n, n, n - 1) for model in ("m1", "m2")]))
        world.inspector.put_inspection(inspection(process, text=f"{text} {n}"))
    used.processes[tenant].insert(0, process.id)


def _lane(backend: Backend, world: World, used: Used, tenant: str) -> None:
    """A process mid-turn: a drained message, a dead letter, pending messages, a journal."""
    session = world.session(tenant, used.users[tenant][1])
    process = world.process(tenant, session.id)
    used.sessions[tenant].append(session.id)
    used.processes[tenant].append(process.id)
    used.lane = (tenant, process.id)
    lanes = world.lanes
    drained, dead = world.append(tenant, process.id, "one"), world.append(tenant, process.id, "two")
    lanes.acquire_epoch(tenant, process.id, [dead.id])
    epoch = lanes.acquire_epoch(tenant, process.id, [drained.id, dead.id]).epoch
    assert lanes.commit_turn(tenant, process.id, epoch, world.turn(
        process, epoch, drained=[drained.id],
        dead_letters={dead.id: DeadLetter(reason="its worker died", attempts=2)}))
    for text in ("three", "four"):
        world.append(tenant, process.id, text, key=f"key-{text}")
    epoch = lanes.acquire_epoch(tenant, process.id).epoch
    assert backend.port(JournalStore).record_steps(tenant, process.id, epoch, [JournalEntry(
        id=f"{process.id}:{key}", tenant_id=tenant, process_id=process.id, key=key, turn="t",
        kind=StepKind.TOOL, state=StepState.DONE) for key in ("search", "answer")])


def _inbox(backend: Backend, world: World, used: Used, tenant: str) -> None:
    """A PENDING ask, an ANSWERED one, and deliveries of the answered one."""
    tenant_process = used.processes[tenant][0]
    session = used.sessions[tenant][0]
    world.add_item(tenant, assigned_to=used.users[tenant][0], origin_process_id=tenant_process,
                   origin_session_id=session)
    answered = world.add_item(tenant, assigned_to=used.users[tenant][0],
                              origin_process_id=tenant_process, origin_session_id=session,
                              idempotency_key="ask-2")
    world.user_inbox.save_inbox_item(answered.model_copy(update={
        "status": ItemStatus.ANSWERED, "resolved_at": utcnow()}),
        expected_revision=answered.revision)
    deliveries = backend.port(DeliveryStore)
    for channel, status in (("email", DeliveryStatus.SENT), ("slack", DeliveryStatus.QUEUED)):
        deliveries.add_delivery(world.delivery(tenant, answered.id, channel=channel,
                                               status=status))


def add_webhooks(backend: Backend, tenant: str) -> None:
    """Two subscriptions a millisecond apart, one with a delivered and a pending delivery."""
    webhooks, at = backend.port(WebhookStore), utcnow()
    subs = [WebhookSubscription(id=f"whk_{tenant}_{n}", tenant_id=tenant, project_id="default",
                                created_by="usr_1", url=f"https://example.com/{n}",
                                events=[WebhookEvent.PROCESS_DONE], secret="whsec_c2VjcmV0",
                                created_at=at + timedelta(milliseconds=n)) for n in range(2)]
    for sub in subs:
        webhooks.add_subscription(sub, cap=10)
    webhooks.add_deliveries([WebhookDelivery(
        id=f"msg_{tenant}_{n}", tenant_id=tenant, project_id="default",
        subscription_id=f"whk_{tenant}_0",
        event=WebhookEvent.PROCESS_DONE, body={"type": "process.done", "data": {"n": n}},
        status=status, next_at=at, created_at=at + timedelta(milliseconds=n))
        for n, status in enumerate((WebhookDeliveryStatus.DELIVERED,
                                    WebhookDeliveryStatus.PENDING))])


def _memory(backend: Backend, used: Used, tenant: str) -> None:
    from tests.store_contract.memory._entries import entry

    memory = backend.port(MemoryStore)
    session, process = used.sessions[tenant][0], used.processes[tenant][0]
    texts = {MemoryScope.PROJECT: ["The launch moved to Friday.", "Budget review on Monday."],
             MemoryScope.SESSION: ["The user prefers short answers."],
             MemoryScope.TENANT: ["Acme's fiscal year starts in April."]}
    minute = 0
    for scope, lines in texts.items():
        for text in lines:
            minute += 1
            stored, _ = memory.record(entry(text, tenant=tenant, scope=scope, session=session,
                                            process=process, minute=minute,
                                            idempotency_key=f"note-{minute}"))
        used.memory_scopes.append(ScopeRef(scope, stored.scope_id))


def _knowledge(backend: Backend, used: Used, tenant: str) -> None:
    """Two READY documents with chunks, one with vectors, and one re-added (PENDING at its
    version 2, its version 1 chunks still stored but no longer searched)."""
    from tests.store_contract.documents._build import ROOMY, document, indexed

    store = backend.port(DocumentStore)
    guide = indexed(store, "Deploys run on Fridays.", "Rollbacks need two approvals.",
                    "The budget review is on Mondays.", name="guide.md", tenant=tenant,
                    project="default")
    faq = indexed(store, "Friday deploys are frozen in December.", name="faq.md",
                  tenant=tenant, project="default")
    old = indexed(store, "Deploys used to run on Tuesdays.", name="old.md", tenant=tenant,
                  project="default")
    store.add_document(document("old.md", "rewritten", tenant=tenant, project="default"),
                       **ROOMY)
    indexed(store, "Budget friday notes of project b.", name="b.md", tenant=tenant,
            project="prj_b")
    assert backend.port(DocumentVectors).write_vectors(
        tenant, "default", guide.id, guide.version, MODEL, np.eye(3, 4, dtype=np.float32))
    used.documents = [guide.id, faq.id, old.id]


def seen(b: Backend, used: Used) -> dict[str, Any]:
    """What the ports show of ``used``, in the order they list it."""
    identity = b.port(IdentityStore)
    shown: dict[str, Any] = {"tenants": identity.list_tenants()}
    for tenant in used.tenants:
        t: dict[str, Any] = shown.setdefault(tenant, {})
        t["projects"] = identity.list_projects(tenant)
        t["users"] = identity.list_users(tenant)
        t["tokens"] = [identity.list_tokens(tenant, user.id) for user in t["users"]]
        settings = b.port(SettingStore)
        t["settings"] = [settings.list_settings(tenant, scope) for scope in (
            SettingScope.tenant(), SettingScope.project("prj_b"),
            *(SettingScope.user(user.id) for user in t["users"]))]
        t["recipes"] = [b.port(RecipeStore).list_recipes(tenant, project)
                        for project in (None, "prj_b")]
        t["sessions"] = [list(every_session(b.port(SessionStore), tenant, user))
                         for user in ("usr_1", *used.users[tenant])]
        t["processes"] = [b.port(SessionStore).list_processes(tenant, session)
                          for session in used.sessions[tenant]]
        lanes = b.port(LaneStore)
        for process in used.processes[tenant]:
            t[process] = {
                "chat": lanes.chat_history(tenant, process),
                "turns": lanes.turn_records(tenant, process),
                "pending": lanes.pending_messages(tenant, process),
                "events": b.port(EventOutboxStore).pending_events(tenant, process),
                "journal": b.port(JournalStore).journal(tenant, process),
                "inspections": [b.port(InspectorStore).get_inspection(tenant, head.id)
                                for head in b.port(InspectorStore).list_inspections(
                                    tenant, process)],
                "process": b.port(SessionStore).get_process(tenant, process)}
        t["dead letters"] = b.port(DeadLetterStore).dead_letters(tenant)
        t["inbox"] = b.port(UserInboxStore).list_inbox_items(tenant, InboxQuery(limit=100))
        t["inbox counts"] = [b.port(UserInboxStore).inbox_pending_counts(tenant, user)
                             for user in used.users[tenant]]
        t["deliveries"] = b.port(DeliveryStore).list_deliveries(tenant)
        t["tool health"] = b.port(ToolHealthStore).list_tool_health(tenant)
        t["audit"] = b.port(AuditStore).list_audit(tenant)
        t["webhooks"] = b.port(WebhookStore).list_subscriptions(tenant)
        t["webhook deliveries"] = b.port(WebhookStore).list_deliveries(tenant, f"whk_{tenant}_0")
        t["usage"] = b.port(UsageStore).read_usage(tenant, DAY, DAY)
        t["schedules"] = [(s, b.port(ScheduleStore).list_runs(tenant, s.id))
                          for s in b.port(ScheduleStore).list_schedules(tenant)]
    shown["timers"] = b.port(TimerStore).due_timers(FAR, limit=1000)
    shown["due schedules"] = b.port(ScheduleStore).due_schedules(FAR)
    shown["unstarted runs"] = b.port(ScheduleStore).unstarted_runs(FAR)
    shown["tokens by hash"] = [b.port(IdentityStore).token_by_hash(h) for h in used.token_hashes]
    return shown


def searched(b: Backend, used: Used) -> dict[str, Any]:
    """What the searches the adapters derive indexes for find in ``used``."""
    tenant = used.tenants[0]
    memory, documents = b.port(MemoryStore), b.port(DocumentStore)
    found: dict[str, Any] = {
        "sessions": {t: b.port(SessionSearch).search_sessions(t, "usr_1", "friday deploys")
                     for t in used.tenants},
        "memory": [memory.search_memory(tenant, used.memory_scopes, query)
                   for query in ("friday launch", "budget", "answers", "fiscal april")],
        "memory lists": memory.list_memory(tenant, used.memory_scopes, limit=50),
        "chunks": [documents.search_chunks(tenant, ["default", "prj_b"], query, 10)
                   for query in ("deploys friday", "budget", "tuesdays", "approvals")],
        "read": [documents.read_chunks(tenant, "default", doc) for doc in used.documents],
        "documents": [documents.list_documents(tenant, p) for p in ("default", "prj_b")],
        "usage": documents.usage(tenant),
        "vectors": [b.port(DocumentVectors).search_vectors(
            tenant, ["default"], MODEL, np.array(query, dtype=np.float32), 10)
            for query in ([1, 0, 0, 0], [0, 1, 1, 0])]}
    return found


def export_all(transfer: TransferStore, kind: str, limit: int = PAGE) -> list[dict[str, Any]]:
    """Every record of ``kind``, read ``limit`` at a time."""
    records: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page, cursor = transfer.export_page(kind, cursor, limit)
        assert len(page) <= limit
        records += page
        if cursor is None:
            return records


def export_store(transfer: TransferStore, limit: int = PAGE) -> dict[str, list[dict[str, Any]]]:
    return {kind.name: export_all(transfer, kind.name, limit) for kind in KINDS}


def import_store(transfer: TransferStore, exported: dict[str, list[dict[str, Any]]],
                 limit: int = PAGE) -> dict[str, int]:
    """Import every kind in ``KINDS`` order, ``limit`` records a call; written per kind."""
    written = {}
    for kind in KINDS:
        records = exported[kind.name]
        written[kind.name] = sum(transfer.import_records(kind.name, records[i:i + limit])
                                 for i in range(0, len(records), limit))
    return written
