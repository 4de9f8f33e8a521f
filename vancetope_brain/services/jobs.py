"""The service job queue with coalescing (think-engines §7b "Spawn by the system").

``submit`` claims the job's subject in Redis (``SET NX`` of ``vt:service-job:…``) and, if
it won the claim, puts the job on the queue (the worker's Celery task
``vancetope.service_job``); ``run``, the task's body, starts the job's process in the
service's system session and leaves the process id in the claim. While the claim names
a process that is not CLOSED (or the job is still queued), a job for the same subject
folds into it: one diagnosis per tool at a time, however many turns hit the failure at
once. Once that process is CLOSED, the next job replaces the claim atomically and runs;
for agrajag, not while its last verdict on the tool holds (``on_ambiguous``).
The claim expires after ``JOB_TTL`` seconds whatever happens, so a job lost with its
broker message blocks its subject for at most that long.

A job's process id follows from the job's ``token`` (drawn when the job is made, carried
by every delivery), so a job redelivered after its worker died between creating the
process and recording it in the claim finds that process: one diagnosis, not two.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

import redis
from pydantic import Field

from vancetope_brain import keys
from vancetope_brain.engines.spawning import ProcessFactory
from vancetope_brain.errors import Conflict, NotFound, UserError
from vancetope_brain.models import ProcessStatus, ThinkProcess, utcnow
from vancetope_brain.models.base import Wire
from vancetope_brain.models.recipe import Name, SystemSessionSpec
from vancetope_brain.models.tool_health import HealthSource
from vancetope_brain.models.wake import ProcessWaker
from vancetope_brain.services.system_sessions import SYSTEM_USER, SystemSessions
from vancetope_brain.store import SessionStore, ToolHealthStore
from vancetope_brain.tools.health import AmbiguousToolError

log = logging.getLogger(__name__)

JOB_TTL = 600
"""Seconds a service job's claim lives at most (a queued job, then its running process)."""
QUEUED = "queued"
"""The claim's value between ``submit`` and ``run``."""
AGRAJAG = "agrajag"
"""The tool-health diagnosis service (its recipe and engine)."""
ERROR_LIMIT = 2000
"""Characters of a tool error a diagnosis job carries."""

# KEYS: the claim. ARGV: the value expected, the new value ('' deletes), the TTL.
_SWAP = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1])
else redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) end
return 1
"""

EnqueueJob = Callable[[dict[str, Any]], None]
"""Puts a job (``ServiceJob.dump()``) on the service queue."""


class ServiceJob(Wire):
    """One job for a service: start a process of the recipe ``service`` in the system
    session of (tenant, project, service), for the coalescing ``subject``, on behalf of the
    originating user and session (think-engines §7b "User Context Threading")."""

    service: Name
    tenant_id: str = Field(min_length=1, max_length=64)
    project_id: str = Field(min_length=1, max_length=64)
    subject: str = Field(min_length=1, max_length=200)
    goal: str = Field(default="", max_length=4000)
    params: dict[str, Any] = Field(default_factory=dict)
    originating_user_id: str | None = None
    originating_session_id: str | None = None
    token: str = Field(default_factory=lambda: secrets.token_hex(8), pattern=r"^[0-9a-f]{16}$")
    """Drawn when the job is made; every delivery of the job carries it."""

    @property
    def process_id(self) -> str:
        """The id of the job's process: one per job, however often it is delivered."""
        return f"proc_{self.token}"


class ServiceJobs:
    def __init__(self, *, client: redis.Redis, enqueue: EnqueueJob, sessions: SystemSessions,
                 store: SessionStore, factory: ProcessFactory, waker: ProcessWaker,
                 health: ToolHealthStore, ttl: int = JOB_TTL) -> None:
        self._redis = client
        self._enqueue = enqueue
        self._sessions = sessions
        self._store = store
        self._factory = factory
        self._waker = waker
        self._health = health
        self._ttl = ttl
        self._swap = client.register_script(_SWAP)

    def submit(self, job: ServiceJob) -> bool:
        """Queue ``job`` unless a job for its subject is queued or running; True when queued.
        Raises what the broker or Redis raise (the claim is then given back)."""
        key = _claim(job)
        for _ in range(2):  # the claim may expire between SET NX and GET: claim again
            if self._redis.set(key, QUEUED, nx=True, ex=self._ttl):
                break
            held = self._redis.get(key)
            if held is None:
                continue
            holder = held.decode() if isinstance(held, bytes) else str(held)
            if holder == QUEUED or not self._closed(job.tenant_id, holder) \
                    or not self._swap(keys=[key], args=[holder, QUEUED, self._ttl]):
                log.info("service %s: a job for %r is %s; this one folds into it",
                         job.service, job.subject, "queued" if holder == QUEUED else
                         f"running ({holder})")
                return False
            break
        else:
            return False
        try:
            self._enqueue(job.dump())
        except BaseException:
            self._swap(keys=[key], args=[QUEUED, "", self._ttl])
            raise
        return True

    def run(self, job: ServiceJob) -> ThinkProcess | None:
        """Start the job's process in its system session and wake it; None when the job ran
        already (a broker message delivered twice). The claim then names the process.

        Idempotent: the process id follows from the job's ``token`` (``process_id``), so a
        job redelivered after its worker died between creating the process and recording it
        in the claim finds that process instead of starting a second diagnosis. A refused
        job (``UserError``) gives its claim back; any other failure keeps it for the retry."""
        key = _claim(job)
        held = self._redis.get(key)
        if held is not None and (held.decode() if isinstance(held, bytes) else held) != QUEUED:
            log.info("service %s: the job for %r ran already", job.service, job.subject)
            return None
        try:
            process = self._made(job) or self._make(job)
        except UserError:
            self._swap(keys=[key], args=[QUEUED, "", self._ttl])
            raise
        self._redis.set(key, process.id, xx=True, ex=self._ttl)
        self._waker.wake(job.tenant_id, process.id)
        return process

    def _made(self, job: ServiceJob) -> ThinkProcess | None:
        """The job's process, if an earlier delivery of the job created it."""
        try:
            found = self._store.get_process(job.tenant_id, job.process_id)
        except NotFound:
            return None
        log.info("service %s: the job for %r made %s already; resuming it", job.service,
                 job.subject, found.id)
        return found

    def _make(self, job: ServiceJob) -> ThinkProcess:
        recipe = self._factory.resolver.resolve(job.tenant_id, job.project_id,
                                                recipe=job.service)
        session = self._sessions.open_for(job.tenant_id, job.project_id, job.service,
                                          recipe.system_session or SystemSessionSpec())
        process = self._factory.build(
            tenant_id=job.tenant_id, project_id=job.project_id, session_id=session.id,
            user_id=SYSTEM_USER, process_id=job.process_id,
            siblings=self._store.list_processes(job.tenant_id, session.id, open_only=True),
            recipe=job.service, name=f"{job.service} {job.subject}"[:200], goal=job.goal,
            params=job.params, service=True, originating_user_id=job.originating_user_id,
            originating_session_id=job.originating_session_id)
        try:
            self._store.create_process(process)
        except Conflict:  # a concurrent delivery of the same job created it first
            return self._store.get_process(job.tenant_id, job.process_id)
        return process

    def on_ambiguous(self, failure: AmbiguousToolError) -> None:
        """The checker's hook: a diagnosis job for the tool (agrajag), unless agrajag's last
        verdict on it still holds (its ``nextProbeAt`` is ahead: the failure was diagnosed
        already). Never raises: a job that cannot be queued is logged, and the turn goes on."""
        try:
            if self._verdict_holds(failure):
                log.info("agrajag's verdict on %s still holds; no new diagnosis",
                         failure.tool or failure.server)
                return
        except Exception:
            log.exception("could not read the tool health of %s", failure.tool or failure.server)
            return
        job = ServiceJob(
            service=AGRAJAG, tenant_id=failure.tenant_id, project_id=failure.project_id,
            subject=failure.tool or failure.server,
            goal=f"Diagnose the failure of {failure.tool or 'the MCP server'} "
                 f"({failure.step}) on MCP server {failure.server}",
            params={"server": failure.server, "tool": failure.tool, "step": failure.step,
                    "error": failure.error[:ERROR_LIMIT]},
            originating_user_id=failure.user_id, originating_session_id=failure.session_id)
        try:
            self.submit(job)
        except Exception:
            log.exception("could not queue the diagnosis of %s (MCP server %s)",
                          failure.tool, failure.server)

    def _verdict_holds(self, failure: AmbiguousToolError) -> bool:
        known = self._health.get_tool_health(failure.tenant_id, failure.project_id,
                                             failure.server, failure.tool)
        return known is not None and known.source is HealthSource.AGRAJAG and \
            known.next_probe_at is not None and known.next_probe_at > utcnow()

    def _closed(self, tenant_id: str, process_id: str) -> bool:
        try:
            return self._store.get_process(tenant_id, process_id).status is ProcessStatus.CLOSED
        except NotFound:
            return True


def _claim(job: ServiceJob) -> str:
    return keys.service_job(job.tenant_id, job.project_id, job.service, job.subject)
