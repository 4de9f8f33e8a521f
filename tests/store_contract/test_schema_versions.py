"""Every record carries a schema version; a newer one is refused, not misread; reopening is safe."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import StoreError
from vancetope_brain.models import (
    ApiToken,
    Document,
    ProcessStatus,
    Project,
    Role,
    Tenant,
    ThinkProcess,
    utcnow,
)
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.store import (
    AuditStore,
    Backend,
    DeliveryStore,
    DocumentStore,
    EventOutboxStore,
    IdentityStore,
    LaneStore,
    RecipeStore,
    SessionStore,
    SettingStore,
    UserInboxStore,
)
from vancetope_brain.store.sqlite import SqliteAdapter, SqliteBackend
from vancetope_brain.store.sqlite._db import SCHEMA_VERSION

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World


def test_every_record_reads_back_with_the_current_schema_version(
    identity: IdentityStore, sessions: SessionStore, lanes: LaneStore,
    event_outbox: EventOutboxStore, user_inbox: UserInboxStore, deliveries: DeliveryStore,
    world: World
) -> None:
    tenant = world.tenant()
    user = world.user(tenant)
    session = world.session(tenant, user)
    process = world.process(tenant, session.id)
    world.append(tenant, process.id)
    world.token(tenant, "9" * 64)
    epoch = lanes.acquire_epoch(tenant, process.id).epoch
    commit = world.turn(process, epoch, chat=[world.line(process, "hi")])
    assert None is not lanes.commit_turn(tenant, process.id, epoch, commit)
    records: list[Document] = [
        identity.get_user(tenant, user),
        sessions.get_session(tenant, session.id),
        sessions.get_process(tenant, process.id),
        *lanes.pending_messages(tenant, process.id),
        *lanes.chat_history(tenant, process.id),
        *lanes.turn_records(tenant, process.id),
        *event_outbox.pending_events(tenant, process.id),
    ]
    identity.create_project(Project(id="default", tenant_id=tenant, name="default"))
    records += [identity.get_project(tenant, "default"), *identity.list_tenants()]
    token = identity.token_by_hash("9" * 64)
    assert token is not None
    records.append(token)
    item = world.add_item(tenant)
    deliveries.add_delivery(world.delivery(tenant, item.id))
    records += [user_inbox.get_inbox_item(tenant, item.id), *deliveries.list_deliveries(tenant)]
    assert len(records) == 12
    assert all(r.schema_version == type(r).SCHEMA_VERSION == 1 for r in records)


def test_a_record_from_a_newer_schema_is_refused(
    sessions: SessionStore, world: World, storage: Storage
) -> None:
    process = world.process("ten_1")
    storage.set_raw("process", process.id, "schemaVersion", 99)
    with pytest.raises(StoreError, match="schemaVersion 99"):
        sessions.get_process("ten_1", process.id)


def test_reopening_keeps_data_and_creating_the_schema_is_idempotent(
    world: World, storage: Storage
) -> None:
    process = world.process("ten_1")
    message = world.append("ten_1", process.id, key="k")
    again = storage.open_backend()
    assert again.port(SessionStore).get_process("ten_1", process.id).next_seq == 1
    assert again.port(LaneStore).append_message(
        world.message("ten_1", process.id, key="k")) == (message, False)
    assert world.append("ten_1", process.id).seq == 2
    again.ping()


def test_sqlite_refuses_a_file_with_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "vancetope.db"
    SqliteBackend(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        SqliteBackend(path)


# The tables the migrations touch or read, as schema version 1 (and 2) wrote them.
_V1_TABLES = """
CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
INSERT INTO schema_version (id, version) VALUES (1, 1);
CREATE TABLE tenants (id TEXT PRIMARY KEY, doc TEXT NOT NULL);
CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
    revoked INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE TABLE processes (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, session_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE TABLE lanes (
    process_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, status TEXT NOT NULL,
    epoch INTEGER NOT NULL, next_seq INTEGER NOT NULL, next_chat_seq INTEGER NOT NULL
);
CREATE TABLE messages (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, target_process_id TEXT NOT NULL,
    seq INTEGER NOT NULL, idempotency_key TEXT, created_ms INTEGER NOT NULL,
    drained_at TEXT, drained_epoch INTEGER, doc TEXT NOT NULL
);
"""

# What version 7 added to tables that existed before, undone: a current file minus this
# is a version 6 file.
_UNDO_V7 = """
DROP INDEX messages_dead;
ALTER TABLE messages DROP COLUMN attempts;
ALTER TABLE messages DROP COLUMN dead_ms;
ALTER TABLE lanes DROP COLUMN turn_attempts;
"""


def _older_file(tmp_path: Path, drop_tables: str, version: int) -> Path:
    """A file of schema ``version`` (below 7) holding tenant ``ten_1``: a current one without
    the tables later versions added (``drop_tables``, SQL) and the columns of version 7."""
    path = tmp_path / "vancetope.db"
    backend = SqliteBackend(path)
    backend.port(IdentityStore).create_tenant(Tenant(id="ten_1", name="Acme"))
    backend.close()
    with sqlite3.connect(path) as conn:
        conn.executescript(f"{drop_tables} {_UNDO_V7} "
                           f"UPDATE schema_version SET version = {version};")
    conn.close()
    return path


@contextlib.contextmanager
def _migrated(path: Path) -> Iterator[Backend]:
    """Open an older file (which migrates it), then check that it is at the current schema
    version and that opening it again changes nothing."""
    backend = SqliteBackend(path)
    try:
        yield backend
    finally:
        backend.close()
    SqliteBackend(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [
            (SCHEMA_VERSION,)]
    conn.close()


def test_sqlite_migrates_a_version_1_file(tmp_path: Path) -> None:
    path = tmp_path / "vancetope.db"
    process = ThinkProcess(id="proc_1", tenant_id="ten_1", session_id="ses_1", user_id="usr_1",
                           name="main", engine="echo", engine_version="1")
    raw = process.dump()
    del raw["pendingControl"], raw["controlRequestedAt"]  # a v1 document had neither
    with sqlite3.connect(path) as conn:
        conn.executescript(_V1_TABLES)
        conn.execute("INSERT INTO processes VALUES ('proc_1', 'ten_1', 'ses_1', 0, ?)",
                     (json.dumps(raw),))
        conn.execute("INSERT INTO lanes VALUES ('proc_1', 'ten_1', 'IDLE', 3, 0, 0)")
    conn.close()
    with _migrated(path) as backend:
        lanes = backend.port(LaneStore)
        loaded = backend.port(SessionStore).get_process("ten_1", "proc_1")
        assert (loaded.status, loaded.epoch, loaded.pending_control) == (
            ProcessStatus.IDLE, 3, None)
        requested = lanes.request_control("ten_1", "proc_1", "pause",
                                          frozenset({ProcessStatus.IDLE}))
        assert requested.pending_control == "pause"
        assert lanes.stale_pending(utcnow() + timedelta(seconds=5)) == [("ten_1", "proc_1")]


def test_sqlite_migrates_a_version_2_file(tmp_path: Path) -> None:
    """Version 3 adds projects (with every old tenant's ``default``) and tokens by user."""
    path = tmp_path / "vancetope.db"
    tenant = Tenant(id="ten_1", name="Acme")
    token = ApiToken(id="tok_1", tenant_id="ten_1", user_id="usr_1", token_hash="a" * 64)
    with sqlite3.connect(path) as conn:
        conn.executescript(_V1_TABLES)
        conn.executescript("UPDATE schema_version SET version = 2;"
                           "ALTER TABLE lanes ADD COLUMN pending_control TEXT;"
                           "ALTER TABLE lanes ADD COLUMN control_requested_ms INTEGER;")
        conn.execute("INSERT INTO tenants VALUES ('ten_1', ?)", (tenant.model_dump_json(by_alias=True),))
        conn.execute("INSERT INTO api_tokens VALUES ('tok_1', 'ten_1', ?, 0, ?)",
                     ("a" * 64, token.model_dump_json(by_alias=True)))
    conn.close()
    with _migrated(path) as backend:
        identity = backend.port(IdentityStore)
        assert identity.list_projects("ten_1") == [
            Project(id="default", tenant_id="ten_1", name="default",
                    created_at=tenant.created_at)]
        assert identity.list_tokens("ten_1", "usr_1") == [token]
        identity.revoke_token("ten_1", "tok_1")
        assert identity.token_by_hash("a" * 64) is None
        identity.create_project(Project(id="p2", tenant_id="ten_1", name="Second"))


def test_sqlite_migrates_a_version_3_file(tmp_path: Path) -> None:
    """Version 4 adds the recipes and settings tables; everything else is kept."""
    from vancetope_brain.models.recipe import Recipe
    from vancetope_brain.models.settings import SettingScope

    path = _older_file(tmp_path, "DROP TABLE recipes; DROP TABLE settings;", 3)
    with _migrated(path) as backend:
        recipes, settings = backend.port(RecipeStore), backend.port(SettingStore)
        assert [t.id for t in backend.port(IdentityStore).list_tenants()] == ["ten_1"]
        recipes.create_recipe("ten_1", None, Recipe(name="brief", engine="ford"))
        settings.set_setting("ten_1", SettingScope.tenant(), "llm.model", "m")
        assert recipes.get_recipe("ten_1", None, "brief").engine == "ford"
        assert settings.setting_values("ten_1", [SettingScope.tenant()], "llm.model")[0] == "m"


def test_sqlite_migrates_a_version_4_file(tmp_path: Path) -> None:
    """Version 5 adds the user Inbox and the delivery log; everything else is kept."""
    from vancetope_brain.models.inbox import (
        Criticality,
        DeliveryStatus,
        InboxItem,
        InboxQuery,
        ItemType,
        NotificationDelivery,
    )

    path = _older_file(tmp_path, "DROP TABLE inbox_items; DROP TABLE notification_deliveries;", 4)
    item = InboxItem(id="itm_1", tenant_id="ten_1", originator_user_id="usr_1",
                     assigned_to_user_id="usr_1", origin_process_id="proc_1",
                     idempotency_key="k", type=ItemType.APPROVAL, title="Approve?")
    delivery = NotificationDelivery(id="dlv_1", tenant_id="ten_1", item_id="itm_1",
                                    user_id="usr_1", channel="email",
                                    status=DeliveryStatus.QUEUED, criticality=Criticality.NORMAL)
    with _migrated(path) as backend:
        user_inbox, deliveries = backend.port(UserInboxStore), backend.port(DeliveryStore)
        assert [t.id for t in backend.port(IdentityStore).list_tenants()] == ["ten_1"]
        assert user_inbox.create_inbox_item(item) == (item, True)
        assert user_inbox.create_inbox_item(
            item.model_copy(update={"id": "itm_2"})) == (item, False)
        assert user_inbox.list_inbox_items("ten_1", InboxQuery(assigned_to="usr_1")) == [item]
        deliveries.add_delivery(delivery)
        assert deliveries.queued_deliveries("email") == [delivery]
    with sqlite3.connect(path) as conn:
        # (name, unique, partial) of each index the migration made
        indexes = {(name, unique, partial) for table in ("inbox_items", "notification_deliveries")
                   for _, name, unique, _, partial in conn.execute(f"PRAGMA index_list({table})")
                   if not name.startswith("sqlite_autoindex")}
    conn.close()
    assert indexes == {("inbox_by_assignee", 0, 0), ("inbox_by_session", 0, 0),
                       ("inbox_by_process", 0, 0), ("inbox_idempotency", 1, 1),
                       ("deliveries_by_item", 0, 0), ("deliveries_by_user", 0, 0),
                       ("deliveries_queued", 0, 0), ("deliveries_by_age", 0, 0)}


def test_every_sqlite_migration_is_within_the_schema_version() -> None:
    """A migration numbered above ``SCHEMA_VERSION`` would never run."""
    versions = {version for adapter in SqliteAdapter.registry.values()
                for version in adapter.migrations}
    assert versions and max(versions) <= SCHEMA_VERSION


def test_sqlite_migrates_a_version_5_file(tmp_path: Path) -> None:
    """Version 6 puts ``kind`` into the recipes' key; every older row stays a recipe."""
    from vancetope_brain.models.recipe import Recipe
    from vancetope_brain.models.strategy import Strategy

    path = tmp_path / "vancetope.db"
    SqliteBackend(path).close()
    brief = Recipe(name="brief", engine="ford", description="old")
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "DROP TABLE recipes; CREATE TABLE recipes (tenant_id TEXT NOT NULL, project_id TEXT "
            "NOT NULL, name TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (tenant_id, project_id,"
            f" name)); {_UNDO_V7} UPDATE schema_version SET version = 5;")
        conn.execute("INSERT INTO recipes VALUES ('ten_1', '', 'brief', ?)",
                     (brief.model_dump_json(by_alias=True),))
    conn.close()
    with _migrated(path) as backend:
        recipes = backend.port(RecipeStore)
        assert recipes.list_recipes("ten_1", None) == [brief]
        same_name = Strategy.model_validate(
            {"name": "brief", "phases": [{"name": "a", "recipe": "ford", "goal": "g"}]})
        recipes.create_definition("ten_1", None, same_name)  # another kind: no clash
        assert recipes.get_definition(Strategy, "ten_1", None, "brief") == same_name
        assert recipes.get_recipe("ten_1", None, "brief") == brief


def test_sqlite_migrates_a_version_6_file(tmp_path: Path) -> None:
    """Version 7 counts delivery attempts: older messages and lanes start at 0."""
    from vancetope_brain.models import (
        Committed,
        DeadLetter,
        InboxMessage,
        TurnCommit,
        TurnRecord,
        UserChatInput,
    )
    from vancetope_brain.store import DeadLetterStore

    path = _older_file(tmp_path, "", 6)
    process = ThinkProcess(id="proc_1", tenant_id="ten_1", session_id="ses_1", user_id="usr_1",
                           name="main", engine="echo", engine_version="1")
    old = InboxMessage(id="msg_1", tenant_id="ten_1", target_process_id="proc_1", seq=1,
                       message=UserChatInput(from_user="usr_1", content="hi"))
    raw = old.dump()
    del raw["attempts"], raw["deadLetter"]  # a v6 message had neither
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO processes VALUES ('proc_1', 'ten_1', 'ses_1', 0, ?)",
                     (process.model_dump_json(by_alias=True),))
        conn.execute("INSERT INTO lanes (process_id, tenant_id, status, epoch, next_seq, "
                     "next_chat_seq) VALUES ('proc_1', 'ten_1', 'IDLE', 4, 1, 0)")
        conn.execute("INSERT INTO messages (id, tenant_id, target_process_id, seq, created_ms, "
                     "doc) VALUES ('msg_1', 'ten_1', 'proc_1', 1, 0, ?)", (json.dumps(raw),))
    conn.close()
    with _migrated(path) as backend:
        lanes, sessions = backend.port(LaneStore), backend.port(SessionStore)
        assert lanes.pending_messages("ten_1", "proc_1") == [old]
        acquired = lanes.acquire_epoch("ten_1", "proc_1", ["msg_1"])
        assert (acquired.epoch, acquired.turn_attempts) == (5, 0)
        assert lanes.pending_messages("ten_1", "proc_1")[0].attempts == 1
        record = TurnRecord(id="turn_1", tenant_id="ten_1", process_id="proc_1", epoch=5,
                            worker="w", lifecycle="steer", started_at=utcnow(),
                            status_after=ProcessStatus.IDLE)
        commit = TurnCommit(status=ProcessStatus.IDLE, record=record,
                            dead_letters={"msg_1": DeadLetter(reason="r", attempts=1)})
        assert lanes.commit_turn("ten_1", "proc_1", 5, commit) == Committed([], [])
        assert [m.id for m in backend.port(DeadLetterStore).dead_letters("ten_1")] == ["msg_1"]
        assert sessions.get_process("ten_1", "proc_1").turn_attempts == 0


def test_sqlite_adds_the_knowledge_tables_to_a_file_without_them(tmp_path: Path) -> None:
    """New tables need no schema version: a current file made before them gains them."""
    path = _older_file(tmp_path, "DROP TABLE knowledge_fts; DROP TABLE knowledge_chunks; "
                                 "DROP TABLE knowledge_documents;", 6)
    with _migrated(path) as backend:
        documents = backend.port(DocumentStore)
        assert documents.usage("ten_1") == (0, 0)
        assert documents.search_chunks("ten_1", ["default"], "anything", 5) == []


def test_sqlite_file_of_before_roles_gains_the_audit_log_and_its_tokens_stay_user_tokens(
        tmp_path: Path) -> None:
    """The previous version's data: tokens without ``role``, no ``audit_log`` table. Roles
    live in the token's document (absent: ``user``) and the audit log is a new table, so no
    schema version changes."""
    path = tmp_path / "vancetope.db"
    backend = SqliteBackend(path)
    backend.port(IdentityStore).create_token(ApiToken(id="tok_1", tenant_id="ten_1",
                                                      user_id="usr_1", token_hash="f" * 64))
    backend.close()
    with sqlite3.connect(path) as conn:
        conn.executescript("DROP TABLE audit_log; "
                           "UPDATE api_tokens SET doc = json_remove(doc, '$.role');")
    conn.close()
    with _migrated(path) as backend:
        token = backend.port(IdentityStore).token_by_hash("f" * 64)
        assert token is not None and token.role is Role.USER
        record = AuditRecord(id="aud_1", tenant_id="ten_1", at=utcnow().replace(microsecond=0),
                             actor="cli ops", action="token.revoke", target="tok_1",
                             outcome="ok")
        backend.port(AuditStore).append_audit(record)
        assert backend.port(AuditStore).list_audit("ten_1") == [record]
