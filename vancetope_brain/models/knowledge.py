"""Knowledge: a project's documents and the chunks they are searched by (arthur-engine §2.2,
§3.8; think-engines §4).

A user adds a ``KnowledgeDocument`` to a project; a worker parses it into ``Passage``s (the
text of one section of one page, with where it came from) and stores them as ``Chunk``s; a
search returns ``SearchHit``s, each with the ``Citation`` a reply shows. A document's name is
unique in its project: adding a file under a name already there replaces the document (a new
``version``; the old chunks go when the new ones are in).

The caps below are the defaults of the documented limits (docs/configuration.md, "Knowledge").
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field

from vancetope_brain.models.base import Document, Wire, new_id, utcnow

MAX_DOCUMENT_BYTES = 20 * 1024 * 1024
"""The largest file accepted (``document_too_large``)."""
MAX_PROJECT_DOCUMENTS = 500
"""Documents per project (``project_knowledge_full``)."""
MAX_PROJECT_BYTES = 500 * 1024 * 1024
"""Bytes of documents per project (``project_knowledge_full``)."""
MAX_TENANT_BYTES = 2 * 1024 * 1024 * 1024
"""Bytes of documents per tenant, all projects (``tenant_knowledge_full``)."""
MAX_CHUNKS_PER_DOCUMENT = 20_000
"""Chunks one document may make; a file that would make more is refused
(``unreadable_document``)."""
MAX_PDF_PAGES = 5_000
"""Pages of a PDF read; a longer one is refused (``unreadable_document``)."""
PARSE_SECONDS = 60.0
"""Wall time one file's parsing may take (a hostile PDF is stopped there)."""
PARSE_MEMORY_BYTES = 1024 * 1024 * 1024
"""Address space the parsing of one file may take."""
NAME_LIMIT = 255
"""Characters of a document's name (its file name)."""


class DocumentFormat(StrEnum):
    """How a document's bytes are read."""

    TEXT = "text"
    MARKDOWN = "markdown"
    HTML = "html"
    PDF = "pdf"
    CODE = "code"


class DocumentStatus(StrEnum):
    """PENDING: stored, waiting for a worker. INDEXING: a worker is parsing it. READY: its
    chunks are searchable. FAILED: it could not be read (``error_code`` says why); it stays
    listed until deleted or added again."""

    PENDING = "PENDING"
    INDEXING = "INDEXING"
    READY = "READY"
    FAILED = "FAILED"


class KnowledgeDocument(Document):
    """One document of a project. ``version`` grows each time the file is added again;
    chunks are written for one version, so a worker still indexing an older one writes
    nothing."""

    id: str = Field(default_factory=lambda: new_id("doc"))
    tenant_id: str
    project_id: str
    name: str = Field(min_length=1, max_length=NAME_LIMIT)
    format: DocumentFormat
    media_type: str
    size: int = Field(ge=0)
    sha256: str
    version: int = 1
    status: DocumentStatus = DocumentStatus.PENDING
    chunk_count: int = 0
    pages: int | None = None
    error_code: str | None = None
    error: str | None = None
    added_by: str
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    added_at: datetime = Field(default_factory=utcnow)
    """When this ``version`` was added: how long its indexing has taken so far."""


class DocumentView(Wire):
    """A document as its users see it (frames, the upload's answer, ``document-updated``
    pushes): everything but the tenant and the schema version."""

    id: str
    project_id: str
    name: str
    format: DocumentFormat
    media_type: str
    size: int
    sha256: str
    version: int
    status: DocumentStatus
    chunk_count: int
    pages: int | None = None
    error_code: str | None = None
    error: str | None = None
    added_by: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, doc: KnowledgeDocument) -> DocumentView:
        return cls.model_validate(doc.model_dump(exclude={"tenant_id", "schema_version",
                                                          "added_at"}))


class Passage(Wire):
    """A piece of a document's text as a parser yields it, before it is stored: the heading
    path of its section (``"Install › Linux"``, empty before the first heading), the page
    (PDF, 1-based) and the lines (text formats, 1-based, inclusive)."""

    text: str
    section: str = ""
    page: int | None = None
    line_start: int | None = None
    line_end: int | None = None


class Chunk(Document):
    """A stored passage: ``ordinal`` is its place in the document (0-based)."""

    tenant_id: str
    project_id: str
    document_id: str
    document_version: int
    ordinal: int
    text: str
    section: str = ""
    page: int | None = None
    line_start: int | None = None
    line_end: int | None = None

    @property
    def id(self) -> str:
        """Stable for a document version: ``{document_id}:{version}:{ordinal}``."""
        return f"{self.document_id}:{self.document_version}:{self.ordinal}"


class Citation(Wire):
    """Where a hit came from, as a reply shows it: the document, its section and the page or
    lines."""

    document_id: str
    document_name: str
    section: str = ""
    page: int | None = None
    line_start: int | None = None
    line_end: int | None = None


class SearchHit(Wire):
    """One chunk a search found. ``score`` is normalised to 0..1 on every path, so one
    ``rag.minScore`` means the same on lexical, vector and fused results; ``via`` says which
    found it."""

    chunk: Chunk
    citation: Citation
    score: float = Field(ge=0.0, le=1.0)
    via: Literal["lexical", "vector", "hybrid"]
