"""The embedded shape's worker: a real Celery worker on threads inside ``vancetope serve``."""

from __future__ import annotations

import logging
import threading
import time

from celery import Celery
from celery.worker import WorkController

log = logging.getLogger(__name__)


class _Controller(WorkController):
    def __init__(self, *args: object, **kwargs: object) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: object) -> None:
        self.ready.set()


class EmbeddedWorker:
    """Consumes every queue with ``concurrency`` threads and plays beat: the app's
    ``beat_schedule``, each entry at its interval.

    The same tasks, acks and prefetch settings as a worker pod; only the
    transport (``memory://``) and the pool (threads) differ.
    """

    def __init__(self, app: Celery, *, concurrency: int) -> None:
        self._app = app
        self._stop = threading.Event()
        self._controller = _Controller(
            app=app, pool="threads", concurrency=concurrency, hostname="embedded@localhost",
            without_heartbeat=True, without_mingle=True, without_gossip=True,
            queues=list(app.conf.task_queues and [q.name for q in app.conf.task_queues]),
            loglevel="WARNING")
        self._threads = [
            threading.Thread(target=self._controller.start, name="vt-celery", daemon=True),
            threading.Thread(target=self._beat, name="vt-beat", daemon=True),
        ]

    def start(self, timeout: float = 30) -> None:
        for t in self._threads:
            t.start()
        if not self._controller.ready.wait(timeout):
            raise RuntimeError("the embedded Celery worker did not start; see the log above")

    def stop(self) -> None:
        self._stop.set()
        self._controller.stop(in_sighandler=False)
        for t in self._threads:
            t.join(timeout=10)

    def _beat(self) -> None:
        entries = [(e["task"], e["schedule"].total_seconds())
                   for e in self._app.conf.beat_schedule.values()]
        due = {task: time.monotonic() + every for task, every in entries}
        while not self._stop.wait(max(0.0, min(due.values()) - time.monotonic())):
            for task, every in entries:
                if due[task] <= time.monotonic():
                    due[task] = time.monotonic() + every
                    try:
                        self._app.send_task(task)
                    except Exception:
                        log.exception("embedded beat could not enqueue %s", task)
