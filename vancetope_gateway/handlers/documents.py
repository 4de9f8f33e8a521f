"""Knowledge document frames: list a project's documents (issue 29). Upload is the REST route
``POST /projects/<project>/documents`` (``vancetope_gateway/uploads.py``)."""

from __future__ import annotations

from pydantic import Field

from vancetope_brain.models.base import Wire
from vancetope_brain.models.knowledge import DocumentView
from vancetope_gateway.handlers.declare import Context, frame

ProjectId = Field(min_length=1, max_length=64)


class DocumentList(Wire):
    """The documents of one project of the caller's tenant, by name."""

    project_id: str = ProjectId


class DocumentsListed(Wire):
    """Reply to ``document-list``."""

    documents: list[DocumentView]


@frame("document-list")
def document_list(conn: Context, data: DocumentList) -> DocumentsListed:
    docs = conn.gateway.documents.list(conn.who, data.project_id)
    return DocumentsListed(documents=[DocumentView.of(doc) for doc in docs])
