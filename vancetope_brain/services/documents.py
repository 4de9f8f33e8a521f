"""A project's documents as a user-facing capability (issue 29): add, list, read, delete, and
the worker's ingestion job.

``DocumentService`` is the front door's (gateways, the admin CLI): ``add`` checks the name,
the size and the format from the head bytes (so an unsupported or plainly wrong file is
refused at once, with its stable code), stores the record through ``DocumentStore``
(the per-project and per-tenant caps are checked there, atomically), keeps the bytes
(``DocumentFiles``) and queues an ``IndexJob``. It never parses: that is a worker's.

``DocumentIndexer.index`` is the job's body on a worker: it marks the version INDEXING,
parses it within the bounds of ``knowledge.parsing.parse`` (a PDF in a bounded child
process) and writes its chunks, or marks it FAILED with the error's code. Every write is
fenced by the document's version, so a job for a version that was replaced or deleted writes
nothing, and a redelivered job of a version that is READY or FAILED does nothing.

**Vectors.** When the project has an embedding endpoint (``rag.embedding.profile``,
``llm/embeddings.py``), a job that wrote its chunks embeds them and stores their vectors
(``DocumentVectors.write_vectors``), then embeds up to ``BACKFILL_DOCUMENTS`` more of the
project's READY documents that have no vectors of the model (their chunks again from the
stored file): an endpoint that failed, a model that changed. Embedding fails the job never:
the document is READY and found lexically; the failure is a WARNING line and a count in
``vancetope_embedding_fallbacks_total`` (stage ``index``), and its vectors are filled by a
later job of the project (any document added or changed there).

Every change is pushed to the user who added the document as ``document-updated`` (or
``document-deleted``) in their user feed, which every connection of theirs follows, like the
Inbox's pushes. A push is a live overlay: one Redis failed to take is logged, never fails
the change.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from pydantic import Field

from vancetope_brain import keys
from vancetope_brain.errors import (
    DocumentTooLarge,
    EmbeddingFailed,
    InvalidInput,
    NotFound,
    RuntimeFailure,
    UnreadableDocument,
    UserError,
)
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.identity import Principal
from vancetope_brain.knowledge.formats import detect_format
from vancetope_brain.knowledge.parsing import parse
from vancetope_brain.llm.embeddings import Embeddings
from vancetope_brain.models.base import Wire
from vancetope_brain.models.knowledge import (
    MAX_DOCUMENT_BYTES,
    MAX_PROJECT_BYTES,
    MAX_PROJECT_DOCUMENTS,
    MAX_TENANT_BYTES,
    NAME_LIMIT,
    PARSE_SECONDS,
    Chunk,
    DocumentStatus,
    DocumentView,
    KnowledgeDocument,
)
from vancetope_brain.observability import metrics
from vancetope_brain.services.document_files import DocumentFiles
from vancetope_brain.store import Backend, DocumentStore, DocumentVectors, IdentityStore

log = logging.getLogger(__name__)

HEAD_BYTES = 8192
BACKFILL_DOCUMENTS = 2
"""Documents without vectors one indexing job embeds after its own (module docstring)."""
"""Bytes of a file ``add`` reads to decide its format."""
_BAD_NAME = re.compile(r"[\x00-\x1f\x7f/\\]")


class IndexJob(Wire):
    """One ingestion job: parse that version of the document and write its chunks."""

    tenant_id: str = Field(min_length=1, max_length=64)
    project_id: str = Field(min_length=1, max_length=64)
    document_id: str = Field(min_length=1, max_length=64)
    version: int = Field(ge=1)


EnqueueIndex = Callable[[dict[str, Any]], None]
STALL_SECONDS = 600
"""How long a PENDING or INDEXING document may go untouched before the housekeeping takes
its job for lost and queues it again (``DocumentIndexer.resume_stalled``)."""
GIVE_UP_SECONDS = 3_600
"""How long after a version was added the housekeeping stops queueing it and marks it FAILED."""
STALLED_BATCH = 100
"""Stalled documents one housekeeping run handles at most (the rest: the next run)."""
"""Puts an ingestion job (``IndexJob.dump()``) on the workers' queue."""


class DocumentPushes:
    """``document-updated`` / ``document-deleted`` into the user feed of whoever added the
    document (best effort: see the module docstring)."""

    def __init__(self, events: EventBus) -> None:
        self._events = events

    def updated(self, doc: KnowledgeDocument) -> None:
        self._push(doc, EventType.DOCUMENT_UPDATED)

    def deleted(self, doc: KnowledgeDocument) -> None:
        self._push(doc, EventType.DOCUMENT_DELETED)

    def _push(self, doc: KnowledgeDocument, kind: EventType) -> None:
        try:
            self._events.publish(keys.user_feed(doc.tenant_id, doc.added_by), "", kind,
                                 {"document": DocumentView.of(doc).dump()})
        except (redis.RedisError, RuntimeFailure) as e:
            log.warning("could not push %s of document %s (%s); clients see it on their next "
                        "document-list", kind.value, doc.id, e)


def checked_name(name: str) -> str:
    """A document's name (its file name, without folders), or ``InvalidInput``."""
    name = name.strip()
    if not name or name in (".", "..") or len(name) > NAME_LIMIT or _BAD_NAME.search(name):
        raise InvalidInput(f"a document's name is its file name: 1 to {NAME_LIMIT} characters, "
                           f"no folders ('/', '\\\\') and no control characters; got {name!r}")
    return name


class DocumentService:
    """The documents of the caller's tenant's projects. A project of another tenant looks
    exactly like a missing one (``not_found``); every call checks the project."""

    def __init__(self, *, documents: DocumentStore, identity: IdentityStore,
                 files: DocumentFiles, pushes: DocumentPushes, enqueue: EnqueueIndex,
                 max_project_documents: int = MAX_PROJECT_DOCUMENTS,
                 max_project_bytes: int = MAX_PROJECT_BYTES,
                 max_tenant_bytes: int = MAX_TENANT_BYTES) -> None:
        self._documents = documents
        self._identity = identity
        self._files = files
        self._pushes = pushes
        self._enqueue = enqueue
        self._caps = {"max_project_documents": max_project_documents,
                      "max_project_bytes": max_project_bytes,
                      "max_tenant_bytes": max_tenant_bytes}

    @classmethod
    def on(cls, store: Backend, attachments_dir: Path, events: EventBus,
           enqueue: EnqueueIndex) -> DocumentService:
        """The service over ``store``'s ports, keeping bytes under ``attachments_dir``."""
        return cls(documents=store.port(DocumentStore), identity=store.port(IdentityStore),
                   files=DocumentFiles(attachments_dir), pushes=DocumentPushes(events),
                   enqueue=enqueue)

    def add(self, who: Principal, project_id: str, name: str, data: bytes,
            media_type: str | None = None) -> tuple[KnowledgeDocument, bool]:
        """Add the file ``name`` to the project, or replace the document of that name; returns
        what is stored and whether it changed (False: the same bytes are READY already, and
        nothing was done). A change is PENDING until a worker indexes it.

        Refuses, storing nothing: ``invalid_input`` (the name), ``document_too_large``,
        ``unsupported_document`` / ``unreadable_document`` (from the first ``HEAD_BYTES``),
        ``project_knowledge_full`` / ``tenant_knowledge_full`` (the store's caps),
        ``not_found`` (the project). Should keeping the bytes or queueing the job fail, the
        new version is marked FAILED and the error raised."""
        self._identity.get_project(who.tenant_id, project_id)
        name = checked_name(name)
        if len(data) > MAX_DOCUMENT_BYTES:
            raise DocumentTooLarge(f"{name} is {len(data)} bytes; the limit for one file is "
                                   f"{MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB")
        if not data:
            raise UnreadableDocument(f"{name} is empty: there is nothing to search")
        fmt = detect_format(name, data[:HEAD_BYTES], media_type)
        media = (media_type or "").split(";")[0].strip().lower()[:127] or \
            "application/octet-stream"
        doc = KnowledgeDocument(tenant_id=who.tenant_id, project_id=project_id, name=name,
                                format=fmt, media_type=media, size=len(data),
                                sha256=hashlib.sha256(data).hexdigest(), added_by=who.user_id)
        stored = self._documents.add_document(doc, **self._caps)
        if stored.status is not DocumentStatus.PENDING:
            return stored, False  # the same bytes, READY: add_document changed nothing
        job = IndexJob(tenant_id=who.tenant_id, project_id=project_id, document_id=stored.id,
                       version=stored.version)
        try:
            self._files.put(who.tenant_id, stored.id, stored.version, data)
            # Pushed before the job is queued, so a worker's INDEXING always comes after it.
            self._pushes.updated(stored)
            self._enqueue(job.dump())
        except Exception as e:
            failed = stored.model_copy(update={
                "status": DocumentStatus.FAILED, "error_code": RuntimeFailure.code,
                "error": f"the upload could not be queued ({e}); add the file again"})
            self._documents.mark_document(who.tenant_id, project_id, stored.id, stored.version,
                                          failed.status, error_code=failed.error_code,
                                          error=failed.error)
            self._pushes.updated(failed)
            raise
        return stored, True

    def list(self, who: Principal, project_id: str) -> list[KnowledgeDocument]:
        """The project's documents by name."""
        self._identity.get_project(who.tenant_id, project_id)
        return self._documents.list_documents(who.tenant_id, project_id)

    def get(self, who: Principal, project_id: str, document_id: str) -> KnowledgeDocument:
        """One document of the project; ``not_found`` if there is none."""
        self._identity.get_project(who.tenant_id, project_id)
        doc = self._documents.get_document(who.tenant_id, project_id, document_id)
        if doc is None:
            raise NotFound(f"document {document_id} not found in project {project_id}")
        return doc

    def delete(self, who: Principal, project_id: str, document_id: str) -> KnowledgeDocument:
        """Delete the document, its chunks (no search finds them after) and its bytes; returns
        what was deleted. ``not_found`` if there is none."""
        doc = self.get(who, project_id, document_id)
        if not self._documents.delete_document(who.tenant_id, project_id, document_id):
            raise NotFound(f"document {document_id} not found in project {project_id}")
        self._files.remove(who.tenant_id, document_id)
        self._pushes.deleted(doc)
        return doc


class DocumentIndexer:
    """The worker's side: runs ``IndexJob``s (see the module docstring)."""

    def __init__(self, *, documents: DocumentStore, vectors: DocumentVectors,
                 files: DocumentFiles, pushes: DocumentPushes, seconds: float = PARSE_SECONDS,
                 embeddings: Embeddings | None = None) -> None:
        self._documents = documents
        self._vectors = vectors
        self._files = files
        self._pushes = pushes
        self._seconds = seconds
        self._embeddings = embeddings

    @classmethod
    def on(cls, store: Backend, attachments_dir: Path, events: EventBus,
           embeddings: Embeddings) -> DocumentIndexer:
        """The indexer over ``store``'s ports, reading bytes under ``attachments_dir``."""
        return cls(documents=store.port(DocumentStore), vectors=store.port(DocumentVectors),
                   files=DocumentFiles(attachments_dir), pushes=DocumentPushes(events),
                   embeddings=embeddings)

    def index(self, job: IndexJob) -> DocumentStatus | None:
        """Index the job's version; returns the status it left, or None when the job was
        moot (the document moved on, is gone, or this version is done already). Raises only
        ``RuntimeFailure`` (the store), for the task to retry; what is wrong with the file
        ends FAILED with its code."""
        t, p, d, v = job.tenant_id, job.project_id, job.document_id, job.version
        doc = self._documents.get_document(t, p, d)
        if doc is None or doc.version != v or \
                doc.status in (DocumentStatus.READY, DocumentStatus.FAILED):
            return None
        if not self._documents.mark_document(t, p, d, v, DocumentStatus.INDEXING):
            return None
        self._pushes.updated(doc.model_copy(update={"status": DocumentStatus.INDEXING}))
        try:
            parsed = parse(self._files.read(t, d, v), doc.format, name=doc.name,
                           seconds=self._seconds)
        except UserError as e:
            return self._fail(doc, e.code, str(e))
        except RuntimeFailure:
            raise
        except Exception as e:  # a parser's bug must not send the job round for ever
            log.exception("indexing %s (%s) failed", d, doc.name)
            return self._fail(doc, UnreadableDocument.code,
                              f"{doc.name} could not be read ({type(e).__name__})")
        chunks = [Chunk(tenant_id=t, project_id=p, document_id=d, document_version=v,
                        ordinal=i, text=passage.text, section=passage.section,
                        page=passage.page, line_start=passage.line_start,
                        line_end=passage.line_end)
                  for i, passage in enumerate(parsed.passages)]
        if not self._documents.write_chunks(t, p, d, v, chunks, pages=parsed.pages):
            return None
        self._files.prune(t, d, keep=v)
        self._push_current(t, p, d)
        self._add_vectors(job, [c.text for c in chunks])
        return DocumentStatus.READY

    def resume_stalled(self, now: datetime, enqueue: EnqueueIndex) -> int:
        """The housekeeping's: queue again the job of each document PENDING or INDEXING
        that nothing has touched for ``STALL_SECONDS`` (its job was lost: a gateway died
        before queueing it, the broker restarted without it, a worker died and its retries
        ran out), marking it PENDING; or, once ``GIVE_UP_SECONDS`` passed since its version
        was added, mark it FAILED (``runtime_failure``: add the file again). Returns how
        many it handled, at most ``STALLED_BATCH`` a run."""
        stalled = self._documents.stalled_documents(now - timedelta(seconds=STALL_SECONDS),
                                                    STALLED_BATCH)
        for doc in stalled:
            if now - doc.added_at > timedelta(seconds=GIVE_UP_SECONDS):
                self._fail(doc, RuntimeFailure.code,
                           f"{doc.name} was not indexed within {GIVE_UP_SECONDS // 60} "
                           f"minutes (are workers running?); add the file again")
            elif self._documents.mark_document(doc.tenant_id, doc.project_id, doc.id,
                                               doc.version, DocumentStatus.PENDING):
                log.warning("document %s (%s) version %s was %s untouched for %s s: its "
                            "ingestion job is queued again", doc.id, doc.name, doc.version,
                            doc.status.value, STALL_SECONDS)
                enqueue(IndexJob(tenant_id=doc.tenant_id, project_id=doc.project_id,
                                 document_id=doc.id, version=doc.version).dump())
        return len(stalled)

    def _add_vectors(self, job: IndexJob, texts: list[str]) -> None:
        """The vectors of the chunks just written (``texts``), then of up to
        ``BACKFILL_DOCUMENTS`` documents lacking them (module docstring)."""
        t, p = job.tenant_id, job.project_id
        if self._embeddings is None:
            return
        try:
            embedder = self._embeddings.for_project(t, p, query=False)
            if embedder is None:
                return
            if texts:
                self._vectors.write_vectors(t, p, job.document_id, job.version,
                                            embedder.model, embedder.embed(texts))
            for doc in self._vectors.without_vectors(t, p, embedder.model, BACKFILL_DOCUMENTS):
                try:
                    passages = parse(self._files.read(t, doc.id, doc.version), doc.format,
                                     name=doc.name, seconds=self._seconds).passages
                    self._vectors.write_vectors(t, p, doc.id, doc.version, embedder.model,
                                                embedder.embed([x.text for x in passages]))
                except (UserError, ValueError) as e:  # its bytes are gone, or read otherwise
                    log.warning("document %s keeps no vectors: %s", doc.id, e)
        except EmbeddingFailed as e:
            log.warning("document %s is found lexically only until its vectors are filled: "
                        "%s", job.document_id, e)
            metrics.EMBEDDING_FALLBACKS.labels(stage="index", code=e.code).inc()

    def _fail(self, doc: KnowledgeDocument, code: str, message: str) -> DocumentStatus | None:
        if not self._documents.mark_document(doc.tenant_id, doc.project_id, doc.id,
                                             doc.version, DocumentStatus.FAILED,
                                             error_code=code, error=message):
            return None
        log.info("document %s (%s) version %s FAILED: %s", doc.id, doc.name, doc.version,
                 message)
        self._files.prune(doc.tenant_id, doc.id, keep=doc.version)
        self._push_current(doc.tenant_id, doc.project_id, doc.id)
        return DocumentStatus.FAILED

    def _push_current(self, tenant_id: str, project_id: str, document_id: str) -> None:
        if (now := self._documents.get_document(tenant_id, project_id, document_id)) is not None:
            self._pushes.updated(now)
