"""Issue 30's acceptance for moving a store, on the SQL stores: a used store exported page by
page, imported into a store of the other kind and exported again gives the same records in
the same order, kind by kind (and the same JSON bytes); what the importing store derives
from the records (search indexes, term statistics, counters) answers as the source's did."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.store_contract.conftest import World
from tests.store_contract.documents._build import ROOMY, document, indexed
from tests.store_contract.inspector._build import inspection
from tests.store_contract.memory._entries import entry
from tests.store_contract.transfer._used import add_schedules, add_webhooks
from vancetope_brain.models import (
    ChatRole,
    DeadLetter,
    JournalEntry,
    ProcessStatus,
    Project,
    StepKind,
    StepState,
    Tenant,
    Timer,
    utcnow,
)
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.models.inbox import DeliveryStatus, ItemStatus
from vancetope_brain.models.memory import MemoryScope
from vancetope_brain.models.recipe import Recipe
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.models.tool_health import HealthState, ToolHealth
from vancetope_brain.models.usage import UsageKey, UsageRow
from vancetope_brain.store import (
    AuditStore,
    Backend,
    DeliveryStore,
    DocumentStore,
    DocumentVectors,
    JournalStore,
    MemoryStore,
    RecipeStore,
    SessionSearch,
    SettingStore,
    ToolHealthStore,
    TransferStore,
    UsageStore,
)
from vancetope_brain.store.postgres import PostgresBackend
from vancetope_brain.store.sqlite import SqliteBackend
from vancetope_brain.store.transfer import KINDS

Export = dict[str, list[dict[str, Any]]]
PAGE = 3
"""Records per page and per import call: small, so every kind spans several pages."""
T_AUDIT = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
DAY = T_AUDIT.date()
"""The day of the usage rows the turns commit."""


def use(backend: Backend) -> None:
    """Two tenants that used every port: sessions with turns, chat (not only ASCII), pending,
    drained and dead-lettered messages, timers, a journal, events, Inbox items and their
    deliveries, settings, recipes, tool health, memory in two scopes, documents (READY and
    PENDING) with chunks and vectors, audit records, inspector turn records, schedules
    and their runs."""
    world = World(backend)
    for tenant_id in ("ten_b", "ten_a"):  # created out of key order
        world.identity.create_tenant(Tenant(id=tenant_id, name=tenant_id))
        world.identity.create_project(Project(id="default", tenant_id=tenant_id, name="d"))
        user = world.user(tenant_id)
        world.token(tenant_id, f"hash-{tenant_id}-1", user_id=user)
        world.token(tenant_id, f"hash-{tenant_id}-2", user_id=user, revoked=True)
        backend.port(SettingStore).set_setting(tenant_id, SettingScope.tenant(),
                                               "chat.summaryThreshold", 40)
        backend.port(SettingStore).set_setting(tenant_id, SettingScope.user(user),
                                               "inbox.autoArchiveAfterDays", 7)
        for name in ("zeta", "alpha-two", "alpha"):
            backend.port(RecipeStore).create_recipe(tenant_id, None,
                                                    Recipe(name=name, engine="ford"))
        for n, outcome in enumerate(("ok", "not_found")):  # the actor's é: not only ASCII
            backend.port(AuditStore).append_audit(AuditRecord(
                id=f"aud_{tenant_id}_{n}", tenant_id=tenant_id, at=T_AUDIT + timedelta(seconds=n),
                actor="cli opé", action="token.revoke", target="tok_x", outcome=outcome))
        add_webhooks(backend, tenant_id)
        add_schedules(backend, tenant_id, user)
        for server in ("srv-b", "srv-a"):
            backend.port(ToolHealthStore).put_tool_health(
                ToolHealth(tenant_id=tenant_id, server=server, state=HealthState.DOWN),
                expected_revision=None)
        for _ in range(2):
            _conversation(backend, world, tenant_id)
        memory = backend.port(MemoryStore)
        for minute, text in enumerate(("Deploys run on Fridays.", "Grüße aus Köln ✓",
                                       "The launch moved.")):
            memory.record(entry(text, tenant=tenant_id, minute=minute))
        memory.record(entry("Mind the café", tenant=tenant_id, scope=MemoryScope.TENANT))
        documents = backend.port(DocumentStore)
        ready = indexed(documents, "Deploys run on Fridays.", "Rollbacks take ten minutes.",
                        "Fridays are quiet.", tenant=tenant_id, project="default")
        indexed(documents, "Straße und Maß", name="b.md", tenant=tenant_id, project="default")
        documents.add_document(document("pending.md", "not yet", tenant=tenant_id,
                                        project="default"), **ROOMY)
        assert backend.port(DocumentVectors).write_vectors(
            tenant_id, "default", ready.id, ready.version, "embed-small",
            np.arange(12, dtype=np.float32).reshape(3, 4) + 1)


def _conversation(backend: Backend, world: World, tenant_id: str) -> None:
    session = world.session(tenant_id)
    process = world.process(tenant_id, session.id)
    world.sessions.set_chat_process(tenant_id, session.id, process.id)
    asked = world.append(tenant_id, process.id, "What runs on Fridays?")
    epoch = world.lanes.acquire_epoch(tenant_id, process.id).epoch
    timer = Timer(id=f"{process.id}:nudge", tenant_id=tenant_id, process_id=process.id,
                  key="nudge", due_at=utcnow() + timedelta(hours=1))
    assert world.lanes.commit_turn(tenant_id, process.id, epoch, world.turn(
        process, epoch, drained=[asked.id], timers=[timer],
        chat=[world.line(process, "What runs on Fridays?", role=ChatRole.USER,
                         source=asked.id),
              world.line(process, "Deploys — und Grüße 日本 ✓")],
        usage=[UsageRow(UsageKey(tenant_id, "usr_1", "default", session.id, model, DAY),
                        1200, 40 + n, 2, n) for n, model in enumerate(("gpt-ß", "m1"))]
    )) is not None
    world.inspector.put_inspection(inspection(process, text="Grüße 日本 ✓"))
    doomed = world.append(tenant_id, process.id, "crash me")
    epoch = world.lanes.acquire_epoch(tenant_id, process.id, [doomed.id]).epoch
    assert world.lanes.commit_turn(tenant_id, process.id, epoch, world.turn(
        process, epoch, dead_letters={doomed.id: DeadLetter(reason="died", attempts=1,
                                                            at=utcnow())})) is not None
    world.append(tenant_id, process.id, "still waiting")
    epoch = world.lanes.acquire_epoch(tenant_id, process.id).epoch
    assert backend.port(JournalStore).record_steps(tenant_id, process.id, epoch, [
        JournalEntry(id=f"{process.id}:{key}", tenant_id=tenant_id, process_id=process.id,
                     key=key, turn="t", kind=StepKind.TOOL, state=StepState.DONE)
        for key in ("z", "a")])
    item = world.add_item(tenant_id, origin_process_id=process.id,
                          origin_session_id=session.id)
    world.user_inbox.save_inbox_item(item.model_copy(update={
        "status": ItemStatus.ANSWERED, "resolved_at": utcnow()}),
        expected_revision=item.revision)
    world.add_item(tenant_id)
    for status in (DeliveryStatus.SENT, DeliveryStatus.QUEUED):
        backend.port(DeliveryStore).add_delivery(world.delivery(tenant_id, item.id,
                                                                status=status))
    assert world.lanes.commit_turn(tenant_id, process.id, epoch, world.turn(
        process, epoch, status=ProcessStatus.IDLE)) is not None


def export(backend: Backend) -> Export:
    """Every kind's records, page by page, through a JSON text as a file holds them."""
    port = backend.port(TransferStore)
    out: Export = {}
    for kind in KINDS:
        records: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page, cursor = port.export_page(kind.name, cursor, PAGE)
            records += json.loads(json.dumps(page))
            if cursor is None:
                break
        out[kind.name] = records
    return out


def load(backend: Backend, exported: Export) -> None:
    """Import every kind in order, a few records per call."""
    port = backend.port(TransferStore)
    for kind in KINDS:
        records = exported[kind.name]
        for start in range(0, len(records), PAGE):
            batch = records[start:start + PAGE]
            assert port.import_records(kind.name, batch) == len(batch)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Backend]:
    backend = SqliteBackend(str(tmp_path / "store.db"))
    yield backend
    backend.close()


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[Backend]:
    backend = PostgresBackend(postgres_url)
    yield backend
    backend.close()


@pytest.fixture
def other_postgres_store(postgres_run_database: Any) -> Iterator[Backend]:
    with postgres_run_database.schema() as url:
        backend = PostgresBackend(url)
        yield backend
        backend.close()


@pytest.fixture
def other_sqlite_store(tmp_path: Path) -> Iterator[Backend]:
    backend = SqliteBackend(str(tmp_path / "other.db"))
    yield backend
    backend.close()


def _derived(backend: Backend) -> dict[str, Any]:
    """What the stores derive from the records, asked through the ports."""
    documents, memory = backend.port(DocumentStore), backend.port(MemoryStore)
    out: dict[str, Any] = {}
    for tenant_id in ("ten_a", "ten_b"):
        for query in ("fridays", "deploys rollbacks", "maß", "grüße", "nothing"):
            out[f"{tenant_id}/docs/{query}"] = [
                (hit.chunk.text, round(hit.score, 6)) for hit in documents.search_chunks(
                    tenant_id, ["default"], query, 10)]
            out[f"{tenant_id}/memory/{query}"] = [
                (hit.entry.text, round(hit.score, 6)) for hit in memory.search_memory(
                    tenant_id, [entry(tenant=tenant_id).scope_ref], query)]
        out[f"{tenant_id}/vectors"] = [
            (hit.chunk.text, round(hit.score, 6))
            for hit in backend.port(DocumentVectors).search_vectors(
                tenant_id, ["default"], "embed-small", np.ones(4, dtype=np.float32), 10)]
        out[f"{tenant_id}/usage"] = documents.usage(tenant_id, "default")
        out[f"{tenant_id}/llm usage"] = backend.port(UsageStore).read_usage(tenant_id, DAY, DAY)
        out[f"{tenant_id}/chat"] = [hit.model_dump() for hit in backend.port(
            SessionSearch).search_sessions(tenant_id, "usr_1", "fridays")]
    return out


def _moved(source: Backend, target: Backend) -> None:
    use(source)
    first = export(source)
    assert all(first[kind.name] for kind in KINDS), [k for k, v in first.items() if not v]
    assert target.port(TransferStore).is_empty()
    load(target, first)
    assert not target.port(TransferStore).is_empty()
    second = export(target)
    for kind in KINDS:
        assert second[kind.name] == first[kind.name], kind.name
    assert json.dumps(second, sort_keys=True) == json.dumps(first, sort_keys=True)
    assert _derived(target) == _derived(source)


def test_a_used_sqlite_store_moves_to_postgresql_and_exports_the_same(
        sqlite_store: Backend, postgres_store: Backend) -> None:
    _moved(sqlite_store, postgres_store)


def test_a_used_postgresql_store_moves_to_sqlite_and_exports_the_same(
        postgres_store: Backend, sqlite_store: Backend) -> None:
    _moved(postgres_store, sqlite_store)


def test_a_used_postgresql_store_moves_to_another_and_exports_the_same(
        postgres_store: Backend, other_postgres_store: Backend) -> None:
    _moved(postgres_store, other_postgres_store)


@pytest.mark.parametrize("stopped_in", ["chat", "memory_entries", "knowledge_chunks"])
def test_an_interrupted_import_run_again_writes_each_record_once(
        postgres_store: Backend, other_postgres_store: Backend, stopped_in: str) -> None:
    use(postgres_store)
    first = export(postgres_store)
    names = [kind.name for kind in KINDS]
    done = {name: records if names.index(name) < names.index(stopped_in)
            else records[:len(records) // 2] if name == stopped_in else []
            for name, records in first.items()}
    load(other_postgres_store, done)
    port = other_postgres_store.port(TransferStore)
    for kind in KINDS:  # run again from the start
        records = first[kind.name]
        assert port.import_records(kind.name, records) == len(records) - len(done[kind.name])
    assert export(other_postgres_store) == first
    assert _derived(other_postgres_store) == _derived(postgres_store)
