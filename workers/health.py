"""Health of workers and beat for their platform.

- ``Heartbeat`` (a consumer bootstep of every worker): while the worker's consumer is
  connected, a thread records the queues it consumes in Redis every
  ``HEARTBEAT_INTERVAL`` (``vancetope_brain.lanes.consumers``; a gateway's ``/readyz``
  reads it) and touches ``VANCETOPE_HEALTH_FILE`` if set (a liveness probe:
  ``vancetope health FILE``). Stopping the consumer (warm shutdown, a lost broker
  connection) removes the entry at once.
- ``Scheduler`` (beat's): keeps its schedule file under ``VANCETOPE_DATA_DIR`` and touches
  ``VANCETOPE_HEALTH_FILE`` on every tick (at least every ``HEARTBEAT_INTERVAL``).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from celery import bootsteps
from celery.beat import PersistentScheduler

from vancetope_brain.config import PRIVATE_DIR
from vancetope_brain.lanes import consumers
from vancetope_brain.runtime import redis_client

log = logging.getLogger(__name__)


def touch(path: Path | None) -> None:
    if path is not None:
        path.touch()


class Heartbeat(bootsteps.StartStopStep):
    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self, parent: Any) -> None:
        config = parent.app.vancetope_config
        client, name = redis_client(config), parent.hostname
        queues = sorted(parent.app.amqp.queues.consume_from)
        stop = self._stop = threading.Event()

        def run() -> None:
            failing = False
            while True:
                try:
                    consumers.beat(client, name, queues)
                    touch(config.health_file)
                    failing = False
                except Exception as e:  # Redis is down: /readyz says so; try again
                    if not failing:
                        log.warning("worker heartbeat failed (%s); retrying every %ss", e,
                                    consumers.HEARTBEAT_INTERVAL)
                    failing = True
                if stop.wait(consumers.HEARTBEAT_INTERVAL):
                    break
            try:
                consumers.forget(client, name)
            except Exception as e:  # its entry goes stale on its own
                log.warning("could not remove the worker heartbeat (%s)", e)

        self._thread = threading.Thread(target=run, name="vt-heartbeat", daemon=True)
        self._thread.start()

    def stop(self, parent: Any) -> None:
        if self._stop is not None and self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
        self._stop = self._thread = None

    shutdown = terminate = stop


class Scheduler(PersistentScheduler):
    """Beat's persistent scheduler, its file in the data directory, touching the health
    file on every tick."""

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        config = app.vancetope_config
        self._health_file: Path | None = config.health_file
        config.data_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        super().__init__(app, *args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        touch(self._health_file)
        return float(super().tick(*args, **kwargs))

