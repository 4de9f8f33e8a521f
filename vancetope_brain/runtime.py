"""The parts every kind of Vancetope process builds the same way.

Each kind of OS process has its own composition root (ARCHITECTURE §4): the
gateway's is ``vancetope_gateway.parts.build_gateway``, the worker's (lane turns
and beat jobs) ``workers.parts.build_worker``, the admin CLI's ``Administration``. Both start from ``Core``: the
store, Redis, stream events, the waker and the session and Inbox services —
a gateway serves them to clients, a worker's turns and beat jobs use them.
Only the connections differ between the embedded and the distributed shape
(ARCHITECTURE §1).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial
from typing import Any

import fakeredis
import redis

from vancetope_brain import keys
from vancetope_brain.config import Config
from vancetope_brain.engines import ENGINES, EngineRegistry
from vancetope_brain.engines.spawning import ProcessFactory
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.events.interrupts import Interrupts
from vancetope_brain.events.presence import Presence
from vancetope_brain.identity import IdentityService
from vancetope_brain.inbox.attachments import AttachmentStore, load_secret
from vancetope_brain.inbox.service import InboxService
from vancetope_brain.lanes import Waker
from vancetope_brain.lanes.quota import release_holds
from vancetope_brain.lanes.waker import Enqueue
from vancetope_brain.llm.embeddings import Embeddings
from vancetope_brain.notifications import NotificationDispatcher, build_dispatcher
from vancetope_brain.recipes import RecipeAdmin
from vancetope_brain.recipes.resolver import RecipeResolver
from vancetope_brain.services.audit import AuditLog
from vancetope_brain.services.documents import (
    DocumentIndexer,
    DocumentService,
    IndexJob,
)
from vancetope_brain.services.inspector import InspectorService
from vancetope_brain.services.retention import RetentionService
from vancetope_brain.services.schedules import ScheduleService
from vancetope_brain.sessions import SessionService
from vancetope_brain.sessions.lifecycle import SessionLifecycle
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import (
    Backend,
    DeadLetterStore,
    DeliveryStore,
    IdentityStore,
    LaneStore,
    RecipeStore,
    RetentionStore,
    ScheduleStore,
    SessionSearch,
    SessionStore,
    SettingStore,
    TimerStore,
    ToolHealthStore,
    TransferStore,
    UserInboxStore,
    WebhookStore,
    open_store,
)
from vancetope_brain.tools.health import ToolHealthService
from vancetope_brain.webhooks import WebhookEmitter, WebhookService

_embedded_server: fakeredis.FakeServer | None = None
_embedded_guard = threading.Lock()


def redis_client(config: Config) -> redis.Redis:
    """Real Redis when configured; else the process-wide in-memory server (fakeredis)."""
    global _embedded_server
    if config.redis_url:
        # redis-py's pool refuses a command past its cap (its default: 100 connections).
        return redis.Redis.from_url(config.redis_url, health_check_interval=30,
                                    max_connections=config.redis_max_connections)
    with _embedded_guard:
        if _embedded_server is None:
            _embedded_server = fakeredis.FakeServer()
    return fakeredis.FakeRedis(server=_embedded_server)


@dataclass(frozen=True)
class Core:
    """The shared parts; ``Gateway`` and ``Worker`` extend it with their own."""

    config: Config
    store: Backend
    redis: redis.Redis
    events: EventBus
    waker: Waker
    presence: Presence
    settings: SettingsService
    recipes: RecipeResolver
    process_factory: ProcessFactory
    sessions: SessionService
    lifecycle: SessionLifecycle
    notifications: NotificationDispatcher
    inbox: InboxService
    attachments: AttachmentStore
    webhook_events: WebhookEmitter
    """Turns events into webhook deliveries: the Inbox service's, the event outbox's (a
    worker's), a schedule run's (``schedule_run_finished``)."""
    schedules: ScheduleService

    @staticmethod
    def parts(config: Config, enqueue: Enqueue, *, store: Backend | None = None,
              engines: EngineRegistry = ENGINES) -> dict[str, Any]:
        """The core parts by field name, for a subclass's constructor. ``store``: a backend
        this process already opened (the embedded shape shares one between its roots)."""
        store = store or open_store(config.store_url)
        client = redis_client(config)
        events = EventBus(client, max_len=config.event_log_max, ttl=config.event_log_ttl)
        waker = Waker(client, enqueue, shards=config.lane_shards, flag_ttl=2 * config.lease_ttl)
        presence = Presence(client, ttl=config.presence_ttl)
        identity = store.port(IdentityStore)
        settings = SettingsService(store.port(SettingStore), identity,
                                   quota_written=partial(release_holds, store.port(TimerStore)))
        recipes = RecipeResolver(store.port(RecipeStore))
        process_factory = ProcessFactory(
            recipes, engines, max_open_per_session=config.max_processes_per_session)
        sessions = SessionService(sessions=store.port(SessionStore), lanes=store.port(LaneStore),
                                  identity=identity, settings=settings, waker=waker,
                                  processes=process_factory,
                                  search=store.port(SessionSearch),
                                  max_open_sessions=config.max_sessions_per_user,
                                  interrupts=Interrupts(client))
        lifecycle = SessionLifecycle(store=store.port(SessionStore), lanes=store.port(LaneStore),
                                     sessions=sessions, presence=presence)
        items = store.port(UserInboxStore)
        notifications = build_dispatcher(config, store.port(DeliveryStore), items, settings,
                                         presence, events)
        attachments = AttachmentStore(config.attachments_dir, load_secret(config),
                                      config.attachment_url_ttl, config.base_url())

        def publish(tenant_id: str, user_id: str, event: str, item: dict[str, Any]) -> None:
            events.publish(keys.user_feed(tenant_id, user_id), "", EventType(event),
                           {"item": item})

        webhook_events = WebhookEmitter(store.port(WebhookStore), store.port(SessionStore))
        inbox = InboxService(items, identity, store.port(SessionStore), settings,
                             notifications, publish, waker.wake, attachments, config.base_url(),
                             max_pending_per_process=config.max_pending_items_per_process,
                             webhooks=webhook_events)
        schedules = ScheduleService(store=store.port(ScheduleStore),
                                    sessions=store.port(SessionStore), identity=identity,
                                    factory=process_factory, waker=waker, lifecycle=lifecycle,
                                    min_interval=config.schedule_min_interval,
                                    sweep_interval=config.sweep_interval)
        schedules.on_run_ended.append(webhook_events.schedule_run_finished)
        return dict(config=config, store=store, redis=client, events=events, waker=waker,
                    presence=presence, settings=settings, recipes=recipes,
                    process_factory=process_factory, sessions=sessions,
                    lifecycle=lifecycle, notifications=notifications, inbox=inbox,
                    attachments=attachments, webhook_events=webhook_events,
                    schedules=schedules)

    def close(self) -> None:
        self.store.close()


@dataclass(frozen=True)
class Operations:
    """What the gateway's operators' door (``/admin/``) acts on: the parts the admin CLI's
    ``Administration`` uses for the same actions, on the gateway's store."""

    audit: AuditLog
    dead_letters: DeadLetterStore
    tool_health: ToolHealthService
    sessions: SessionStore
    """Read only: the system sessions of service engines and their processes."""

    @classmethod
    def on(cls, store: Backend) -> Operations:
        return cls(AuditLog.on(store), store.port(DeadLetterStore),
                   ToolHealthService(store.port(ToolHealthStore)), store.port(SessionStore))


@dataclass(frozen=True)
class Administration:
    """The admin CLI's composition root: what an operator changes, through services (and the
    delivery log, which it only reads, the dead letters, which it lists and puts back, tool
    health, which it lists and resets, the system sessions, which it lists, and knowledge
    documents, which it adds, indexing them itself, lists and deletes, and the retention
    purge, which it shows and runs, and the export and import of the whole store; and the
    audit log, where each of its writes is recorded)."""

    store: Backend
    identity: IdentityService
    settings: SettingsService
    recipes: RecipeResolver
    recipe_admin: RecipeAdmin
    deliveries: DeliveryStore
    dead_letters: DeadLetterStore
    tool_health: ToolHealthService
    sessions: SessionStore
    """Read only: the system sessions of service engines and their processes."""
    documents: DocumentService
    """Knowledge documents; an add is indexed here, in the admin process, before it returns
    (``vancetope admin docs add``), so it needs no worker."""
    retention: RetentionService
    """The retention purge: ``vancetope admin purge [--dry-run]``."""
    transfer: TransferStore
    """Every record, out and in: ``vancetope admin export`` / ``import``."""
    audit: AuditLog
    """Where each write command is recorded, and ``vancetope admin audit list`` reads."""
    inspections: InspectorService
    """The inspector's turn records: ``vancetope admin inspect``."""
    webhooks: WebhookService
    """Webhook subscriptions and their delivery logs: ``vancetope admin webhook``."""
    schedules: ScheduleStore
    """Every user's schedules of a tenant: ``vancetope admin schedule``."""

    @classmethod
    def open(cls, config: Config) -> Administration:
        store = open_store(config.store_url)
        identity = IdentityService.on(store)
        # Pushes reach the users' clients where Redis is shared (the distributed shape).
        events = EventBus(redis_client(config), max_len=config.event_log_max,
                          ttl=config.event_log_ttl)
        settings = SettingsService(store.port(SettingStore), store.port(IdentityStore),
                                   quota_written=partial(release_holds, store.port(TimerStore)))
        indexer = DocumentIndexer.on(store, config.attachments_dir, events,
                                     Embeddings.from_config(config, settings))

        def index_now(job: dict[str, Any]) -> None:
            indexer.index(IndexJob.model_validate(job))

        return cls(store, identity, settings,
                   RecipeResolver(store.port(RecipeStore)),
                   # The admin CLI writes as the operator: the one who grants engine roles.
                   RecipeAdmin.on(store, config.max_definitions, engine=ENGINES.get,
                                  operator=True),
                   store.port(DeliveryStore), store.port(DeadLetterStore),
                   ToolHealthService(store.port(ToolHealthStore)), store.port(SessionStore),
                   DocumentService.on(store, config.attachments_dir, events, index_now),
                   RetentionService(store.port(RetentionStore), store.port(IdentityStore),
                                    settings),
                   store.port(TransferStore), AuditLog.on(store), InspectorService.on(store),
                   WebhookService.on(store, config), store.port(ScheduleStore))

    def close(self) -> None:
        self.store.close()


__all__ = ["Administration", "Backend", "Core", "Operations", "open_store", "redis_client"]
