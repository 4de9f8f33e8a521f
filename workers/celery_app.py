"""The Celery app factory for both deployment shapes."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from celery import Celery, bootsteps, signals
from kombu import Queue

from vancetope_brain import keys
from vancetope_brain.config import Config
from vancetope_brain.lanes import consumers
from vancetope_brain.lanes.waker import Enqueue
from vancetope_brain.observability import logs, metrics, tracing
from vancetope_brain.runtime import redis_client
from vancetope_brain.services.documents import EnqueueIndex
from vancetope_brain.services.jobs import EnqueueJob
from workers import broker
from workers.health import Heartbeat
from workers.parts import build_worker
from workers.tasks import (
    HOUSEKEEPING,
    INDEX_DOCUMENT,
    LANE_SHARD,
    LANE_TURN,
    SERVICE_JOB,
    SWEEP,
    WEBHOOKS,
)

if TYPE_CHECKING:
    from celery.worker import WorkController

    from vancetope_brain.engines.contexts import ModelFor
    from vancetope_brain.store import Backend
    from workers.parts import Worker

log = logging.getLogger(__name__)

MAINTENANCE_QUEUE = "maintenance"
DOCUMENTS_QUEUE = "documents"
"""Ingestion jobs: a PDF may take up to a minute, which the sweeper's queue never waits for."""


def lane_queue(shard: int) -> str:
    return f"lanes.{shard}"


def create_celery(config: Config, *, model_for: ModelFor | None = None,
                  store: Backend | None = None) -> Celery:
    """A configured app with the tasks registered. A gateway uses it only as a producer
    (``enqueue_on``); the worker's parts are built lazily, once per OS process, by the
    first caller of ``app.vancetope_worker()`` (after a prefork fork, in the child), on
    ``store`` when given (the embedded shape shares its gateway's).
    """
    app = Celery("vancetope", broker=config.broker_url)
    # Pool threads look tasks up through the default app (current_app is thread-local),
    # so the app of this OS process must be the default.
    app.set_default()
    transport_options: dict[str, object] = {}
    if config.broker_url.startswith("memory://"):
        # kombu's memory transport polls once a second by default.
        transport_options["polling_interval"] = 0.001
    else:
        # Correctness never waits for this: the sweeper re-wakes orphaned work.
        transport_options["visibility_timeout"] = 3600
        # kombu's own cap is 10 connections, enough where the consumer's loop sends every
        # ack; a gevent worker acks each task from its own greenlet, all at once under load
        # (past the cap redis-py raises, the ack is lost and the consumer reconnects).
        transport_options["max_connections"] = config.redis_max_connections
    # Survives a broker restart under load; a Redis URL keeps its scheme (Flower's broker
    # view reads it). A name, not the class, is what the connection's settings then hold:
    # workers send them in control replies (Flower's `stats`), as JSON.
    broker.register()
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_queues=[Queue(lane_queue(i)) for i in range(config.lane_shards)]
        + [Queue(MAINTENANCE_QUEUE), Queue(DOCUMENTS_QUEUE)],
        task_default_queue=MAINTENANCE_QUEUE,
        task_routes={SWEEP: {"queue": MAINTENANCE_QUEUE},
                     WEBHOOKS: {"queue": MAINTENANCE_QUEUE},
                     HOUSEKEEPING: {"queue": MAINTENANCE_QUEUE},
                     SERVICE_JOB: {"queue": MAINTENANCE_QUEUE},
                     INDEX_DOCUMENT: {"queue": DOCUMENTS_QUEUE}},
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # Flower switches task events on when it connects; off, they cost each turn ~0.3 ms.
        worker_send_task_events=False,
        task_send_sent_event=False,
        # Beat's schedule file lives in the data directory, never a shared /tmp.
        beat_scheduler="workers.health:Scheduler",
        beat_schedule_filename=str(config.data_dir / "celerybeat-schedule"),
        beat_max_loop_interval=consumers.HEARTBEAT_INTERVAL,
        beat_schedule={
            "housekeeping": {
                "task": HOUSEKEEPING,
                "schedule": timedelta(seconds=config.housekeeping_interval),
                "options": {"expires": config.housekeeping_interval},
            },
        },
    )
    holder = _WorkerHolder(config, enqueue_on(app), enqueue_job_on(app), enqueue_index_on(app),
                           model_for, store)
    app.vancetope_worker = holder.get  # type: ignore[attr-defined]
    app.vancetope_config = config  # type: ignore[attr-defined]
    app.steps["worker"].add(SweepSchedule)
    app.steps["worker"].add(MetricsServer)
    tracing.instrument_celery()
    app.steps["consumer"].add(Heartbeat)
    return app


@signals.setup_logging.connect
def _setup_logging(**_: Any) -> None:
    """A worker or beat logs as every Vancetope process does (``VANCETOPE_LOG_LEVEL``,
    ``VANCETOPE_LOG_FORMAT``), not as Celery's ``--loglevel`` would set it up."""
    config = Config.from_env()
    logs.configure(config.log_level, config.log_format)


class MetricsServer(bootsteps.StartStopStep):
    """A worker pod's ``/metrics`` on ``VANCETOPE_METRICS_PORT``, served from the main
    process for the whole pod (its prefork children's samples through
    ``PROMETHEUS_MULTIPROC_DIR``), so a pod is one scrape target whatever its pool."""

    def start(self, parent: WorkController) -> None:
        port = parent.app.vancetope_config.metrics_port
        if port is not None:
            pool = str(getattr(parent.pool_cls, "__module__", parent.pool_cls))
            metrics.serve_worker_metrics(port, forks=pool.endswith("prefork"))


class SweepSchedule(bootsteps.StartStopStep):
    """Every worker schedules the sweeper, so liveness does not rest on beat: at start
    (what a dead cluster left behind is found at once) and then every sweep interval, a
    ``vancetope.sweep`` task and a ``vancetope.webhooks`` one (due webhook deliveries) — at
    most one of each per interval across the cluster (the
    ``vt:sweep-slot`` key), in whichever worker's timer fires first. Runs in the worker's
    main process; the sweep itself runs as a task, in a pool slot."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, parent: WorkController, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._timer: Any = None

    def start(self, parent: WorkController) -> None:
        app, config = parent.app, parent.app.vancetope_config
        client = redis_client(config)
        every = config.sweep_interval

        def send(claim: bool) -> None:
            try:
                if not claim or client.set(keys.SWEEP_SLOT, 1, nx=True, px=int(every * 1000)):
                    app.send_task(SWEEP, expires=every)
                    app.send_task(WEBHOOKS, expires=every)
            except Exception as e:  # Redis or the broker is down: the next tick tries again
                log.warning("could not schedule the sweeper (%s); retrying in %ss", e, every)

        send(claim=False)
        self._timer = parent.timer.call_repeatedly(every, send, (True,))

    def stop(self, parent: WorkController) -> None:
        if self._timer is not None:
            self._timer.cancel()


def enqueue_job_on(app: Celery) -> EnqueueJob:
    """The Celery producer of service jobs (``ServiceJobs``), on the maintenance queue."""
    def enqueue_job(job: dict[str, Any]) -> None:
        app.send_task(SERVICE_JOB, args=[job], queue=MAINTENANCE_QUEUE)

    return enqueue_job


def enqueue_index_on(app: Celery) -> EnqueueIndex:
    """The Celery producer of document ingestion jobs (``DocumentService``), on the
    documents queue."""
    def enqueue_index(job: dict[str, Any]) -> None:
        app.send_task(INDEX_DOCUMENT, args=[job], queue=DOCUMENTS_QUEUE)

    return enqueue_index


def broker_ping(app: Celery) -> Callable[[], None]:
    """A check that raises when ``app``'s broker cannot be reached now (a gateway's
    ``/readyz``): it opens a connection of its own, as an enqueue would."""
    def ping() -> None:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0.1, timeout=2)

    return ping


def enqueue_on(app: Celery) -> Enqueue:
    """The Celery producer of lane tasks for ``Waker``: ``enqueue(shard)`` a shard task,
    ``enqueue(shard, (tenant, process), delay)`` the turn of one process."""
    def enqueue(shard: int, process: tuple[str, str] | None = None, delay: float = 0.0) -> None:
        if process is None:
            app.send_task(LANE_SHARD, args=[shard], queue=lane_queue(shard))
        else:
            app.send_task(LANE_TURN, args=list(process), queue=lane_queue(shard),
                          countdown=delay or None)

    return enqueue


class _WorkerHolder:
    """Builds the worker's parts on first use, once per OS process (after a prefork fork,
    in the child)."""

    def __init__(self, config: Config, enqueue: Enqueue, enqueue_job: EnqueueJob,
                 enqueue_index: EnqueueIndex, model_for: ModelFor | None,
                 store: Backend | None) -> None:
        self._config, self._enqueue, self._model_for = config, enqueue, model_for
        self._enqueue_job, self._enqueue_index = enqueue_job, enqueue_index
        self._store, self._pid = store, os.getpid()
        self._worker: Worker | None = None
        self._lock = threading.Lock()

    def get(self) -> Worker:
        with self._lock:
            if self._worker is None or self._pid != os.getpid():
                # A store opened before a fork is the parent's: open one of our own.
                shared = self._store if self._pid == os.getpid() else None
                self._worker = build_worker(self._config, self._enqueue, self._enqueue_job,
                                            self._enqueue_index, model_for=self._model_for,
                                            store=shared)
                self._pid = os.getpid()
            return self._worker
