"""Services that span the packages below them: service engines' system sessions and job queue
(think-engines §7b), and a project's knowledge documents (``documents``, issue 29).

A service process is spawned by the system, never by a user or an engine: a job
(``ServiceJob``) is submitted with a coalescing claim, queued (a Celery task in the
worker's composition root) and run into a new process of the service's recipe in the
hidden system session of its (tenant, project, service).

``retention`` deletes what a tenant's retention settings let go (``RetentionService``, run by
the housekeeping beat and ``vancetope admin purge``).

``transfer`` moves a whole store into one file and from it into another store (``vancetope
admin export`` / ``import``, over ``store.transfer.TransferStore``).

``schedules`` fires a project's schedules (``ScheduleService``: cron ticks run as AUTONOMOUS
sessions of the schedule's owner, once per tick; issue 33).

``usage`` reads a user's LLM token usage and prices it (``UsageService``).

``inspector`` reads the inspector's turn records a page at a time (``InspectorService``).

``audit`` appends every operator write to the audit log and pages it (``AuditLog``).

``documents`` adds documents, queues their ingestion and runs it on a worker
(``DocumentService``, ``DocumentIndexer``), keeping their bytes in ``DocumentFiles``.

Rule: this package builds processes only through ``ProcessFactory`` (``service=True``, or as
a schedule's owner) and
moves sessions only through ``SessionLifecycle``; it imports no Flask and no Celery (the
queue is a callable it is given).
"""

from vancetope_brain.services.audit import AuditLog
from vancetope_brain.services.document_files import DocumentFiles
from vancetope_brain.services.documents import (
    DocumentIndexer,
    DocumentPushes,
    DocumentService,
    IndexJob,
)
from vancetope_brain.services.jobs import ServiceJob, ServiceJobs
from vancetope_brain.services.retention import RetentionService
from vancetope_brain.services.system_sessions import SYSTEM_USER, SystemSessions, system_sessions

__all__ = ["SYSTEM_USER", "AuditLog", "DocumentFiles", "DocumentIndexer", "DocumentPushes",
           "DocumentService", "IndexJob", "RetentionService", "ServiceJob", "ServiceJobs",
           "SystemSessions", "system_sessions"]
