"""MongoDB transfer: a used SQLite store moved into MongoDB (mongomock) exports the same
records again and goes on working there through the ports; and what MongoDB alone does to
hold the record form (a lane in its process's document, chunk ids, an interrupted import,
an answer still in an Inbox item's outbox)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mongomock
import numpy as np
import pytest

from tests.store_contract.conftest import World
from tests.store_contract.transfer._used import MODEL, Used, build, export_store, import_store
from vancetope_brain.errors import Conflict
from vancetope_brain.models import ChatRole, DeadLetter
from vancetope_brain.models.inbox import ItemStatus
from vancetope_brain.store import (
    Backend,
    DeadLetterStore,
    DocumentStore,
    DocumentVectors,
    IdentityStore,
    LaneStore,
    MemoryStore,
    SessionSearch,
    SessionStore,
    TransferStore,
    UserInboxStore,
)
from vancetope_brain.store.mongo import MongoBackend
from vancetope_brain.store.mongo._codec import to_bson
from vancetope_brain.store.sessions import every_session
from vancetope_brain.store.transfer import KINDS

Exported = dict[str, list[dict[str, Any]]]


@pytest.fixture
def mongo() -> Iterator[MongoBackend]:
    backend = MongoBackend.from_client(mongomock.MongoClient(tz_aware=True), "vancetope_moved")
    yield backend
    backend.close()


def _by_key(exported: Exported) -> dict[str, list[dict[str, Any]]]:
    """Each kind's records sorted by key: the records as a set (MongoDB lists
    insertion-ordered kinds in an order of its own)."""
    return {kind.name: _sorted(exported[kind.name], kind.key) for kind in KINDS}


def _sorted(records: list[dict[str, Any]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda record: [record[column] for column in key])


def _requeue_a_dead_letter(backend: Backend, world: World, tenant: str) -> None:
    """A second dead letter, requeued: SQLite then holds a message whose ``doc`` lost its
    ``deadLetter`` key (the first stays dead)."""
    process = world.process(tenant, world.session(tenant).id)
    message = world.append(tenant, process.id, "poison")
    epoch = world.lanes.acquire_epoch(tenant, process.id, [message.id]).epoch
    assert world.lanes.commit_turn(tenant, process.id, epoch, world.turn(
        process, epoch, dead_letters={message.id: DeadLetter(reason="poison", attempts=1)}))
    backend.port(DeadLetterStore).requeue_dead_letter(tenant, message.id)


@pytest.mark.parametrize("storage", ["sqlite"], indirect=True)
def test_a_used_sqlite_store_moves_to_mongodb(backend: Backend, world: World,
                                              mongo: MongoBackend) -> None:
    used = build(backend, world)
    tenant, _ = used.tenants
    _requeue_a_dead_letter(backend, world, tenant)
    source = export_store(backend.port(TransferStore))
    moved = mongo.port(TransferStore)
    assert moved.is_empty()

    written = import_store(moved, source)

    assert written == {kind: len(records) for kind, records in source.items()}
    assert not moved.is_empty()
    assert _by_key(export_store(moved)) == _by_key(source)
    assert import_store(moved, source) == dict.fromkeys(source, 0)
    _same_through_the_ports(backend, mongo, used)
    _the_lane_goes_on(backend, mongo, world, used)


def _same_through_the_ports(sqlite: Backend, mongo: Backend, used: Used) -> None:
    """The ports read the same on both (lists ordered by time sorted here: of records made in
    one millisecond, SQLite lists the first inserted first, MongoDB the lower id)."""
    tenant, _ = used.tenants
    for port, read in (
        (IdentityStore, lambda s: sorted((t.id, sorted(u.id for u in s.list_users(t.id)),
                                          sorted(p.id for p in s.list_projects(t.id)))
                                         for t in s.list_tenants())),
        (IdentityStore, lambda s: [None if (t := s.token_by_hash(h)) is None else t.id
                                   for h in used.token_hashes]),
        (SessionStore, lambda s: {t: sorted((x.id, x.status, x.title) for x in
                                            every_session(s, t, "usr_1")) for t in used.tenants}),
        (SessionStore, lambda s: {t: sorted((p.id, p.status, p.epoch, p.next_seq)
                                            for sid in used.sessions[t]
                                            for p in s.list_processes(t, sid))
                                  for t in used.tenants}),
        (LaneStore, lambda s: {p: [(m.id, m.seq, m.attempts) for m in
                                   s.pending_messages(t, p)]
                               for t in used.tenants for p in used.processes[t]}),
        (LaneStore, lambda s: {p: [(c.id, c.seq) for c in s.chat_history(t, p)]
                               for t in used.tenants for p in used.processes[t]}),
        (UserInboxStore, lambda s: s.inbox_pending_counts(tenant, used.users[tenant][0])),
        (SessionSearch, lambda s: sorted((h.session_id, h.seq) for h in
                                         s.search_sessions(tenant, "usr_1", "Fridays"))),
        (MemoryStore, lambda s: [(h.entry.id, round(h.score, 6)) for h in
                                 s.search_memory(tenant, used.memory_scopes, "launch Friday")]),
        (DocumentStore, lambda s: [(h.chunk.id, round(h.score, 6)) for h in
                                   s.search_chunks(tenant, ["default", "prj_b"], "deploys", 10)]),
        (DocumentVectors, lambda s: [h.chunk.id for h in s.search_vectors(
            tenant, ["default"], MODEL, np.array([0, 1, 0, 0], np.float32), 3)]),
    ):
        before, after = read(sqlite.port(port)), read(mongo.port(port))
        assert after == before, port.__name__
        assert after, f"{port.__name__}: nothing read, nothing compared"


def _the_lane_goes_on(sqlite: Backend, mongo: Backend, world: World, used: Used) -> None:
    """The process mid-conversation takes its next message, turn and chat line on MongoDB
    as it would have on SQLite: the same seq, epoch and chat seq."""
    tenant, process_id = used.lane
    went_on = []
    for backend in (sqlite, mongo):
        lanes = backend.port(LaneStore)
        message, created = lanes.append_message(world.message(tenant, process_id, "five"))
        assert created
        process = lanes.acquire_epoch(tenant, process_id, [message.id])
        line = world.line(process, "Five noted.", role=ChatRole.ASSISTANT, source=message.id)
        committed = lanes.commit_turn(tenant, process_id, process.epoch,
                                      world.turn(process, process.epoch, drained=[message.id],
                                                 chat=[line]))
        assert committed is not None
        history = lanes.chat_history(tenant, process_id)
        assert history[-1].id == line.id
        went_on.append((message.seq, process.epoch, [c.seq for c in committed.lines],
                        [c.seq for c in history]))
    assert went_on[0] == went_on[1]
    assert went_on[0][0] > 1  # it went on from the imported lane, not from a new one


@pytest.mark.parametrize("storage", ["mongomock"], indirect=True)
def test_an_interrupted_import_is_finished_by_running_it_again(
        backend: Backend, world: World, mongo: MongoBackend) -> None:
    assert isinstance(backend, MongoBackend)
    build(backend, world)
    source = export_store(backend.port(TransferStore))
    moved = mongo.port(TransferStore)
    # The crash: processes in but not their lanes, the first memory entries in but their
    # scope counters lost, part of the chunks in.
    for kind in ("tenants", "projects", "users", "sessions", "processes"):
        moved.import_records(kind, source[kind])
    moved.import_records("memory_entries", source["memory_entries"][:2])
    mongo.database["memory_scopes"].delete_many({})
    moved.import_records("knowledge_documents", source["knowledge_documents"])
    moved.import_records("knowledge_chunks", source["knowledge_chunks"][:3])
    assert export_store(moved)["lanes"] == []  # a process without its lane shows none

    import_store(moved, source)

    assert _by_key(export_store(moved)) == _by_key(source)
    assert _counters(mongo) == _counters(backend)


def _counters(backend: MongoBackend) -> list[tuple[Any, ...]]:
    return sorted((c["_id"]["tenantId"], c["_id"]["scope"], c["_id"]["scopeId"], c["entries"],
                   c["terms"]) for c in backend.database["memory_scopes"].find())


@pytest.mark.parametrize("storage", ["mongomock"], indirect=True)
def test_chunks_written_on_mongodb_get_ids_once(backend: Backend, world: World) -> None:
    build(backend, world)
    transfer = backend.port(TransferStore)
    first = export_store(transfer)
    ids = [chunk["id"] for chunk in first["knowledge_chunks"]]
    assert ids == list(range(1, len(ids) + 1))
    assert export_store(transfer, limit=100) == first
    with_vectors = {chunk["id"] for chunk in first["knowledge_chunks"]
                    if chunk["document_id"] == first["knowledge_vectors"][0]["document_id"]}
    assert {vector["chunk_id"] for vector in first["knowledge_vectors"]} == with_vectors


@pytest.mark.parametrize("storage", ["mongomock"], indirect=True)
def test_an_answer_left_in_an_items_outbox_is_exported_as_its_message(
        backend: Backend, world: World) -> None:
    assert isinstance(backend, MongoBackend)
    used = build(backend, world)
    tenant, process_id = used.lane
    inbox = backend.port(UserInboxStore)
    item = world.add_item(tenant, origin_process_id=process_id)
    answer = world.message(tenant, process_id, "yes")
    inbox.save_inbox_item(item.model_copy(update={"status": ItemStatus.ANSWERED}),
                          expected_revision=item.revision, message=answer)
    # The crash: the item saved with the answer in its outbox, the answer not appended.
    backend.database["engine_messages"].delete_one({"_id": answer.id})
    backend.database["inbox_items"].update_one({"_id": item.id},
                                               {"$set": {"_outbox": to_bson(answer)}})

    exported = export_store(backend.port(TransferStore))

    assert answer.id in {message["id"] for message in exported["messages"]}
    (saved,) = [record for record in exported["inbox_items"] if record["id"] == item.id]
    assert saved["status"] == "ANSWERED" and "_outbox" not in saved["doc"]
    assert inbox.redeliver_inbox_messages() == 0


@pytest.mark.parametrize("storage", ["mongomock"], indirect=True)
def test_lanes_and_vectors_may_come_before_their_process_and_chunk(
        backend: Backend, world: World, mongo: MongoBackend) -> None:
    build(backend, world)
    source = export_store(backend.port(TransferStore))
    moved = mongo.port(TransferStore)
    first = ("lanes", "knowledge_vectors")
    for kind in first:
        assert moved.import_records(kind, source[kind]) == len(source[kind])
    assert _by_key(export_store(moved)) == _by_key(
        {kind.name: source[kind.name] if kind.name in first else [] for kind in KINDS})

    import_store(moved, {**source, **dict.fromkeys(first, [])})

    assert _by_key(export_store(moved)) == _by_key(source)
    assert mongo.database["transfer_parked"].count_documents({}) == 0
    assert import_store(moved, source) == dict.fromkeys(source, 0)


@pytest.mark.parametrize("storage", ["mongomock"], indirect=True)
def test_a_record_clashing_on_another_unique_key_is_a_conflict(
        backend: Backend, world: World, mongo: MongoBackend) -> None:
    build(backend, world)
    tokens, _ = backend.port(TransferStore).export_page("api_tokens", None, 1)
    moved = mongo.port(TransferStore)
    moved.import_records("api_tokens", tokens)
    twin = {**tokens[0], "id": "tok_twin", "doc": {**tokens[0]["doc"], "id": "tok_twin"}}
    with pytest.raises(Conflict):
        moved.import_records("api_tokens", [twin])
