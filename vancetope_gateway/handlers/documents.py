"""Knowledge document frames: list, read and delete a project's documents (issue 29). Upload is the REST route
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


class DocumentRef(Wire):
    """Names a document of a project of the caller's tenant (``document-get``,
    ``document-delete``)."""

    project_id: str = ProjectId
    document_id: str = Field(min_length=1, max_length=64)


class DocumentsListed(Wire):
    """Reply to ``document-list``."""

    documents: list[DocumentView]


@frame("document-list")
def document_list(conn: Context, data: DocumentList) -> DocumentsListed:
    docs = conn.gateway.documents.list(conn.who, data.project_id)
    return DocumentsListed(documents=[DocumentView.of(doc) for doc in docs])


class DocumentDetail(Wire):
    """Reply to ``document-get``: the document as it stands (its status, chunk count, error)."""

    document: DocumentView


class DocumentDeleted(Wire):
    """Reply to ``document-delete``: the document as it was. Its chunks are no longer found by
    any search, its bytes are gone."""

    document: DocumentView


@frame("document-get")
def document_get(conn: Context, data: DocumentRef) -> DocumentDetail:
    doc = conn.gateway.documents.get(conn.who, data.project_id, data.document_id)
    return DocumentDetail(document=DocumentView.of(doc))


@frame("document-delete")
def document_delete(conn: Context, data: DocumentRef) -> DocumentDeleted:
    doc = conn.gateway.documents.delete(conn.who, data.project_id, data.document_id)
    return DocumentDeleted(document=DocumentView.of(doc))
