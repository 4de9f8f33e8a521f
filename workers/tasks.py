"""Thin Celery tasks: decode, call the brain, map errors.

Shared tasks, so every app made by ``create_celery`` gets its own bound copy;
``self.app`` is that app and carries its worker's parts.
"""

from __future__ import annotations

import logging

import redis
from celery import Task, shared_task

from vancetope_brain.errors import RuntimeFailure, UserError
from vancetope_brain.services import IndexJob, ServiceJob

log = logging.getLogger(__name__)

LANE_SHARD = "vancetope.lane_shard"
LANE_TURN = "vancetope.lane_turn"
SWEEP = "vancetope.sweep"
HOUSEKEEPING = "vancetope.housekeeping"
SERVICE_JOB = "vancetope.service_job"
INDEX_DOCUMENT = "vancetope.index_document"
WEBHOOKS = "vancetope.webhooks"


@shared_task(name=LANE_SHARD, bind=True, acks_late=True, max_retries=5)
def lane_shard(self: Task, shard: int) -> list[str]:
    """The turns of a shard's ready processes (``LaneRunner.drain``); returns their
    outcomes."""
    try:
        return [outcome.value for outcome in self.app.vancetope_worker().runner.drain(shard)]
    except (RuntimeFailure, redis.RedisError) as e:
        # Redis failed between turns: what still waits in the ready set is this task's
        # again once it retries (and if the broker cannot take the retry either, the
        # sweeper finds the lanes afterwards).
        log.warning("lane shard %s failed (%s); retrying", shard, e)
        raise _retry(self, e) from e


@shared_task(name=LANE_TURN, bind=True, acks_late=True, max_retries=5)
def lane_turn(self: Task, tenant_id: str, process_id: str) -> str:
    worker = self.app.vancetope_worker()
    try:
        # The turn runs here: a wait of the process in its shard's ready set is moot.
        worker.waker.clear(tenant_id, process_id)
        return worker.runner.run(tenant_id, process_id).value
    except (RuntimeFailure, redis.RedisError) as e:
        # A store or Redis hiccup: the messages are still pending; try again soon (and if
        # the broker cannot take the retry either, the sweeper finds the lane afterwards).
        log.warning("lane turn of %s failed (%s); retrying", process_id, e)
        raise _retry(self, e) from e


def _retry(task: Task, error: Exception) -> Exception:
    """The retry of a task that the store or Redis failed under: after 1, 2, 4 … at most
    30 s, ``max_retries`` times (docs/operations.md)."""
    return task.retry(exc=error, countdown=min(2 ** task.request.retries, 30))


@shared_task(name=SWEEP, bind=True)
def sweep(self: Task) -> int:
    return self.app.vancetope_worker().sweep()


@shared_task(name=WEBHOOKS, bind=True)
def webhooks(self: Task) -> int:
    """Send due webhook deliveries (``WebhookDispatcher.deliver_due``); a worker that dies
    in it leaves its claimed delivery due again when the claim runs out."""
    return self.app.vancetope_worker().deliver_webhooks()


@shared_task(name=HOUSEKEEPING, bind=True)
def housekeeping(self: Task) -> int:
    return self.app.vancetope_worker().housekeeping()


@shared_task(name=SERVICE_JOB, bind=True, acks_late=True, max_retries=5)
def service_job(self: Task, job: dict[str, object]) -> str | None:
    """Start a service process (``ServiceJobs.run``); a store or Redis hiccup retries, a
    refused job (e.g. the system session holds as many open processes as it may) is logged
    and dropped (its claim was given back: the next failure submits it again)."""
    try:
        started = self.app.vancetope_worker().services.run(ServiceJob.model_validate(job))
    except UserError as e:
        log.warning("service job %s of %s refused: %s", job.get("subject"), job.get("service"),
                    e)
        return None
    except (RuntimeFailure, redis.RedisError) as e:
        log.warning("service job %s failed (%s); retrying", job.get("subject"), e)
        raise _retry(self, e) from e
    return started.id if started else None


@shared_task(name=INDEX_DOCUMENT, bind=True, acks_late=True, max_retries=5)
def index_document(self: Task, job: dict[str, object]) -> str | None:
    """Parse a document version and write its chunks (``DocumentIndexer.index``); returns
    the status it left (None: the job was moot). A store or Redis hiccup retries; a bad file
    ends FAILED, never retried."""
    try:
        status = self.app.vancetope_worker().indexer.index(IndexJob.model_validate(job))
    except (RuntimeFailure, redis.RedisError) as e:
        log.warning("indexing document %s failed (%s); retrying", job.get("documentId"), e)
        raise _retry(self, e) from e
    return status.value if status else None
