"""The REST route that reads a body: ``POST /projects/<project>/documents``, a multipart upload
of one knowledge document (docs/protocol.md, "Documents").

Every other route reads no body (``app.add_body_limit`` refuses one); this one takes up to the
per-file cap plus ``MULTIPART_OVERHEAD``. A larger ``Content-Length`` is refused before the
token is checked or a byte is read, with 413 ``document_too_large``; a chunked body is cut off
at the same size by werkzeug. The file is then checked and stored by
``DocumentService.add``, and parsed later by a worker: the answer is 202 with the PENDING
document (200 with it as stored when the same bytes were READY already).

Each upload queues a job on the workers' one ``documents`` queue, so a user may make at most
``UPLOADS_PER_MINUTE`` (counted in Redis per user and clock minute, across gateways); past
it the upload is refused with 429 ``rate_limited`` before its body is read.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, current_app, jsonify, request

from vancetope_brain import keys
from vancetope_brain.errors import DocumentTooLarge, InvalidInput, RateLimited
from vancetope_brain.identity import Principal
from vancetope_brain.models.knowledge import MAX_DOCUMENT_BYTES, DocumentView
from vancetope_gateway.auth import authenticate
from vancetope_gateway.parts import Gateway

UPLOADS_PER_MINUTE = 30
"""Document uploads one user may make in a minute."""
MULTIPART_OVERHEAD = 64 * 1024
"""Bytes an upload's body may hold beyond the file: the multipart boundaries, headers and the
``name`` field."""
UPLOAD_ENDPOINT = "documents.document_upload"
UPLOAD_LIMIT = MAX_DOCUMENT_BYTES + MULTIPART_OVERHEAD

documents = Blueprint("documents", __name__)


@documents.post("/projects/<project_id>/documents")
def document_upload(project_id: str) -> tuple[Response, int]:
    """Form fields: ``file`` (the document; its file name names it, and its content type
    helps to tell its format) and optionally ``name`` (instead of the file name). Adding a
    name that the project holds replaces that document."""
    who = authenticate()
    gateway: Gateway = current_app.extensions["vancetope"]
    _count_upload(gateway, who)
    request.max_content_length = UPLOAD_LIMIT
    upload = request.files.get("file")
    if upload is None:
        raise InvalidInput("send the document as the multipart/form-data field 'file'")
    data = upload.stream.read(MAX_DOCUMENT_BYTES + 1)
    name = request.form.get("name") or (upload.filename or "").replace("\\", "/")\
        .rsplit("/", 1)[-1]
    doc, changed = gateway.documents.add(who, project_id, name, data, upload.mimetype)
    return jsonify(document=DocumentView.of(doc).dump(), changed=changed), \
        202 if changed else 200


def _count_upload(gateway: Gateway, who: Principal) -> None:
    """Count the upload in the user's minute; ``RateLimited`` past ``UPLOADS_PER_MINUTE``."""
    key = keys.uploads(who.tenant_id, who.user_id)
    pipe = gateway.redis.pipeline()
    pipe.set(key, 0, ex=60, nx=True)
    pipe.incr(key)
    if pipe.execute()[1] > UPLOADS_PER_MINUTE:
        raise RateLimited(f"more than {UPLOADS_PER_MINUTE} uploads in a minute; wait a "
                          f"minute and add the rest")


def add_document_upload(app: Flask) -> None:
    """The upload route, and its own body limit (checked before ``add_body_limit``'s)."""
    @app.before_request
    def _refuse_large_uploads() -> None:
        if request.endpoint == UPLOAD_ENDPOINT and (request.content_length or 0) > UPLOAD_LIMIT:
            raise DocumentTooLarge(
                f"the upload is {request.content_length} bytes; one file may have at most "
                f"{MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB")

    app.register_blueprint(documents)
