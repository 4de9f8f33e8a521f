"""The Celery app factory for both deployment shapes."""

from __future__ import annotations

import logging
import os
import threading
from datetime import timedelta

from celery import Celery
from kombu import Queue

from vancetope_brain.config import Config
from vancetope_brain.engines.contexts import ModelFor
from vancetope_brain.runtime import Brain
from workers.tasks import HOUSEKEEPING, LANE_TURN, SWEEP

log = logging.getLogger(__name__)

MAINTENANCE_QUEUE = "maintenance"


def lane_queue(shard: int) -> str:
    return f"lanes.{shard}"


def create_celery(config: Config, *, model_for: ModelFor | None = None,
                  brain: Brain | None = None) -> Celery:
    """A configured app with the tasks registered. The brain is built lazily in the
    process that first needs it (after a prefork fork, in the child), unless given.
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
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_queues=[Queue(lane_queue(i)) for i in range(config.lane_shards)]
        + [Queue(MAINTENANCE_QUEUE)],
        task_default_queue=MAINTENANCE_QUEUE,
        task_routes={SWEEP: {"queue": MAINTENANCE_QUEUE},
                     HOUSEKEEPING: {"queue": MAINTENANCE_QUEUE}},
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # Flower switches task events on when it connects; off, they cost each turn ~0.3 ms.
        worker_send_task_events=False,
        task_send_sent_event=False,
        beat_schedule={
            "sweep-orphaned-pending": {
                "task": SWEEP,
                "schedule": timedelta(seconds=config.sweep_interval),
                "options": {"expires": config.sweep_interval},
            },
            "housekeeping": {
                "task": HOUSEKEEPING,
                "schedule": timedelta(seconds=config.housekeeping_interval),
                "options": {"expires": config.housekeeping_interval},
            },
        },
    )
    holder = _BrainHolder(app, config, model_for, brain)
    app.vancetope_brain = holder.get  # type: ignore[attr-defined]
    return app


class _BrainHolder:
    """Builds the brain on first use, once per OS process."""

    def __init__(self, app: Celery, config: Config, model_for: ModelFor | None,
                 brain: Brain | None) -> None:
        self._app, self._config, self._model_for = app, config, model_for
        self._brain, self._pid = brain, os.getpid() if brain else None
        self._lock = threading.Lock()

    def get(self) -> Brain:
        with self._lock:
            if self._brain is None or self._pid != os.getpid():
                self._brain = Brain.build(self._config, self.enqueue, model_for=self._model_for)
                self._pid = os.getpid()
            return self._brain

    def enqueue(self, tenant_id: str, process_id: str, shard: int) -> None:
        self._app.send_task(LANE_TURN, args=[tenant_id, process_id], queue=lane_queue(shard))
