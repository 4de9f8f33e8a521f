"""Assembling the brain for one OS process from its configuration.

The gateway and the workers build the same ``Brain``; only the connections
differ between the embedded and the distributed shape (ARCHITECTURE §1).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import fakeredis
import redis

from vancetope_brain import keys
from vancetope_brain.config import Config
from vancetope_brain.engines import ENGINES, EngineRegistry
from vancetope_brain.engines.contexts import ContextFactory, ModelFor
from vancetope_brain.engines.spawning import ProcessFactory
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.identity import IdentityService
from vancetope_brain.inbox.attachments import AttachmentStore, load_secret
from vancetope_brain.inbox.service import InboxService
from vancetope_brain.lanes import LaneRunner, LeaseKeeper, Waker
from vancetope_brain.lanes.sweeper import sweep
from vancetope_brain.lanes.waker import Enqueue
from vancetope_brain.llm.factory import build_chat_model
from vancetope_brain.models import ThinkProcess, utcnow
from vancetope_brain.notifications import NotificationDispatcher, build_dispatcher
from vancetope_brain.recipes.resolver import RecipeResolver
from vancetope_brain.sessions import SessionService
from vancetope_brain.sessions.lifecycle import SessionLifecycle
from vancetope_brain.sessions.presence import Presence
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import Store, open_store
from vancetope_brain.tools import ToolSource
from vancetope_brain.tools.client import ClientToolBridge
from vancetope_brain.tools.mcp import McpRegistry

log = logging.getLogger(__name__)

CLIENT_TOOL_TIMEOUT = 30.0
"""Seconds a process waits for the connected client to run one of its tools."""

_embedded_server: fakeredis.FakeServer | None = None
_embedded_guard = threading.Lock()


def redis_client(config: Config) -> redis.Redis:
    """Real Redis when configured; else the process-wide in-memory server (fakeredis)."""
    global _embedded_server
    if config.redis_url:
        return redis.Redis.from_url(config.redis_url, health_check_interval=30)
    with _embedded_guard:
        if _embedded_server is None:
            _embedded_server = fakeredis.FakeServer()
    return fakeredis.FakeRedis(server=_embedded_server)


@dataclass
class Brain:
    config: Config
    store: Store
    redis: redis.Redis
    events: EventBus
    waker: Waker
    runner: LaneRunner
    sessions: SessionService
    lifecycle: SessionLifecycle
    identity: IdentityService
    client_tools: ClientToolBridge
    mcp: McpRegistry
    recipes: RecipeResolver
    presence: Presence
    inbox: InboxService
    notifications: NotificationDispatcher
    attachments: AttachmentStore

    @classmethod
    def build(cls, config: Config, enqueue: Enqueue, *, model_for: ModelFor | None = None,
              engines: EngineRegistry = ENGINES, worker_name: str | None = None) -> Brain:
        client = redis_client(config)
        store = open_store(config.store_url)
        events = EventBus(client, max_len=config.event_log_max, ttl=config.event_log_ttl)
        waker = Waker(client, enqueue, shards=config.lane_shards, flag_ttl=2 * config.lease_ttl)
        if model_for is None:
            model = build_chat_model(config)
            model_for = lambda process: model  # noqa: E731 - one model for every process for now
        client_tools = ClientToolBridge(client, events)
        mcp = McpRegistry.from_file(config.mcp_servers_file)

        def tool_sources(process: ThinkProcess) -> list[ToolSource]:
            return [client_tools.source(process.session_id, process.id,
                                        timeout=CLIENT_TOOL_TIMEOUT), mcp]

        recipes = RecipeResolver(store)
        processes = ProcessFactory(recipes, engines)
        presence = Presence(client, ttl=config.presence_ttl)
        settings = SettingsService(store)
        notifications = build_dispatcher(config, store, settings, presence, events)
        attachments = AttachmentStore(config.attachments_dir, load_secret(config),
                                      config.attachment_url_ttl, config.base_url())

        def publish(tenant_id: str, user_id: str, event: str, item: dict[str, Any]) -> None:
            events.publish(keys.user_feed(tenant_id, user_id), "", EventType(event),
                           {"item": item})

        inbox = InboxService(store, settings, notifications, publish, waker.wake, attachments,
                             config.base_url())
        contexts = ContextFactory(store, events, engines, processes, model_for, tool_sources,
                                  inbox)
        runner = LaneRunner(store=store, events=events,
                            leases=LeaseKeeper(client, ttl=config.lease_ttl), waker=waker,
                            engines=engines, contexts=contexts, worker_name=worker_name)
        sessions = SessionService(store, waker, processes)
        return cls(config, store, client, events, waker, runner, sessions,
                   SessionLifecycle(store, sessions, presence), IdentityService(store),
                   client_tools, mcp, recipes, presence, inbox, notifications, attachments)

    def sweep(self) -> int:
        """The beat job: re-wake orphaned work, then apply session policies that are due."""
        return sweep(self.store, self.redis, self.waker, age=self.config.sweep_age) + \
            self.lifecycle.sweep()

    def housekeeping(self) -> int:
        """The slower beat job: finish inbox answers a crash cut short (their processes are
        then woken by the sweeper), send e-mail batches that are due, archive old items."""
        return self.store.redeliver_inbox_messages() + \
            self.notifications.flush(utcnow()) + self.inbox.auto_archive()

    def close(self) -> None:
        self.mcp.close()
        self.store.close()
