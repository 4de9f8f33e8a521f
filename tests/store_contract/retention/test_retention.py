"""The retention purge: a CLOSED session past the cutoff goes whole, with everything its
processes own; nothing an open session or process, or a PENDING ask, needs goes; nor does
any other port's data (Inbox items, memory, knowledge documents, settings, …)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.models import (
    ProcessStatus,
    Session,
    SessionStatus,
    ThinkProcess,
    Timer,
    new_id,
    utcnow,
)
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.models.inbox import DeliveryStatus, ItemStatus
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import (
    AuditStore,
    Backend,
    DeliveryStore,
    DocumentStore,
    EventOutboxStore,
    LaneStore,
    MemoryStore,
    RetentionStore,
    SessionStore,
    SettingStore,
    TimerStore,
    UserInboxStore,
)
from vancetope_brain.store.retention import SESSION_KINDS, Due

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

S = ProcessStatus
T = "ten_1"


@pytest.fixture
def retention(backend: Backend) -> RetentionStore:
    return backend.port(RetentionStore)


def _session(world: World, tenant: str = T, *, processes: int = 1,
             close: bool = True) -> tuple[Session, list[ThinkProcess]]:
    """A session with ``processes`` processes, each with a chat line, a turn record, an
    undrained message, a timer and an unpublished event, every one CLOSED (``close``: the
    session too)."""
    past = utcnow() - timedelta(hours=1)
    session = world.session(tenant, created_at=past)
    made = []
    for n in range(processes):
        process = world.process(tenant, session.id, created_at=past,
                                parent_process_id=made[0].id if made else None)
        world.set_status(process, S.IDLE, chat=[world.line(process, f"line {n}")],
                         timers=[Timer(id=f"{process.id}:wake", tenant_id=tenant,
                                       process_id=process.id, key="wake",
                                       due_at=utcnow() + timedelta(days=400))])
        world.append(tenant, process.id, "unanswered")
        if close:
            world.set_status(process, S.CLOSED, chat=[world.line(process, "bye")])
        made.append(process)
    if close:
        world.sessions.update_session_status(tenant, session.id, SessionStatus.CLOSED,
                                             allowed_from=frozenset({SessionStatus.OPEN}))
    return session, made


def _tick() -> None:
    time.sleep(0.005)  # the next write's time is past every earlier one (milliseconds)


def _gone(sessions: SessionStore, lanes: LaneStore, session: Session,
          processes: list[ThinkProcess]) -> bool:
    with pytest.raises(NotFound):
        sessions.get_session(session.tenant_id, session.id)
    assert sessions.list_processes(session.tenant_id, session.id) == []
    for process in processes:
        with pytest.raises(NotFound):
            sessions.get_process(process.tenant_id, process.id)
        assert lanes.chat_history(process.tenant_id, process.id) == []
        assert lanes.turn_records(process.tenant_id, process.id) == []
        assert lanes.pending_messages(process.tenant_id, process.id) == []
    return True


def _whole(sessions: SessionStore, lanes: LaneStore, session: Session,
           processes: list[ThinkProcess]) -> bool:
    assert sessions.get_session(session.tenant_id, session.id).id == session.id
    assert len(sessions.list_processes(session.tenant_id, session.id)) == len(processes)
    for process in processes:
        assert len(lanes.chat_history(process.tenant_id, process.id)) >= 1
        assert len(lanes.turn_records(process.tenant_id, process.id)) >= 1
        assert len(lanes.pending_messages(process.tenant_id, process.id)) == 1
    return True


def test_a_closed_session_past_the_cutoff_goes_whole_and_nothing_else(
        retention: RetentionStore, sessions: SessionStore, lanes: LaneStore,
        event_outbox: EventOutboxStore, user_inbox: UserInboxStore, timers: TimerStore,
        world: World) -> None:
    old, old_processes = _session(world, processes=2)
    answered, answered_processes = _session(world)
    item = world.add_item(T, origin_process_id=answered_processes[0].id,
                          origin_session_id=answered.id)
    user_inbox.save_inbox_item(item.model_copy(update={"status": ItemStatus.ANSWERED,
                                                       "resolved_at": utcnow()}),
                               expected_revision=item.revision)
    asks, asks_processes = _session(world)  # its process's ask is still PENDING
    world.add_item(T, origin_process_id=asks_processes[0].id)
    asked_in, asked_in_processes = _session(world)  # an ask PENDING in the session
    world.add_item(T, origin_session_id=asked_in.id)
    lingering, lingering_processes = _session(world, close=False)  # session OPEN, processes CLOSED
    still_running, running_processes = _session(world)
    world.set_status(world.process(T, still_running.id), S.IDLE)  # one process never closed
    running_processes = sessions.list_processes(T, still_running.id)
    others, others_processes = _session(world, "ten_2")
    _tick()
    cutoff = utcnow()
    _tick()
    recent, recent_processes = _session(world)

    due = retention.closed_sessions_due(T, cutoff)
    assert set(due) == set(SESSION_KINDS)
    assert due["sessions"] == Due(2, sessions.get_session(T, old.id).updated_at)
    assert due["processes"].count == 3 and due["chat"].count == 6
    assert due["messages"].count == 3 and due["turns"].count == 6

    first = retention.purge_closed_sessions(T, cutoff, limit=1)
    assert first["sessions"] == 1
    second = retention.purge_closed_sessions(T, cutoff, limit=5)
    assert second["sessions"] == 1
    assert {kind: first[kind] + second[kind] for kind in SESSION_KINDS} == {
        kind: due[kind].count for kind in SESSION_KINDS}
    assert retention.purge_closed_sessions(T, cutoff) == dict.fromkeys(SESSION_KINDS, 0)
    assert retention.closed_sessions_due(T, cutoff)["sessions"] == Due(0, None)

    assert _gone(sessions, lanes, old, old_processes)
    assert _gone(sessions, lanes, answered, answered_processes)
    for process in old_processes + answered_processes:
        assert event_outbox.pending_events(T, process.id) == []
    assert [t.process_id for t in timers.due_timers(
                utcnow() + timedelta(days=500), limit=100)
            if t.process_id in {p.id for p in old_processes}] == []
    # The answered ask stays (audit), pointing at a session that is gone.
    assert user_inbox.get_inbox_item(T, item.id).status is ItemStatus.ANSWERED
    for session, processes in ((asks, asks_processes), (asked_in, asked_in_processes),
                               (lingering, lingering_processes), (recent, recent_processes),
                               (others, others_processes)):
        assert _whole(sessions, lanes, session, processes)
    assert sessions.get_session(T, still_running.id).status is SessionStatus.CLOSED
    assert len(sessions.list_processes(T, still_running.id)) == len(running_processes) == 2


def test_a_later_cutoff_takes_what_was_held_back_once_it_is_released(
        retention: RetentionStore, sessions: SessionStore, lanes: LaneStore,
        user_inbox: UserInboxStore, world: World) -> None:
    asks, processes = _session(world)
    item = world.add_item(T, origin_process_id=processes[0].id)
    _tick()
    cutoff = utcnow()
    assert retention.purge_closed_sessions(T, cutoff)["sessions"] == 0
    user_inbox.save_inbox_item(item.model_copy(update={"status": ItemStatus.DISMISSED,
                                                       "resolved_at": utcnow()}),
                               expected_revision=item.revision)
    assert retention.closed_sessions_due(T, cutoff)["sessions"].count == 1
    assert retention.purge_closed_sessions(T, cutoff)["sessions"] == 1
    assert _gone(sessions, lanes, asks, processes)


def test_the_purge_leaves_memory_documents_settings_and_the_inbox_alone(
        backend: Backend, retention: RetentionStore, world: World) -> None:
    from tests.store_contract.documents._build import indexed
    from tests.store_contract.memory._entries import entry

    session, processes = _session(world)
    memory = backend.port(MemoryStore)
    remembered, _ = memory.record(entry("The launch moved to Friday.", tenant=T,
                                        session=session.id, process=processes[0].id))
    documents = backend.port(DocumentStore)
    doc = indexed(documents, "Deploys run on Fridays.", tenant=T, project="default")
    backend.port(SettingStore).set_setting(T, SettingScope.tenant(), "llm.model", "m")
    item = world.add_item(T, origin_session_id=session.id)
    world.user_inbox.save_inbox_item(item.model_copy(update={"status": ItemStatus.ARCHIVED}),
                                     expected_revision=item.revision)
    _tick()
    assert retention.purge_closed_sessions(T, utcnow())["sessions"] == 1

    assert memory.get_memory(T, remembered.id) == remembered
    assert documents.get_document(T, "default", doc.id) == doc
    assert len(documents.read_chunks(T, "default", doc.id)) == 1
    assert backend.port(SettingStore).list_settings(T, SettingScope.tenant()) == {
        "llm.model": "m"}
    assert world.user_inbox.get_inbox_item(T, item.id).status is ItemStatus.ARCHIVED


def test_deliveries_past_the_cutoff_go_in_batches_but_queued_ones_stay(
        retention: RetentionStore, deliveries: DeliveryStore, world: World) -> None:
    now = utcnow()
    old = [world.delivery(T, status=DeliveryStatus.SENT, created_at=now - timedelta(days=d))
           for d in (40, 35, 31)]
    queued = world.delivery(T, status=DeliveryStatus.QUEUED, created_at=now - timedelta(days=50))
    recent = world.delivery(T, status=DeliveryStatus.FAILED, created_at=now - timedelta(days=2))
    elsewhere = world.delivery("ten_2", status=DeliveryStatus.SENT,
                               created_at=now - timedelta(days=60))
    for delivery in (*old, queued, recent, elsewhere):
        deliveries.add_delivery(delivery)
    cutoff = now - timedelta(days=30)

    assert retention.deliveries_due(T, cutoff) == Due(3, old[0].created_at)
    assert retention.purge_deliveries(T, cutoff, limit=2) == 2
    assert retention.purge_deliveries(T, cutoff, limit=2) == 1
    assert retention.purge_deliveries(T, cutoff, limit=2) == 0
    assert retention.deliveries_due(T, cutoff) == Due(0, None)
    assert {d.id for d in deliveries.list_deliveries(T)} == {queued.id, recent.id}
    assert [d.id for d in deliveries.list_deliveries("ten_2")] == [elsewhere.id]


def test_audit_records_before_the_cutoff_go_in_batches_of_that_tenant_only(
        retention: RetentionStore, audit: AuditStore) -> None:
    cutoff = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)

    def record(tenant: str, at: datetime) -> AuditRecord:
        made = AuditRecord(id=new_id("aud"), tenant_id=tenant, at=at, actor="cli ops",
                           action="token.revoke", target="tok_1", outcome="ok")
        audit.append_audit(made)
        return made

    old = [record(T, cutoff - timedelta(days=d)) for d in (500, 401, 2)]
    just_before = record(T, cutoff - timedelta(milliseconds=1))
    kept = [record(T, cutoff), record(T, cutoff + timedelta(days=1))]
    elsewhere = record("ten_2", cutoff - timedelta(days=600))

    assert retention.audit_due(T, cutoff) == Due(4, old[0].at)
    assert audit.list_audit(T) == [*reversed(kept), just_before, *reversed(old)]  # dry run
    assert retention.purge_audit(T, cutoff, limit=3) == 3
    assert audit.list_audit(T) == [*reversed(kept), just_before]  # the oldest went first
    assert retention.purge_audit(T, cutoff, limit=3) == 1
    assert retention.purge_audit(T, cutoff, limit=3) == 0
    assert retention.audit_due(T, cutoff) == Due(0, None)
    assert audit.list_audit(T) == list(reversed(kept))
    assert audit.list_audit("ten_2") == [elsewhere]
    assert retention.audit_due("ten_2", cutoff) == Due(1, elsewhere.at)
