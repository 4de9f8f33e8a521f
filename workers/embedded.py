"""The embedded shape's worker: a real Celery worker on threads inside ``vancetope serve``."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from celery import Celery
from celery.worker import WorkController, state
from kombu.transport.virtual import Channel

from vancetope_brain import keys
from vancetope_brain.errors import NotFound
from vancetope_brain.lanes.waker import ready_process
from vancetope_brain.models import utcnow
from vancetope_brain.store import LaneStore, SessionStore
from workers.celery_app import MAINTENANCE_QUEUE
from workers.tasks import LANE_SHARD, LANE_TURN

if TYPE_CHECKING:
    from workers.parts import Worker

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
        queues = [q.name for q in app.conf.task_queues]
        self._lane_queues = [name for name in queues if name != MAINTENANCE_QUEUE]
        self._controller = _Controller(
            app=app, pool="threads", concurrency=concurrency, hostname="embedded@localhost",
            without_heartbeat=True, without_mingle=True, without_gossip=True,
            queues=queues, loglevel="WARNING")
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

    def join(self, timeout: float = 10.0) -> None:
        """Return once the lanes are idle: no lane turn queued, received or running, and no
        process that would take a turn has input waiting in the store. Raise ``TimeoutError``
        after ``timeout`` seconds, naming what still moved.

        For tests, like dramatiq's ``StubBroker.join``. Celery keeps received tasks per OS
        process; only this app's lane turns count.
        """
        deadline = time.monotonic() + timeout
        with self._app.connection_for_read() as connection:
            while busy := self._busy(connection.default_channel):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the embedded lanes did not settle within {timeout}s: "
                                       + "; ".join(busy))
                time.sleep(0.005)

    def _busy(self, channel: Channel) -> list[str]:
        """What still moves, or nothing. The checks are one snapshot when no task was accepted
        meanwhile: only a running task wakes lanes, and a woken one waits in its shard's
        ready set until a task takes it."""
        accepted = state.all_total_count[0]
        worker = self._app.vancetope_worker()
        lane_tasks = {self._app.tasks[LANE_TURN], self._app.tasks[LANE_SHARD]}
        busy = []
        if running := sum(r.task in lane_tasks for r in tuple(state.requests.values())):
            busy.append(f"{running} lane turn task(s) received or running")
        if ready := self._ready(worker):
            busy.append(f"processes ready, not taken yet {ready}")
        if queued := sum(channel.queue_declare(name, passive=True).message_count
                         for name in self._lane_queues):
            busy.append(f"{queued} lane task(s) queued")
        lanes = worker.store.port(LaneStore)
        if waiting := lanes.stale_pending(utcnow() + timedelta(days=1)):
            busy.append(f"input waiting for (tenant, process) {waiting}")
        if unsettled := lanes.unsettled():
            busy.append(f"processes starting or running {unsettled}")
        if state.all_total_count[0] != accepted:
            busy.append("a task started meanwhile")
        return busy

    def _ready(self, worker: Worker) -> list[str]:
        """The processes of this store waiting in a shard's ready set (one Redis may serve
        several stores, as the in-memory one of a test run does)."""
        sessions = worker.store.port(SessionStore)
        found = []
        for key in worker.redis.scan_iter(match=keys.ready("*")):
            members: list[bytes] = worker.redis.zrange(key, 0, -1)  # type: ignore[assignment]
            for member in members:
                tenant_id, process_id = ready_process(member)
                try:
                    sessions.get_process(tenant_id, process_id)
                except NotFound:
                    continue
                found.append(process_id)
        return found

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
