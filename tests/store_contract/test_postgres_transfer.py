"""What the transfer contract cannot see on PostgreSQL: imported chunk ids move the identity
past them (a document indexed after the import gets new ids and search finds old and new),
and schema version 2 gives a version-1 store's chat its insertion order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.store_contract.conftest import World
from tests.store_contract.documents._build import indexed
from tests.store_contract.test_transfer_between_backends import export, load, use
from vancetope_brain.models import ProcessStatus
from vancetope_brain.store import DocumentStore, LaneStore, TransferStore
from vancetope_brain.store.postgres import PostgresBackend
from vancetope_brain.store.postgres._db import SCHEMA_VERSION


@pytest.fixture
def source(postgres_run_database: Any) -> Iterator[PostgresBackend]:
    with postgres_run_database.schema() as url:
        backend = PostgresBackend(url)
        yield backend
        backend.close()


def test_a_document_indexed_after_an_import_gets_chunk_ids_past_the_imported_ones(
        source: PostgresBackend, postgres_url: str) -> None:
    use(source)
    exported = export(source)
    target = PostgresBackend(postgres_url)
    load(target, exported)
    imported = {chunk["id"] for chunk in exported["knowledge_chunks"]}
    assert imported == set(range(1, len(imported) + 1))  # the target's identity began at 1

    new = indexed(target.port(DocumentStore), "Fridays bring the release train.",
                  "Trains leave on time.", name="trains.md", tenant="ten_a", project="default")
    ids = [chunk["id"] for chunk in export(target)["knowledge_chunks"]]
    assert ids[:len(imported)] == sorted(imported) and len(ids) == len(imported) + 2
    assert min(ids[len(imported):]) > max(imported)
    found = [hit.chunk.text for hit in target.port(DocumentStore).search_chunks(
        "ten_a", ["default"], "fridays", 10)]
    assert sorted(found) == ["Deploys run on Fridays.", "Fridays are quiet.",
                             "Fridays bring the release train."]
    assert new.id in {hit.chunk.document_id for hit in target.port(DocumentStore).search_chunks(
        "ten_a", ["default"], "trains", 10)}
    target.close()


def test_an_import_never_moves_the_chunk_identity_back(
        source: PostgresBackend, postgres_url: str) -> None:
    use(source)
    exported = export(source)
    target = PostgresBackend(postgres_url)
    for _ in range(3):  # chunks written and replaced: the identity is past the stored ids
        indexed(target.port(DocumentStore), "Old words.", name="old.md", tenant="ten_z",
                project="default")
    with psycopg.connect(postgres_url) as conn:
        [(before,)] = conn.execute("SELECT MAX(id) FROM knowledge_chunks").fetchall()
    load(target, {**exported, "knowledge_chunks": exported["knowledge_chunks"][:2],
                  "knowledge_vectors": []})
    indexed(target.port(DocumentStore), "New words.", name="new.md", tenant="ten_z",
            project="default")
    with psycopg.connect(postgres_url) as conn:
        [(after,)] = conn.execute(
            "SELECT id FROM knowledge_chunks WHERE text = 'New words.'").fetchall()
    assert after > before
    target.close()


def _to_version_1(url: str) -> None:
    """Make the store what schema version 1 left: ``chat`` without ``row_no``."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE chat DROP COLUMN row_no")
        conn.execute("UPDATE schema_version SET version = 1")


def test_version_2_numbers_a_version_1_stores_chat_and_the_lines_after_it(
        postgres_url: str) -> None:
    backend = PostgresBackend(postgres_url)
    world = World(backend)
    tenant = world.tenant()
    process = world.process(tenant, world.session(tenant).id)
    world.set_status(process, ProcessStatus.IDLE, chat=[world.line(process, "one"),
                                                        world.line(process, "two")])
    backend.close()
    _to_version_1(postgres_url)

    backend = PostgresBackend(postgres_url)
    assert backend.schema_version() == SCHEMA_VERSION  # every migration since 1 ran
    lanes = backend.port(LaneStore)
    assert [line.content for line in lanes.chat_history(tenant, process.id)] == ["one", "two"]
    World(backend).set_status(process, ProcessStatus.IDLE,
                              chat=[World(backend).line(process, "three")])
    with psycopg.connect(postgres_url) as conn:
        numbered = conn.execute("SELECT doc->>'content', row_no FROM chat").fetchall()
    old = [row_no for content, row_no in numbered if content != "three"]
    [new] = [row_no for content, row_no in numbered if content == "three"]
    assert len(old) == 2 and None not in old and new > max(old)
    page, _ = backend.port(TransferStore).export_page("chat", None, 10)
    assert [line["doc"]["content"] for line in page][-1] == "three"
    backend.close()


def test_pages_asked_out_of_turn_or_by_another_process_read_the_same(
        source: PostgresBackend, postgres_url: str) -> None:
    # The pages of a kind come from one server-side cursor while they are asked in turn;
    # any other call starts a new one after its cursor.
    use(source)
    whole = export(source)
    names = ["chat", "messages", "knowledge_chunks"]
    read: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    cursors: dict[str, str | None] = dict.fromkeys(names)
    port = source.port(TransferStore)
    while names:
        for name in list(names):  # one page of each kind in turn
            page, cursors[name] = port.export_page(name, cursors[name], 2)
            read[name] += page
            if cursors[name] is None:
                names.remove(name)
    assert read == {name: whole[name] for name in read}
    first, cursor = port.export_page("turns", None, 5)
    again = PostgresBackend(source.pool.conninfo)  # type: ignore[arg-type]
    rest, _ = again.port(TransferStore).export_page("turns", cursor, 1000)
    assert first + rest == whole["turns"]
    again.close()
