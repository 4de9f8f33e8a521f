"""Fixtures of the contract suite: a fresh backend per test, per storage kind, its ports,
and a small data builder.

``storage`` is one storage location, parametrised over the backends: it opens
backends on it (so a test can reopen it) and can write a raw field behind the
ports' back. ``backend`` is the ``vancetope_brain.store.Backend`` under test;
``identity``, ``audit``, ``usage``, ``timers``, ``inspector``, ``sessions``, ``lanes``, ``event_outbox``, ``journal``, ``dead_letters``,
``user_inbox``, ``deliveries``, ``webhooks``, ``recipes``, ``settings``, ``tool_health``, ``memory``,
``documents`` and ``vectors`` are its ports. ``world`` builds tenants,
sessions, processes, messages, turn commits, user Inbox items and
notification deliveries through the ports.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import mongomock
import mongomock.collection
import mongomock.command_cursor
import mongomock.database
import psycopg
import pytest
from psycopg.types.json import Jsonb
from pymongo import MongoClient

from vancetope_brain.models import (
    ApiToken,
    ChatMessage,
    ChatRole,
    InboxMessage,
    ProcessStatus,
    Session,
    Tenant,
    ThinkProcess,
    TurnCommit,
    TurnRecord,
    User,
    UserChatInput,
    new_id,
    utcnow,
)
from vancetope_brain.models.inbox import (
    Criticality,
    DeliveryStatus,
    InboxItem,
    ItemType,
    NotificationDelivery,
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
    SessionStore,
    SettingStore,
    TimerStore,
    ToolHealthStore,
    TransferStore,
    UsageStore,
    UserInboxStore,
    WebhookStore,
)
from vancetope_brain.store.mongo import MongoBackend
from vancetope_brain.store.postgres import PostgresBackend
from vancetope_brain.store.sqlite import SqliteBackend

MONGO_URL = os.environ.get("VANCETOPE_TEST_MONGO_URL")
# The real MongoDB backend is not generated at all without a URL (not skipped); PostgreSQL
# runs on every developer machine and in CI (tests/postgres_db.py).
BACKENDS = ["sqlite", "postgres", "mongomock", *(["mongo"] if MONGO_URL else [])]


@dataclass
class Storage:
    """One storage location and the means to open backends on it."""

    name: str
    open: Callable[[], Backend]
    # (kind, record id, field, value): write one stored field, bypassing the ports.
    set_raw: Callable[[str, str, str, Any], None]
    # (kind, record id, field): remove one stored field (a record older than the field).
    drop_raw: Callable[[str, str, str], None]
    opened: list[Backend] = field(default_factory=list)

    def open_backend(self) -> Backend:
        backend = self.open()
        self.opened.append(backend)
        return backend


def _sqlite_storage(path: str) -> Storage:
    # kind -> (table, the column a record id names; a tool-health record: its server)
    tables = {"process": ("processes", "id"), "session": ("sessions", "id"),
              "user": ("users", "id"), "tool_health": ("tool_health", "server"),
              "token": ("api_tokens", "id")}

    def update(kind: str, record_id: str, change: str, params: tuple[Any, ...]) -> None:
        table, column = tables[kind]
        with sqlite3.connect(path) as conn:
            conn.execute(f"UPDATE {table} SET doc = {change} WHERE {column} = ?",
                         (*params, record_id))
        conn.close()

    def set_raw(kind: str, record_id: str, name: str, value: Any) -> None:
        update(kind, record_id, f"json_set(doc, '$.{name}', ?)", (value,))

    def drop_raw(kind: str, record_id: str, name: str) -> None:
        update(kind, record_id, f"json_remove(doc, '$.{name}')", ())

    return Storage("sqlite", lambda: SqliteBackend(path), set_raw, drop_raw)


def _postgres_storage(url: str) -> Storage:
    tables = {"process": ("processes", "id"), "session": ("sessions", "id"),
              "user": ("users", "id"), "tool_health": ("tool_health", "server"),
              "token": ("api_tokens", "id")}

    def update(kind: str, record_id: str, change: str, params: tuple[Any, ...]) -> None:
        table, column = tables[kind]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"UPDATE {table} SET doc = {change} WHERE {column} = %s",
                         (*params, record_id))

    def set_raw(kind: str, record_id: str, name: str, value: Any) -> None:
        update(kind, record_id, "jsonb_set(doc, %s, %s)", ([name], Jsonb(value)))

    def drop_raw(kind: str, record_id: str, name: str) -> None:
        update(kind, record_id, "doc - %s", (name,))

    return Storage("postgres", lambda: PostgresBackend(url), set_raw, drop_raw)


class Serialised:
    """mongomock made thread-safe as a server is: a proxy of a mongomock client, database,
    collection or cursor that runs each single call under one lock of the client.

    mongomock is not thread-safe (a ``find_one_and_update`` reads, then writes; a query
    walks a dict another thread changes). A MongoDB server makes each single-document
    operation atomic and lets other clients' operations interleave between two operations;
    here each call (a ``find_one_and_update``, an ``insert_one``, an ``update_many``, a
    cursor's evaluation, …) is atomic as a whole and threads interleave between calls — so
    a multi-step write of an adapter is exactly as exposed to a concurrent writer as on a
    server. (A multi-document call is, if anything, more isolated here than on a server;
    the adapters rely on no such thing: each docstring says what is atomic.)
    """

    _wrapped = (mongomock.MongoClient, mongomock.database.Database,
                mongomock.collection.Collection, mongomock.collection.Cursor,
                mongomock.command_cursor.CommandCursor)

    def __init__(self, target: Any, lock: threading.RLock | None = None) -> None:
        self._target = target
        self._lock = lock if lock is not None else threading.RLock()

    def _wrap(self, value: Any) -> Any:
        return Serialised(value, self._lock) if isinstance(value, self._wrapped) else value

    def __getattr__(self, name: str) -> Any:
        if name == "create_index" and isinstance(self._target, mongomock.collection.Collection):
            return self._create_index
        with self._lock:
            value = getattr(self._target, name)
        if not callable(value) or isinstance(value, self._wrapped):
            return self._wrap(value)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                with self._lock:
                    return self._wrap(value(*args, **kwargs))
            finally:
                time.sleep(0)  # a round trip: let other clients' operations in
        return call

    def _create_index(self, keys: Any, **kwargs: Any) -> Any:
        # A server leaves an index that exists alone; mongomock checks it again against every
        # document, ignoring its partialFilterExpression (so a backend opened a second time
        # on messages without an idempotency key would fail on the partial unique index).
        with self._lock:
            name = kwargs.get("name")
            if name is not None and name in self._target.index_information():
                return name
            return self._target.create_index(keys, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        with self._lock:
            return self._wrap(self._target[key])

    def __iter__(self) -> Serialised:
        return self

    def __next__(self) -> Any:
        with self._lock:  # a cursor: its first step evaluates the whole query
            return next(self._target)

    def __enter__(self) -> Serialised:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _mongo_storage(name: str, client: Any, db_name: str) -> Storage:
    collections = {"process": ("think_processes", "_id"), "session": ("sessions", "_id"),
                   "user": ("users", "_id"), "tool_health": ("tool_health", "server"),
                   "token": ("api_tokens", "_id")}

    def update(kind: str, record_id: str, change: dict[str, Any]) -> None:
        collection, key = collections[kind]
        client[db_name][collection].update_one({key: record_id}, change)

    def set_raw(kind: str, record_id: str, field_name: str, value: Any) -> None:
        update(kind, record_id, {"$set": {field_name: value}})

    def drop_raw(kind: str, record_id: str, field_name: str) -> None:
        update(kind, record_id, {"$unset": {field_name: ""}})

    return Storage(name, lambda: MongoBackend.from_client(client, db_name), set_raw, drop_raw)


@contextmanager
def _new_storage(name: str, request: pytest.FixtureRequest, folder: Path) -> Iterator[Storage]:
    """A new, empty storage of backend ``name`` (a SQLite file in ``folder``), emptied and
    closed afterwards."""
    client: Any = None
    db_name = f"vancetope_test_{uuid.uuid4().hex[:12]}"
    with ExitStack() as schemas:
        if name == "sqlite":
            made = _sqlite_storage(str(folder / "vancetope.db"))
        elif name == "postgres":
            run: Any = request.getfixturevalue("postgres_run_database")
            made = _postgres_storage(schemas.enter_context(run.schema()))
        elif name == "mongomock":
            # Thread-safe as a server is (``Serialised``), so the concurrency contracts run here.
            client = Serialised(mongomock.MongoClient(tz_aware=True))
            made = _mongo_storage("mongomock", client, db_name)
        else:
            client = MongoClient(MONGO_URL, tz_aware=True, serverSelectionTimeoutMS=5000)
            made = _mongo_storage("mongo", client, db_name)
        yield made
        for backend in made.opened:
            backend.close()
        if client is not None:
            client.drop_database(db_name)
            client.close()


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    with _new_storage(request.param, request, tmp_path / "store") as made:
        yield made


@pytest.fixture
def new_storage(storage: Storage, request: pytest.FixtureRequest,
                tmp_path: Path) -> Iterator[Callable[[], Storage]]:
    """Makes further, empty storages of ``storage``'s backend (where an import writes)."""
    with ExitStack() as made:
        def new() -> Storage:
            return made.enter_context(_new_storage(storage.name, request,
                                                   tmp_path / uuid.uuid4().hex[:8]))
        yield new


@pytest.fixture
def other_storage(new_storage: Callable[[], Storage]) -> Storage:
    """A second, empty storage of ``storage``'s backend."""
    return new_storage()


@pytest.fixture
def backend(storage: Storage) -> Backend:
    return storage.open_backend()


@pytest.fixture
def identity(backend: Backend) -> IdentityStore:
    return backend.port(IdentityStore)


@pytest.fixture
def audit(backend: Backend) -> AuditStore:
    return backend.port(AuditStore)


@pytest.fixture
def usage(backend: Backend) -> UsageStore:
    return backend.port(UsageStore)


@pytest.fixture
def timers(backend: Backend) -> TimerStore:
    return backend.port(TimerStore)


@pytest.fixture
def inspector(backend: Backend) -> InspectorStore:
    return backend.port(InspectorStore)


@pytest.fixture
def sessions(backend: Backend) -> SessionStore:
    return backend.port(SessionStore)


@pytest.fixture
def lanes(backend: Backend) -> LaneStore:
    return backend.port(LaneStore)


@pytest.fixture
def event_outbox(backend: Backend) -> EventOutboxStore:
    return backend.port(EventOutboxStore)


@pytest.fixture
def journal(backend: Backend) -> JournalStore:
    return backend.port(JournalStore)


@pytest.fixture
def dead_letters(backend: Backend) -> DeadLetterStore:
    return backend.port(DeadLetterStore)


@pytest.fixture
def user_inbox(backend: Backend) -> UserInboxStore:
    return backend.port(UserInboxStore)


@pytest.fixture
def webhooks(backend: Backend) -> WebhookStore:
    return backend.port(WebhookStore)


@pytest.fixture
def deliveries(backend: Backend) -> DeliveryStore:
    return backend.port(DeliveryStore)


@pytest.fixture
def schedules(backend: Backend) -> ScheduleStore:
    return backend.port(ScheduleStore)


@pytest.fixture
def recipes(backend: Backend) -> RecipeStore:
    return backend.port(RecipeStore)


@pytest.fixture
def settings(backend: Backend) -> SettingStore:
    return backend.port(SettingStore)


@pytest.fixture
def tool_health(backend: Backend) -> ToolHealthStore:
    return backend.port(ToolHealthStore)


@pytest.fixture
def memory(backend: Backend) -> MemoryStore:
    return backend.port(MemoryStore)


@pytest.fixture
def transfer(backend: Backend) -> TransferStore:
    return backend.port(TransferStore)


@pytest.fixture
def documents(backend: Backend) -> DocumentStore:
    return backend.port(DocumentStore)


@pytest.fixture
def vectors(backend: Backend) -> DocumentVectors:
    """The vectors of the chunks ``documents`` writes (the same backend)."""
    return backend.port(DocumentVectors)


class World:
    """Builds valid records with fresh ids; nothing here asserts anything."""

    def __init__(self, backend: Backend) -> None:
        self.identity = backend.port(IdentityStore)
        self.sessions = backend.port(SessionStore)
        self.lanes = backend.port(LaneStore)
        self.user_inbox = backend.port(UserInboxStore)
        self.inspector = backend.port(InspectorStore)

    def tenant(self) -> str:
        tenant = Tenant(id=new_id("ten"), name="Acme")
        self.identity.create_tenant(tenant)
        return tenant.id

    def user(self, tenant_id: str) -> str:
        user = User(id=new_id("usr"), tenant_id=tenant_id, name="Ada")
        self.identity.create_user(user)
        return user.id

    def session(self, tenant_id: str, user_id: str = "usr_1", **fields: Any) -> Session:
        session = Session(id=new_id("ses"), tenant_id=tenant_id, user_id=user_id, **fields)
        self.sessions.create_session(session)
        return session

    def process(self, tenant_id: str, session_id: str = "ses_1", **fields: Any) -> ThinkProcess:
        process = ThinkProcess(
            id=new_id("proc"), tenant_id=tenant_id, session_id=session_id, user_id="usr_1",
            name="main", engine="echo", engine_version="1", **fields,
        )
        self.sessions.create_process(process)
        return process

    def message(self, tenant_id: str, process_id: str, text: str = "hello", *,
                key: str | None = None, created_at: datetime | None = None) -> InboxMessage:
        """An unsaved inbox message."""
        return InboxMessage(
            id=new_id("msg"), tenant_id=tenant_id, target_process_id=process_id,
            idempotency_key=key, message=UserChatInput(from_user="usr_1", content=text),
            created_at=created_at or utcnow(),
        )

    def append(self, tenant_id: str, process_id: str, text: str = "hello",
               **kw: Any) -> InboxMessage:
        stored, created = self.lanes.append_message(self.message(tenant_id, process_id, text, **kw))
        assert created
        return stored

    def line(self, process: ThinkProcess, content: str, *, role: ChatRole = ChatRole.ASSISTANT,
             source: str | None = None) -> ChatMessage:
        return ChatMessage(
            id=new_id("chat"), tenant_id=process.tenant_id, session_id=process.session_id,
            process_id=process.id, role=role, content=content, source_message_id=source,
        )

    def turn(self, process: ThinkProcess, epoch: int, *, status: ProcessStatus = ProcessStatus.IDLE,
             drained: list[str] | None = None, chat: list[ChatMessage] | None = None,
             **fields: Any) -> TurnCommit:
        record = TurnRecord(
            id=new_id("turn"), tenant_id=process.tenant_id, process_id=process.id, epoch=epoch,
            worker="w1", lifecycle="on_message", drained_ids=drained or [], started_at=utcnow(),
            status_after=status,
        )
        return TurnCommit(status=status, record=record, drained_ids=drained or [],
                          chat=chat or [], **fields)

    def set_status(self, process: ThinkProcess, status: ProcessStatus, **fields: Any) -> None:
        """Move a process to ``status`` the only way the port allows: a committed turn
        (``fields`` go into its ``TurnCommit``)."""
        epoch = self.lanes.acquire_epoch(process.tenant_id, process.id).epoch
        assert None is not self.lanes.commit_turn(process.tenant_id, process.id, epoch,
                                                  self.turn(process, epoch, status=status,
                                                            **fields))

    def token(self, tenant_id: str, token_hash: str, *, user_id: str = "usr_1",
              revoked: bool = False, **fields: Any) -> ApiToken:
        token = ApiToken(id=new_id("tok"), tenant_id=tenant_id, user_id=user_id,
                         token_hash=token_hash, revoked=revoked, **fields)
        self.identity.create_token(token)
        return token

    def item(self, tenant_id: str, *, assigned_to: str = "usr_1", **fields: Any) -> InboxItem:
        """An unsaved user Inbox item (PENDING APPROVAL unless ``fields`` say otherwise)."""
        return InboxItem(**{"id": new_id("itm"), "tenant_id": tenant_id,
                            "originator_user_id": "usr_1", "assigned_to_user_id": assigned_to,
                            "type": ItemType.APPROVAL, "title": "Approve the plan?", **fields})

    def add_item(self, tenant_id: str, **fields: Any) -> InboxItem:
        stored, created = self.user_inbox.create_inbox_item(self.item(tenant_id, **fields))
        assert created
        return stored

    def delivery(self, tenant_id: str, item_id: str = "itm_1", *, channel: str = "email",
                 status: DeliveryStatus = DeliveryStatus.QUEUED, **fields: Any
                 ) -> NotificationDelivery:
        """An unsaved delivery attempt."""
        return NotificationDelivery(**{"id": new_id("dlv"), "tenant_id": tenant_id,
                                       "item_id": item_id, "user_id": "usr_1",
                                       "channel": channel, "status": status,
                                       "criticality": Criticality.NORMAL, **fields})


@pytest.fixture
def world(backend: Backend) -> World:
    return World(backend)
