"""Builders the document contract tests share: a document, its chunks, indexing it."""

from __future__ import annotations

import hashlib
from typing import Any

from vancetope_brain.models.knowledge import Chunk, DocumentFormat, KnowledgeDocument
from vancetope_brain.store import DocumentStore

ROOMY = {"max_project_documents": 100, "max_project_bytes": 10**9, "max_tenant_bytes": 10**9}
"""Caps nothing in these tests reaches."""


def document(name: str = "guide.md", content: str = "v1", *, tenant: str = "ten_1",
             project: str = "prj_1", size: int | None = None) -> KnowledgeDocument:
    """An unsaved document whose size and sha256 are those of ``content``."""
    data = content.encode()
    return KnowledgeDocument(tenant_id=tenant, project_id=project, name=name,
                             format=DocumentFormat.MARKDOWN, media_type="text/markdown",
                             size=len(data) if size is None else size,
                             sha256=hashlib.sha256(data).hexdigest(), added_by="usr_1")


def chunks(doc: KnowledgeDocument, *texts: str, **fields: Any) -> list[Chunk]:
    """Chunks 0, 1, … of ``doc``'s current version with these texts."""
    return [Chunk(tenant_id=doc.tenant_id, project_id=doc.project_id, document_id=doc.id,
                  document_version=doc.version, ordinal=ordinal, text=text, **fields)
            for ordinal, text in enumerate(texts)]


def indexed(store: DocumentStore, *texts: str, name: str = "guide.md",
            content: str | None = None, tenant: str = "ten_1",
            project: str = "prj_1") -> KnowledgeDocument:
    """Add a document and write ``texts`` as its chunks; the READY document."""
    doc = store.add_document(document(name, content or "\n".join(texts), tenant=tenant,
                                      project=project), **ROOMY)
    assert store.write_chunks(tenant, project, doc.id, doc.version, chunks(doc, *texts),
                              pages=None)
    ready = store.get_document(tenant, project, doc.id)
    assert ready is not None
    return ready
