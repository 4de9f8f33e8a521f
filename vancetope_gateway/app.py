"""The Flask app factory (``create_app``, a list of the app's parts) and the REST routes.

The WebSocket endpoint and the parts behind it are ``sockets.py``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis
from flask import Blueprint, Flask, Response, current_app, jsonify, request, send_file
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from vancetope_brain.engines import ENGINES, shown_process
from vancetope_brain.errors import (
    REDIS_DOWN,
    InvalidInput,
    RuntimeFailure,
    StoreError,
    VancetopeError,
)
from vancetope_brain.inbox.attachments import AttachmentStore
from vancetope_brain.lanes import consumers
from vancetope_brain.models import ProcessStatus, SessionStatus
from vancetope_brain.observability import tracing
from vancetope_brain.sessions.service import PAGE_LIMIT, PAGE_LIMIT_MAX
from vancetope_gateway.admin_api import admin
from vancetope_gateway.auth import authenticate
from vancetope_gateway.logs import redact_access_logs
from vancetope_gateway.mcp_server import add_mcp_route
from vancetope_gateway.observe import add_metrics_route
from vancetope_gateway.openai_api import openai
from vancetope_gateway.parts import Gateway
from vancetope_gateway.sockets import SocketParts, add_websocket_route
from vancetope_gateway.statuses import http_status
from vancetope_gateway.uploads import UPLOAD_ENDPOINT, add_document_upload
from vancetope_gateway.webapp import add_web_client
from workers.celery_app import lane_queue

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024
"""The largest request body a route may read (``MAX_CONTENT_LENGTH``): the OpenAI door's
chat completion (``openai_api.py``) and the MCP server's messages (``mcp_server.py``) read
one; the document upload reads a larger one (``uploads.py``, with a limit of its own), so
``_refuse_bodies`` refuses a larger body on every other route, and any body on a GET."""

rest = Blueprint("rest", __name__)


@rest.get("/healthz")
def healthz() -> Response:
    """Liveness: answers without touching any dependency."""
    return jsonify(status="ok")


@rest.get("/readyz")
def readyz() -> tuple[Response, int]:
    """Readiness: can this gateway enqueue a lane turn, and does a worker take it? The
    store, Redis and the broker answer, and a live worker consumes every lane queue
    (``vancetope_brain.lanes.consumers``); else 503 naming each failure and what to do."""
    gateway: Gateway = current_app.extensions["vancetope"]
    failures: dict[str, str] = {}
    try:
        gateway.store.ping()
    except StoreError as e:
        failures["store"] = str(e)
    try:
        gateway.redis.ping()
        workers = consumers.live(gateway.redis)
    except Exception as e:
        failures["redis"] = type(e).__name__
        workers = {}
    ping_broker = current_app.extensions["vancetope.ping_broker"]
    if ping_broker is not None:
        try:
            ping_broker()
        except Exception as e:
            failures["broker"] = f"the Celery broker does not answer ({type(e).__name__}); " \
                "check VANCETOPE_BROKER_URL (default: VANCETOPE_REDIS_URL)"
    if "redis" not in failures:
        lanes = [lane_queue(shard) for shard in range(gateway.config.lane_shards)]
        if missing := consumers.uncovered(workers, lanes):
            which = "any lane queue" if len(missing) == len(lanes) else ", ".join(missing)
            failures["workers"] = (
                f"no worker consumes {which} (no worker heartbeat in the last "
                f"{consumers.HEARTBEAT_TTL:g} s): start a worker (the Procfile's `worker`) "
                f"with the same VANCETOPE_REDIS_URL and VANCETOPE_LANE_SHARDS")
    if failures:
        return jsonify(status="unavailable", failures=failures, workers=sorted(workers)), 503
    return jsonify(status="ready", workers=sorted(workers)), 200


@rest.get("/think-engines")
def think_engines() -> Response:
    authenticate()
    return jsonify(engines=[e.describe() for e in ENGINES])


def _gateway() -> Gateway:
    return current_app.extensions["vancetope"]


def _int_arg(name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"query parameter {name} must be an integer") from None
    if not low <= value <= high:
        raise InvalidInput(f"query parameter {name} must be between {low} and {high}")
    return value


@rest.get("/sessions")
def sessions() -> Response:
    """A page of the caller's sessions, newest first, as ``session-list`` pages them:
    ``?status=``, ``?cursor=`` (the previous page's ``nextCursor``), ``?limit=``."""
    who = authenticate()
    raw = request.args.get("status")
    try:
        status = None if raw is None else SessionStatus(raw)
    except ValueError:
        raise InvalidInput("query parameter status must be one of "
                           f"{', '.join(SessionStatus)}") from None
    page = _gateway().sessions.list_sessions(
        who, status=status, cursor=request.args.get("cursor"),
        limit=_int_arg("limit", PAGE_LIMIT, 1, PAGE_LIMIT_MAX) or PAGE_LIMIT)
    return jsonify(sessions=[s.dump() for s in page.sessions], nextCursor=page.next_cursor)


@rest.get("/sessions/<session_id>")
def session(session_id: str) -> Response:
    who = authenticate()
    gateway = _gateway()
    found = gateway.sessions.get(who, session_id)
    return jsonify(session=found.dump(),
                   processes=[shown_process(p) for p in gateway.sessions.processes(who, session_id)])


@rest.get("/sessions/<session_id>/processes")
def session_processes(session_id: str) -> Response:
    who = authenticate()
    everything = request.args.get("all", "false").lower() in ("1", "true", "yes")
    processes = _gateway().sessions.processes(who, session_id)
    return jsonify(processes=[shown_process(p) for p in processes
                              if everything or p.status is not ProcessStatus.CLOSED])


@rest.get("/processes/<process_id>")
def process(process_id: str) -> Response:
    who = authenticate()
    return jsonify(process=shown_process(_gateway().sessions.process(who, process_id)))


@rest.get("/processes/<process_id>/chat")
def process_chat(process_id: str) -> Response:
    who = authenticate()
    lines = _gateway().sessions.chat_history(
        who, process_id, before_seq=_int_arg("beforeSeq", None, 1, 2**62),
        limit=_int_arg("limit", 100, 1, 500) or 100)
    return jsonify(messages=[line.dump() for line in lines])


@rest.get("/inbox")
def inbox() -> Response:
    """The caller's open Inbox (everything but ARCHIVED), newest first."""
    who = authenticate()
    gateway = _gateway()
    items = gateway.inbox.list(who, limit=_int_arg("limit", 50, 1, 200) or 50)
    return jsonify(items=[gateway.inbox.view(i) for i in items],
                   pending=gateway.inbox.pending_summary(who))


@rest.get("/inbox/<item_id>")
def inbox_item(item_id: str) -> Response:
    """One item: the target of notification deep links."""
    who = authenticate()
    gateway = _gateway()
    return jsonify(item=gateway.inbox.view(gateway.inbox.get(who, item_id)))


def add_attachment_route(app: Flask, attachments: AttachmentStore) -> None:
    """GET /attachments/<tenant>/<id>?exp=&sig=: inbox attachments behind signed URLs.

    The signature is the authorization (no bearer token), so links work in
    ``<img src>`` and e-mails; a forged or expired one is 403 ``forbidden``. Images
    are served inline, everything else as a download; the sandbox CSP keeps an
    inline SVG or HTML from running script.
    """
    @app.get("/attachments/<tenant_id>/<attachment_id>")
    def attachment(tenant_id: str, attachment_id: str) -> Response:
        path, meta = attachments.open(tenant_id, attachment_id, request.args.get("exp", ""),
                                      request.args.get("sig", ""))
        response = send_file(path, mimetype=meta["mimeType"], download_name=meta["filename"],
                             as_attachment=not meta["mimeType"].startswith("image/"))
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
        return response


def create_app(gateway: Gateway, *, llm_description: str,
               ping_broker: Callable[[], None] | None = None) -> Flask:
    """The gateway for one OS process, part by part. ``ping_broker`` (raises when the
    Celery broker cannot be reached) is for ``/readyz``. The threads its socket parts
    start stop with ``close_app``, which whoever serves the app calls on its way out."""
    redact_access_logs()
    app = Flask(__name__, static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.extensions["vancetope"] = gateway
    app.extensions["vancetope.ping_broker"] = ping_broker
    sockets = app.extensions["vancetope.sockets"] = SocketParts.build(gateway)
    add_document_upload(app)
    add_body_limit(app)
    app.register_blueprint(rest)
    app.register_blueprint(admin)
    app.register_blueprint(openai)
    add_mcp_route(app)
    add_attachment_route(app, gateway.attachments)
    add_metrics_route(app, gateway)
    tracing.instrument_flask(app)
    add_web_client(app)
    add_websocket_route(app, gateway, sockets, llm_description=llm_description)
    add_error_handlers(app)
    return app


def close_app(app: Flask) -> None:
    """Stop the app's background threads (socket hub, event listener, presence renewer,
    token watch, the MCP server's loop); the app serves nothing after. Once its server
    stopped serving."""
    app.extensions["vancetope.sockets"].close()
    app.extensions["vancetope.mcp"].close()


def add_body_limit(app: Flask) -> None:
    """Refuse, before authentication (so the upgrade request too), any body no route reads:
    ``MAX_CONTENT_LENGTH`` applies only where a route reads the body, and only the document
    upload does (it checks its own, larger limit: ``uploads.add_document_upload``)."""
    @app.before_request
    def _refuse_bodies() -> None:
        length = request.content_length or 0
        chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
        if length > MAX_BODY_BYTES and request.endpoint != UPLOAD_ENDPOINT:
            raise RequestEntityTooLarge(f"request bodies are limited to {MAX_BODY_BYTES} bytes")
        if (length or chunked) and request.method in ("GET", "HEAD"):
            raise RequestEntityTooLarge(f"{request.method} {request.path} takes no body")


def add_error_handlers(app: Flask) -> None:
    """Errors as ``{code, message}`` JSON with the status their code stands for."""
    @app.errorhandler(VancetopeError)
    def _domain_error(e: VancetopeError) -> tuple[Response, int]:
        return jsonify(code=e.code, message=str(e)), http_status(e)

    @app.errorhandler(redis.RedisError)
    def _redis_down(e: redis.RedisError) -> tuple[Response, int]:
        log.warning("Redis failed handling %s: %s", request.path, e)
        return jsonify(code=RuntimeFailure.code, message=REDIS_DOWN), 503

    @app.errorhandler(HTTPException)
    def _http_error(e: HTTPException) -> tuple[Response, int]:
        code = "payload_too_large" if e.code == 413 else \
            (e.name or "error").lower().replace(" ", "_")
        return jsonify(code=code, message=e.description), e.code or 500
