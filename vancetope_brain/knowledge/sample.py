"""The sample document ``vancetope serve`` puts into the local user's new project, so that a
newcomer sees documents answer at once (issue 29, item 8): ``sample.md`` beside this module,
shipped with the package. It is an ordinary document of the project — listed, searched and
deleted like any other; it is seeded only when the project is created, so a deleted sample
does not come back.
"""

from __future__ import annotations

import hashlib
from importlib import resources

from vancetope_brain.knowledge.parsing import parse
from vancetope_brain.models.knowledge import (
    MAX_PROJECT_BYTES,
    MAX_PROJECT_DOCUMENTS,
    MAX_TENANT_BYTES,
    Chunk,
    DocumentFormat,
    DocumentStatus,
    KnowledgeDocument,
)
from vancetope_brain.store import Backend, DocumentStore

SAMPLE_NAME = "sample-your-documents.md"
"""The sample's name in the project."""


def sample_bytes() -> bytes:
    return resources.files(__package__).joinpath("sample.md").read_bytes()


def seed_sample(store: Backend, tenant_id: str, project_id: str,
                user_id: str) -> KnowledgeDocument:
    """Store the sample in the project, parsed and READY, and return it. Idempotent: when the
    project holds it unchanged (READY, same bytes), nothing is written. Raises what
    ``DocumentStore.add_document`` raises (a project at its caps)."""
    documents = store.port(DocumentStore)
    data = sample_bytes()
    stored = documents.add_document(
        KnowledgeDocument(tenant_id=tenant_id, project_id=project_id, name=SAMPLE_NAME,
                          format=DocumentFormat.MARKDOWN, media_type="text/markdown",
                          size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                          added_by=user_id),
        max_project_documents=MAX_PROJECT_DOCUMENTS, max_project_bytes=MAX_PROJECT_BYTES,
        max_tenant_bytes=MAX_TENANT_BYTES)
    if stored.status is DocumentStatus.READY:
        return stored
    parsed = parse(data, DocumentFormat.MARKDOWN, name=SAMPLE_NAME)
    chunks = [Chunk(tenant_id=tenant_id, project_id=project_id, document_id=stored.id,
                    document_version=stored.version, ordinal=ordinal, text=passage.text,
                    section=passage.section, page=passage.page,
                    line_start=passage.line_start, line_end=passage.line_end)
              for ordinal, passage in enumerate(parsed.passages)]
    documents.write_chunks(tenant_id, project_id, stored.id, stored.version, chunks,
                           pages=parsed.pages)
    return documents.get_document(tenant_id, project_id, stored.id) or stored
