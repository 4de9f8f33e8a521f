"""Prometheus metrics (prometheus-client). docs/operations.md "Metrics" lists each one.

- **Where**: the gateway answers ``GET /metrics`` (``vancetope serve`` and gunicorn alike);
  a worker pod serves them on ``VANCETOPE_METRICS_PORT`` from its main process
  (``serve_worker_metrics``), one port per pod whatever its pool.
- **Forking servers**: gunicorn and Celery's prefork pool run the code in child
  processes. With ``PROMETHEUS_MULTIPROC_DIR`` set (prometheus-client's own variable, read
  when it is first imported; the Procfile sets a fresh directory per start) every process
  writes its samples there and any process of the pod answers for all of them. Without
  it each process counts alone: right for ``vancetope serve`` and a solo or threads pool.
- **Labels** never carry a tenant, user, session or process id: one scrape serves all
  tenants, and per-id series would grow without bound. Every label has a small closed set
  of values (outcomes, lifecycle calls, statuses, channels) or one the operator configures
  (server-side and MCP tool names); client-side tools, whose names a client declares, all
  count as ``client``; model names (recipes and settings may name them) are capped at
  ``MAX_MODEL_LABELS`` per process, the rest count as ``other``. The one exception is
  ``vancetope_llm_tokens_total``, which the issue asks for by tenant: its ``tenant`` label
  takes at most ``MAX_TENANT_LABELS`` tenant ids per process, the rest count as ``other``
  (the store's usage rows, ``UsageStore``, are the exact per-tenant figures).
- **Cluster gauges** (queue depth, oldest pending message, open Inbox items) are read
  at scrape time from Redis and the store by ``ClusterCollector``, which only the gateway
  mounts: every gateway reports the same cluster-wide value (aggregate with ``max``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import redis
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vancetope_brain import keys
from vancetope_brain.models import utcnow
from vancetope_brain.store import LaneStore, UserInboxStore

if TYPE_CHECKING:
    from vancetope_brain.llm import LlmResponse
    from vancetope_brain.models.usage import UsageRow
    from vancetope_brain.store import Backend

log = logging.getLogger(__name__)

disable_created_metrics()  # a ``*_created`` series per counter tells an operator nothing

_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

TURNS = Counter("vancetope_turns", "Lane-turn tasks by outcome (committed, busy, nothing, "
                "held, fenced, gone; abandoned: the store or Redis failed under it).",
                ["outcome"])
TURN_SECONDS = Histogram("vancetope_turn_duration_seconds", "Duration of lane turns that "
                         "ran an engine call or stood in for one, by lifecycle call.",
                         ["lifecycle"], buckets=_SECONDS)
ENGINE_FAILURES = Counter("vancetope_engine_failures", "Turns whose engine raised.")
LEASE_TAKEOVERS = Counter("vancetope_lease_takeovers", "Turns that took over a lane whose "
                          "last turn died or froze past its lease (clients get "
                          "turn-restarted).")
FENCED_COMMITS = Counter("vancetope_fenced_commits", "Turns that lost their lease and "
                         "wrote nothing.")
WEBHOOK_ATTEMPTS = Counter("vancetope_webhook_attempts", "Webhook delivery attempts by "
                           "result (ok; retry: failed, another follows; dead: the last "
                           "failed).", ["result"])
DEAD_LETTERS = Counter("vancetope_dead_letters", "Messages set aside after "
                       "VANCETOPE_MAX_ATTEMPTS turns that never completed.")
LLM_SECONDS = Histogram("vancetope_llm_request_duration_seconds", "LLM requests (a replay "
                        "from the turn journal is not one), by model and result.",
                        ["model", "result"], buckets=_SECONDS)
LLM_TOKENS = Counter("vancetope_llm_tokens", "Tokens of the completions of committed turns "
                     "(reported by the endpoint, else estimated), by tenant, model and "
                     "direction (in, out).", ["tenant", "model", "direction"])
TOOL_CALLS = Counter("vancetope_tool_calls", "Tool calls by tool (client-side tools: "
                     "`client`) and result (success, error, timeout).", ["tool", "result"])
OPEN_SOCKETS = Gauge("vancetope_open_websockets", "WebSocket connections open on this "
                     "gateway.", multiprocess_mode="livesum")
EVENTS_PUBLISHED = Counter("vancetope_events_published", "Stream events published, by "
                           "type.", ["type"])
EVENTS_DROPPED = Counter("vancetope_events_dropped", "Live events a client did not get in "
                         "stream: slow-client (dropped with 1013, it resumes), gap (an "
                         "events-gap told it to reload).", ["reason"])
TOOL_HEALTH_CHANGES = Counter("vancetope_tool_health_changes", "Changes of an MCP server's "
                              "or tool's health, by server (operator-configured names), new "
                              "state, cause and source (checker, agrajag, operator).",
                              ["server", "state", "cause", "source"])
RETRIEVAL_FAILURES = Counter("vancetope_retrieval_failures", "Knowledge searches whose "
                             "path failed, by stage (lexical: the store's search; vector: "
                             "the store's vector search or the embedding settings).",
                             ["stage"])
SUMMARY_FAILURES = Counter("vancetope_summary_failures", "Chat summaries that failed (the "
                           "model's error or empty answer); the turn truncated its history "
                           "instead.")

EMBEDDING_FALLBACKS = Counter("vancetope_embedding_fallbacks", "Embeddings that failed, so "
                              "the work went on lexical only, by stage (query: a search; "
                              "index: a document's chunks) and code (embedding_failed, "
                              "embedding_invalid).", ["stage", "code"])
NOTIFICATIONS = Counter("vancetope_notifications", "Inbox-item deliveries, by channel and "
                        "status (SENT, FAILED, SKIPPED, QUEUED).", ["channel", "status"])


MAX_MODEL_LABELS = 50
"""Distinct ``model`` label values one process reports; later names count as ``other``
(recipes and tenant settings may name models, so the set is not the operator's alone)."""
_models: set[str] = set()
_models_lock = threading.Lock()


MAX_TENANT_LABELS = 100
"""Distinct ``tenant`` label values of ``vancetope_llm_tokens_total`` one process reports;
later tenants count as ``other``."""
_tenants: set[str] = set()


def _model_label(model: str) -> str:
    with _models_lock:
        if model in _models or len(_models) < MAX_MODEL_LABELS:
            _models.add(model)
            return model
    return "other"


def _tenant_label(tenant_id: str) -> str:
    with _models_lock:
        if tenant_id in _tenants or len(_tenants) < MAX_TENANT_LABELS:
            _tenants.add(tenant_id)
            return tenant_id
    return "other"


def tokens_committed(tenant_id: str, rows: Sequence[UsageRow]) -> None:
    """Count the tokens a committed turn added to its usage rows."""
    if not rows:
        return
    tenant = _tenant_label(tenant_id)
    for row in rows:
        model = _model_label(row.key.model)
        LLM_TOKENS.labels(tenant, model, "in").inc(row.tokens_in)
        LLM_TOKENS.labels(tenant, model, "out").inc(row.tokens_out)


@contextlib.contextmanager
def llm_request(model: str) -> Iterator[Callable[[LlmResponse], LlmResponse]]:
    """Times the LLM request in the block (result ``error`` unless the yielded function is
    handed its response; its tokens count when its turn commits, ``tokens_committed``)."""
    started, result, model = time.monotonic(), "error", _model_label(model)

    def finished(response: LlmResponse) -> LlmResponse:
        nonlocal result
        result = "success"
        return response

    try:
        yield finished
    finally:
        LLM_SECONDS.labels(model, result).observe(time.monotonic() - started)


@functools.cache
def event_published(type: str) -> Counter:
    """``EVENTS_PUBLISHED`` of one event type, looked up once per process: ``labels`` was
    a seventh of publishing a batch of tokens under the LLM-shaped load (its values are
    the few event types)."""
    return EVENTS_PUBLISHED.labels(type)


def tool_called(name: str, transport: str, status: str) -> None:
    TOOL_CALLS.labels("client" if transport == "client" else name, status).inc()


def multiprocess_dir() -> str | None:
    """The multiprocess directory in force (``PROMETHEUS_MULTIPROC_DIR``), if any."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def registry(*collectors: Collector) -> CollectorRegistry:
    """A registry for one scrape: this process's metrics (or, in multiprocess mode, those
    of every process writing to the directory) plus ``collectors``."""
    found = CollectorRegistry()
    if multiprocess_dir():
        multiprocess.MultiProcessCollector(found)  # type: ignore[no-untyped-call]
    else:
        found.register(_Process())
    for collector in collectors:
        found.register(collector)
    return found


def exposition(*collectors: Collector) -> tuple[bytes, str]:
    """The body and content type of a ``/metrics`` answer."""
    return generate_latest(registry(*collectors)), CONTENT_TYPE_LATEST


def serve_worker_metrics(port: int, *, forks: bool) -> int:
    """Serve this pod's metrics on ``port`` (0: any free port) from the calling process, in
    a thread; returns the port. ``forks``: the pool runs tasks in child processes, whose
    samples reach this process only through ``PROMETHEUS_MULTIPROC_DIR``."""
    if forks and not multiprocess_dir():
        log.error("VANCETOPE_METRICS_PORT is set but PROMETHEUS_MULTIPROC_DIR is not: this "
                  "pool runs turns in child processes, whose metrics this port cannot see. "
                  "Set PROMETHEUS_MULTIPROC_DIR to an empty directory (as the Procfile does)")
    server, _ = start_http_server(port, registry=registry())
    bound = int(server.server_address[1])
    log.info("metrics on http://0.0.0.0:%d/metrics", bound)
    return bound


def forget_process(pid: int) -> None:
    """In multiprocess mode, drop the live gauges of a process that ended (gunicorn's
    ``child_exit``); its counters stay counted."""
    if multiprocess_dir():
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


class _Process(Collector):
    """The default registry's metrics (ours and the process/platform collectors)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


class ClusterCollector(Collector):
    """Cluster-wide gauges read at scrape time, per lane shard: Celery queue depth (the Redis
    broker's list lengths) and the processes ready to run (the shard's ready set); the age
    of the oldest message waiting in a lane that may run, and PENDING Inbox items by
    criticality. A failing read is logged and its gauge left out of that scrape (the
    others still answer). ``queues[i]`` is the queue of shard ``i``."""

    def __init__(self, *, broker: redis.Redis | None, queues: Sequence[str],
                 lanes_redis: redis.Redis, lanes: LaneStore, items: UserInboxStore) -> None:
        self._broker, self._queues, self._lanes_redis = broker, list(queues), lanes_redis
        self._lanes, self._items = lanes, items

    @classmethod
    def on(cls, store: Backend, broker_url: str, queues: Sequence[str],
           lanes_redis: redis.Redis) -> ClusterCollector:
        """The collector of a deployment: its store, its lanes' Redis, and the broker if it
        is Redis."""
        broker = redis.Redis.from_url(broker_url) \
            if broker_url.startswith(("redis://", "rediss://", "unix://")) else None
        return cls(broker=broker, queues=queues, lanes_redis=lanes_redis,
                   lanes=store.port(LaneStore), items=store.port(UserInboxStore))

    def collect(self) -> Iterator[Metric]:
        for read in (self._depth, self._ready, self._oldest, self._open_items):
            try:
                yield read()
            except Exception:
                log.warning("metrics: reading %s failed", read.__name__.strip("_"),
                            exc_info=True)

    def _depth(self) -> Metric:
        depth = GaugeMetricFamily("vancetope_lane_queue_depth", "Lane tasks waiting in "
                                  "each lane queue of the broker (Redis only; a delayed "
                                  "task waits in a worker, not here; one shard task stands "
                                  "for every process waiting in its shard's ready set).",
                                  labels=["queue"])
        if self._broker is not None:
            with self._broker.pipeline(transaction=False) as pipe:
                for queue in self._queues:
                    for key in _priority_keys(queue):
                        pipe.llen(key)
                lengths = pipe.execute()
            per = len(_priority_keys(""))
            for i, queue in enumerate(self._queues):
                depth.add_metric([queue], sum(lengths[i * per:(i + 1) * per]))
        return depth

    def _ready(self) -> Metric:
        ready = GaugeMetricFamily("vancetope_lanes_ready", "Processes woken and waiting for "
                                  "a turn in each lane shard's ready set (a process whose "
                                  "turn runs is out of it).", labels=["queue"])
        with self._lanes_redis.pipeline(transaction=False) as pipe:
            for shard in range(len(self._queues)):
                pipe.zcard(keys.ready(shard))
            sizes = pipe.execute()
        for queue, size in zip(self._queues, sizes, strict=True):
            ready.add_metric([queue], size)
        return ready

    def _oldest(self) -> Metric:
        age = 0.0
        now = utcnow()
        waiting = self._lanes.stale_pending(now, limit=1)  # the lane waiting longest first
        if waiting:
            first = self._lanes.pending_messages(*waiting[0], limit=1)
            if first:
                age = max(0.0, (now - first[0].created_at).total_seconds())
        return GaugeMetricFamily("vancetope_oldest_pending_message_age_seconds", "Age of the "
                                 "oldest undrained message of a lane that may run (paused "
                                 "and suspended lanes hold theirs on purpose); 0 when none.",
                                 value=age)

    def _open_items(self) -> Metric:
        items = GaugeMetricFamily("vancetope_inbox_items_open", "PENDING Inbox items by "
                                  "criticality, all tenants.", labels=["criticality"])
        for criticality, count in sorted(self._items.open_items_by_criticality().items()):
            items.add_metric([criticality], count)
        return items


def _priority_keys(queue: str) -> list[str]:
    """The Redis lists kombu keeps a queue in: one per priority step (0, 3, 6, 9)."""
    return [queue] + [f"{queue}\x06\x16{step}" for step in (3, 6, 9)]
