"""The worker's composition root: what lane turns and beat jobs of one OS process need.

The lane runner with its leases and contexts, tools (client-side and MCP), the
knowledge search (``Retriever``), memory (``MemoryAccess``), the document indexer, the webhook
sender and the LLM — built only in worker
processes (after a prefork fork, in the child).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from vancetope_brain.config import Config
from vancetope_brain.engines import ENGINES, EngineRegistry
from vancetope_brain.engines.chat_cache import ChatCache
from vancetope_brain.engines.contexts import ContextFactory, ModelFor
from vancetope_brain.engines.memory_api import MemoryAccess
from vancetope_brain.events import EventOutbox
from vancetope_brain.events.interrupts import InterruptListener, Interrupts
from vancetope_brain.events.tokens import TokenCoalescer
from vancetope_brain.knowledge.retrieval import Retriever
from vancetope_brain.lanes import LaneRunner, LeaseKeeper
from vancetope_brain.lanes.quota import QuotaService
from vancetope_brain.lanes.sweeper import fire_timers, sweep
from vancetope_brain.lanes.waker import Enqueue
from vancetope_brain.llm.embeddings import Embeddings
from vancetope_brain.llm.profiles import ModelRouter, load_profiles, secrets_of
from vancetope_brain.models import ThinkProcess, utcnow
from vancetope_brain.runtime import Core
from vancetope_brain.services import (
    DocumentIndexer,
    RetentionService,
    ServiceJobs,
    SystemSessions,
)
from vancetope_brain.services.documents import EnqueueIndex
from vancetope_brain.services.jobs import EnqueueJob
from vancetope_brain.store import (
    Backend,
    DocumentStore,
    DocumentVectors,
    EventOutboxStore,
    IdentityStore,
    InspectorStore,
    JournalStore,
    LaneStore,
    MemoryStore,
    RetentionStore,
    SessionStore,
    TimerStore,
    ToolHealthStore,
    UserInboxStore,
    WebhookStore,
)
from vancetope_brain.tools import ToolSource
from vancetope_brain.tools.client import ClientToolBridge
from vancetope_brain.tools.health import HealthPolicy, ToolHealthService
from vancetope_brain.tools.mcp import McpRegistry
from vancetope_brain.webhooks import WebhookDispatcher, WebhookSender

CLIENT_TOOL_TIMEOUT = 30.0
"""Seconds a process waits for the connected client to run one of its tools."""


@dataclass(frozen=True)
class Worker(Core):
    runner: LaneRunner
    outbox: EventOutbox
    mcp: McpRegistry
    services: ServiceJobs
    system_sessions: SystemSessions
    retention: RetentionService
    """The retention purge (``retention.*`` settings), a bounded batch per housekeeping run."""
    tool_health: ToolHealthService
    indexer: DocumentIndexer
    """Runs the ingestion jobs of knowledge documents (``vancetope.index_document``)."""
    enqueue_index: EnqueueIndex
    """Queues an ingestion job again (the housekeeping's, for a stalled document)."""
    leases: LeaseKeeper
    """The runner's; its heartbeat thread stops with ``close``."""
    tokens: TokenCoalescer | None
    """The contexts' token coalescer (None: tokens are published one by one)."""
    interrupts: InterruptListener
    """Cuts the model calls of turns their users stop (one thread; stops with ``close``)."""
    webhooks: WebhookDispatcher
    """Sends due webhook deliveries (``vancetope.webhooks``, sent with every sweep)."""

    def sweep(self) -> int:
        """The sweep job (every worker schedules it, ``SweepSchedule``): re-wake orphaned
        work, publish events dead workers committed but left unpublished, deliver due
        timers, apply session policies that are due, then fire the schedules' due ticks (and
        start runs a dead firer claimed but left unstarted)."""
        lanes = self.store.port(LaneStore)
        age = self.config.sweep_age
        return sweep(lanes, self.redis, self.waker, age=age,
                     interval=self.config.sweep_interval) + \
            self.outbox.sweep(utcnow() - timedelta(seconds=age)) + \
            fire_timers(self.store.port(TimerStore), self.waker) + self.lifecycle.sweep() + \
            self.schedules.fire()

    def deliver_webhooks(self) -> int:
        """The webhooks job: send due deliveries for about one sweep interval (at least a
        second); what is left waits for the next job."""
        return self.webhooks.deliver_due(budget=max(self.config.sweep_interval, 1.0))

    def housekeeping(self) -> int:
        """The slower beat job: finish inbox answers a crash cut short (their processes are
        then woken by the sweeper), send e-mail batches that are due, archive old items,
        probe MCP servers and tools whose health record is due (never in a user's turn),
        delete service processes closed longer than ``VANCETOPE_SERVICE_RETENTION``, purge
        what the tenants' retention lets go (a bounded batch: ``services.retention``), queue
        again the ingestion of documents whose job was lost."""
        now = utcnow()
        done = self.store.port(UserInboxStore).redeliver_inbox_messages() + \
            self.notifications.flush(now) + self.inbox.auto_archive() + \
            self.tool_health.probe_due(self.mcp) + self.system_sessions.purge(now) + \
            self.indexer.resume_stalled(now, self.enqueue_index)
        purged = self.retention.purge(now)
        return done + purged["sessions"] + purged["deliveries"] + purged["audit"] + \
            purged["inspections"]

    def close(self) -> None:
        """Stop the threads these parts started (lease heartbeat, token flush, interrupt
        listener, MCP) and close the store."""
        self.leases.close()
        self.interrupts.close()
        if self.tokens is not None:
            self.tokens.close()
        self.mcp.close()
        super().close()


def build_worker(config: Config, enqueue: Enqueue, enqueue_job: EnqueueJob,
                 enqueue_index: EnqueueIndex, *,
                 model_for: ModelFor | None = None,
                 store: Backend | None = None, engines: EngineRegistry = ENGINES,
                 worker_name: str | None = None) -> Worker:
    """``enqueue_job`` queues service jobs (``ServiceJobs``): each MCP failure the health
    checker cannot classify becomes an agrajag job (``ServiceJobs.on_ambiguous``)."""
    core = Core.parts(config, enqueue, store=store, engines=engines)
    store, events = core["store"], core["events"]
    profiles = load_profiles(config)
    if model_for is None:  # per process: its recipe, the settings cascade, the profiles
        model_for = ModelRouter(profiles, core["settings"])
    embeddings = Embeddings.from_config(config, core["settings"])
    client_tools = ClientToolBridge(core["redis"], events)
    mcp = McpRegistry.from_file(config.mcp_servers_file)
    policy = HealthPolicy(config.tool_probe_backoff, config.tool_probe_backoff_max,
                          config.show_down_tools)
    tool_health = ToolHealthService(store.port(ToolHealthStore), policy)

    def tool_sources(process: ThinkProcess) -> list[ToolSource]:
        # A service process's session has no client; the user's (tool_probe_as_user) may.
        session = process.originating_session_id or process.session_id
        return [client_tools.source(session, process.id, timeout=CLIENT_TOOL_TIMEOUT),
                tool_health.source(mcp, process)]

    lanes, processes = store.port(LaneStore), store.port(SessionStore)
    system_sessions = SystemSessions(store=processes, lifecycle=core["lifecycle"],
                                     presence=core["presence"], client=core["redis"],
                                     retention=config.service_retention)
    services = ServiceJobs(client=core["redis"], enqueue=enqueue_job, sessions=system_sessions,
                           store=processes, factory=core["process_factory"],
                           waker=core["waker"], health=store.port(ToolHealthStore))
    tool_health.on_ambiguous = services.on_ambiguous
    outbox = EventOutbox(store.port(EventOutboxStore), events,
                         on_publish=core["webhook_events"].on_outbox)
    sender = WebhookSender(allow_private=config.webhook_allow_private,
                           timeout=config.webhook_timeout, total=config.webhook_timeout + 5)
    tokens = TokenCoalescer(events, interval=config.token_flush) if config.token_flush else None
    leases = LeaseKeeper(core["redis"], ttl=config.lease_ttl)
    interrupts = Interrupts(core["redis"])
    contexts = ContextFactory(lanes=lanes, processes_store=processes,
                              journal=store.port(JournalStore), settings=core["settings"],
                              events=events, engines=engines,
                              processes=core["process_factory"], model_for=model_for,
                              tool_sources=tool_sources, inbox=core["inbox"],
                              tool_health=tool_health.write,
                              tokens=tokens,
                              chat=ChatCache(lanes, config.chat_cache_lines),
                              knowledge=Retriever(store.port(DocumentStore),
                                                  store.port(DocumentVectors), embeddings),
                              memory=MemoryAccess(store.port(MemoryStore),
                                                  store.port(IdentityStore)),
                              interrupts=interrupts,
                              secrets=secrets_of(profiles))
    runner = LaneRunner(lanes=lanes, processes=processes, items=store.port(UserInboxStore),
                        events=events, outbox=outbox,
                        leases=leases,
                        waker=core["waker"], engines=engines, contexts=contexts,
                        max_attempts=config.max_attempts,
                        max_engine_failures=config.max_engine_failures,
                        linger=config.shard_linger, worker_name=worker_name,
                        interrupts=interrupts,
                        quota=QuotaService.on(store, core["settings"]),
                        inspections=store.port(InspectorStore),
                        on_ended=core["schedules"].run_ended)
    indexer = DocumentIndexer.on(store, config.attachments_dir, events, embeddings)
    return Worker(**core, runner=runner, outbox=outbox, mcp=mcp, services=services,
                  system_sessions=system_sessions, tool_health=tool_health, indexer=indexer,
                  retention=RetentionService(store.port(RetentionStore), store.port(IdentityStore),
                                             core["settings"]),
                  enqueue_index=enqueue_index, leases=leases, tokens=tokens,
                  webhooks=WebhookDispatcher(store.port(WebhookStore), sender,
                                             schedule=config.webhook_retry_schedule),
                  interrupts=interrupts.listen())
