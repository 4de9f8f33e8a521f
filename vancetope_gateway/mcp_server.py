"""The MCP server: ``/mcp``, a Streamable HTTP endpoint of the Model Context Protocol, so
Claude Desktop, an IDE or another agent can delegate work to Vancetope's engines — list the
worker recipes, start a process from one with a goal, steer it, read its status and report,
stop it, and list and answer the caller's Inbox (docs/interop.md "MCP server").

The official ``mcp`` SDK's server (``MCPServer``) in stateless, JSON-response mode: each
POST is one JSON-RPC message answered in its response, no MCP session is kept (a process id
carries the state), so any gateway process can answer any request. The SDK's transport is
ASGI; ``a2wsgi`` serves it from this WSGI gateway on one asyncio loop per gateway process
(its thread started at the first request), and the SDK runs each tool, a plain function, on
a thread of its own (docs/architecture.md "The MCP server").

Before the SDK sees a request, Flask's view checks it as the OpenAI-compatible door does:
the bearer token (401), the user's requests a minute (429 ``rate_limited``) and the
requests under way of the user and of this gateway process (429 ``limit_exceeded``); those
refusals are JSON-RPC error objects with HTTP statuses, ``error.data.code`` carrying
Vancetope's stable code. A tool's own failure is a tool result with ``isError: true`` and
``structuredContent: {code, message}``; arguments the tool's schema refuses are
``invalid_input`` the same way. Every tool calls the services the WebSocket frames call,
with the caller's principal: owner- and tenant-scoped like them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Annotated, Any, cast

import redis
from a2wsgi import ASGIMiddleware
from flask import Blueprint, Flask, Response, current_app, request
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from vancetope_brain import keys
from vancetope_brain.engines import ENGINES
from vancetope_brain.errors import (
    InvalidInput,
    NotFound,
    RuntimeFailure,
    UnknownRecipe,
    VancetopeError,
)
from vancetope_brain.identity import Principal
from vancetope_brain.models import OnDisconnect, ProcessStatus, SessionType, ThinkProcess
from vancetope_brain.models.inbox import ItemStatus, Outcome
from vancetope_brain.models.lifecycle import LifecycleCall, parent_event
from vancetope_brain.models.recipe import RecipeCategory
from vancetope_brain.sessions.titles import title_from_message
from vancetope_gateway.auth import authenticate
from vancetope_gateway.limits import RedisSlots, count_in_minute
from vancetope_gateway.parts import Gateway
from vancetope_gateway.statuses import http_status

log = logging.getLogger(__name__)

PATH = "/mcp"
PROJECT = "default"
"""The project a started process's session opens in unless the call names another."""
REQUESTS_PER_MINUTE = 120
"""Requests per user and minute to ``/mcp`` (each POST is one MCP message: the
``initialize``, ``tools/list``, a ``tools/call``; more: 429 ``rate_limited``)."""
MAX_CALLS_PER_USER = 8
"""Requests to ``/mcp`` one user may have under way at once, across gateways (more: 429
``limit_exceeded``)."""
MAX_CALLS_PER_GATEWAY = 32
"""Requests to ``/mcp`` one gateway process serves at once: each holds a request thread
(werkzeug's, or one of gunicorn's ``WEB_THREADS``) and a thread of the SDK's loop while a
tool runs (more: 429 ``limit_exceeded``)."""
CALL_TTL = 60.0
"""Seconds after which a request under way that a dead gateway left stops counting."""
MAX_TEXT_CHARS = 32_000
"""The most characters a goal or a steered message may have (``process-create``'s and
``process-steer``'s cap)."""
MAX_CHAT_LINES = 50
"""The most recent chat lines ``process_status`` returns (``chat_lines``)."""
MAX_INBOX_ITEMS = 100
"""The most items one ``inbox_list`` returns (``limit``)."""
PROTOCOL_ERROR = -32000
"""The JSON-RPC error code of a refusal before the MCP server (``data.code`` says which)."""

# ── the tools ────────────────────────────────────────────────────────────────
ProcessId = Annotated[str, Field(min_length=1, max_length=64,
                                 description="A process id (process_start returned it).")]
SessionId = Annotated[str, Field(min_length=1, max_length=64, description="A session id.")]
ProjectId = Annotated[str, Field(min_length=1, max_length=64, description="A project id.")]


_FAILED_BELOW = "the server failed to answer; try again in a moment"
"""What a caller is told of a failure below us (the store, Redis): nothing of our internals."""


def _ok(data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data))],
                          structured_content=data)


def _failed(code: str, message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=f"{code}: {message}")],
                          structured_content={"code": code, "message": message},
                          is_error=True)


def _tool(fn: Callable[..., dict[str, Any]]) -> Callable[..., CallToolResult]:
    """A tool of the caller: ``fn(ctx, **arguments)`` (``_caller(ctx)`` says who calls and
    through which gateway) answering a dict, or raising a ``VancetopeError``: a tool error
    carrying the stable code; anything else is ``internal`` (logged, never shown)."""

    @functools.wraps(fn)
    def call(ctx: Context, **arguments: Any) -> CallToolResult:
        try:
            return _ok(fn(ctx, **arguments))
        except VancetopeError as e:
            if http_status(e) >= 500:
                log.warning("MCP tool %s failed: %s", fn.__name__, type(e).__name__)
                return _failed(e.code, _FAILED_BELOW)
            return _failed(e.code, str(e))
        except redis.RedisError as e:
            log.warning("MCP tool %s: Redis failed: %s", fn.__name__, type(e).__name__)
            return _failed(RuntimeFailure.code, _FAILED_BELOW)
        except Exception:
            log.exception("MCP tool %s failed", fn.__name__)
            return _failed("internal", _FAILED_BELOW)

    return call


def _caller(ctx: Context) -> tuple[Gateway, Principal]:
    """The gateway and the principal ``serve`` put in the request's WSGI environ."""
    environ = ctx.request_context.request.scope["wsgi_environ"]  # type: ignore[union-attr]
    return environ["vancetope.gateway"], environ["vancetope.principal"]


@_tool
def recipe_list(ctx: Context, project: ProjectId = PROJECT) -> dict[str, Any]:
    """The worker recipes a process can be started from (process_start's recipe): name,
    engine, description, and where it comes from (bundled, tenant or project)."""
    gateway, who = _caller(ctx)
    gateway.recipe_admin.check_project(who.tenant_id, project)
    return {"recipes": [
        {"name": e.recipe.name, "engine": e.recipe.engine, "description": e.recipe.description,
         "source": e.source.value}
        for e in gateway.recipes.list(who.tenant_id, project, category=RecipeCategory.WORKER)]}


@_tool
def process_start(
        ctx: Context,
        recipe: Annotated[str, Field(min_length=1, max_length=64,
                                     description="A worker recipe's name (recipe_list).")],
        goal: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS,
                                   description="What the process is to do.")],
        params: Annotated[dict[str, Any] | None, Field(
            description="Engine parameters of the recipe, if any (e.g. template).")] = None,
        project: ProjectId = PROJECT,
        session_id: Annotated[SessionId | None, Field(
            description="Start it in this OPEN session of yours instead of a new one.")] = None,
) -> dict[str, Any]:
    """Start a process from a worker recipe with a goal, in a new AUTONOMOUS session of
    yours (no chat; it stays open until session_close) or in session_id. Returns the
    process's and the session's ids; follow it with process_status."""
    gateway, who = _caller(ctx)
    if session_id is not None:
        project = gateway.sessions.get(who, session_id).project_id
    if recipe not in {e.recipe.name for e in gateway.recipes.list(
            who.tenant_id, project, category=RecipeCategory.WORKER)}:
        raise UnknownRecipe(f"no worker recipe named {recipe!r} in project {project!r}; "
                            "recipe_list lists them")
    opened = session_id is None
    if session_id is None:
        session_id = gateway.sessions.create(
            who, type=SessionType.AUTONOMOUS, project_id=project,
            title=title_from_message(goal) or recipe, on_disconnect=OnDisconnect.KEEP_OPEN).id
    try:
        process = gateway.sessions.create_process(who, session_id, recipe=recipe, goal=goal,
                                                  params=params or {})
    except BaseException:
        if opened:
            gateway.lifecycle.close(who, session_id)
        raise
    return {"processId": process.id, "sessionId": session_id, "recipe": recipe,
            "status": process.status.value}


@_tool
def process_steer(
        ctx: Context, process_id: ProcessId,
        message: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS,
                                      description="The message, as the user typing it.")],
) -> dict[str, Any]:
    """Send a process of yours a message, as the user typing in its chat (an answer to its
    question, more to do, a correction); it handles it in its next turn."""
    gateway, who = _caller(ctx)
    stored, _ = gateway.sessions.steer(who, process_id, message)
    return {"processId": process_id, "messageId": stored.id, "seq": stored.seq}


@_tool
def process_status(
        ctx: Context, process_id: ProcessId,
        chat_lines: Annotated[int, Field(ge=0, le=MAX_CHAT_LINES, description=(
            "How many of its latest chat lines to return."))] = 10,
) -> dict[str, Any]:
    """A process of yours: its status, done (true once CLOSED), its report once it is done,
    failed or stopped, or blocked on a question (what its parent would be told), and its
    latest chat lines."""
    gateway, who = _caller(ctx)
    process = gateway.sessions.process(who, process_id)
    lines = gateway.sessions.chat_history(who, process_id, limit=chat_lines) \
        if chat_lines else []
    return {"processId": process.id, "sessionId": process.session_id,
            "recipe": process.recipe_name, "engine": process.engine, "goal": process.goal,
            "status": process.status.value,
            "closeReason": process.close_reason.value if process.close_reason else None,
            "done": process.status is ProcessStatus.CLOSED, "report": _report(process),
            "chat": [{"role": m.role.value, "content": m.content,
                      "at": m.created_at.isoformat()} for m in lines]}


def _report(process: ThinkProcess) -> dict[str, Any] | None:
    """What a parent would hear of the process now (its engine's ``summarize_for_parent``):
    its result once CLOSED, its question when BLOCKED; None while it works."""
    event = parent_event(process.status, process.close_reason)
    engine = ENGINES.find(process.engine)
    if event is None or engine is None:
        return None
    report = engine.summarize_for_parent(process, event)
    return {"event": event.value, "summary": report.human_summary, "data": report.payload}


@_tool
def process_stop(ctx: Context, process_id: ProcessId) -> dict[str, Any]:
    """Stop a process of yours and what it started; it ends CLOSED (reason STOPPED)."""
    gateway, who = _caller(ctx)
    process = gateway.sessions.control(who, process_id, LifecycleCall.STOP)
    return {"processId": process.id, "status": process.status.value}


@_tool
def session_close(ctx: Context, session_id: SessionId) -> dict[str, Any]:
    """Close a session of yours (process_start opens one per process; you may hold 100 that
    are not CLOSED): every process in it stops."""
    gateway, who = _caller(ctx)
    session = gateway.lifecycle.close(who, session_id)
    return {"sessionId": session.id, "status": session.status.value}


@_tool
def inbox_list(
        ctx: Context,
        status: Annotated[list[ItemStatus] | None, Field(
            max_length=4, description="Only items in these statuses (default: all but "
            "ARCHIVED).")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_INBOX_ITEMS)] = 20,
) -> dict[str, Any]:
    """Your Inbox items, newest first, and how many are PENDING: a PENDING item that
    requires action waits for inbox_answer."""
    gateway, who = _caller(ctx)
    items = gateway.inbox.list(who, statuses=status, limit=limit)
    return {"items": [gateway.inbox.view(i) for i in items],
            "pending": gateway.inbox.pending_summary(who)}


@_tool
def inbox_answer(
        ctx: Context,
        item_id: Annotated[str, Field(min_length=1, max_length=64,
                                      description="The item's id (inbox_list).")],
        outcome: Annotated[Outcome, Field(description=(
            "DECIDED with a value; INSUFFICIENT_INFO or UNDECIDABLE with a reason."))],
        value: Annotated[Any, Field(description=(
            "The answer when DECIDED, of the item's type: a choice's option id (or a list "
            "of them), true/false, a text, a number."))] = None,
        reason: Annotated[str | None, Field(min_length=1, max_length=10_000)] = None,
) -> dict[str, Any]:
    """Answer a PENDING item of your Inbox; the process that asked gets the answer."""
    gateway, who = _caller(ctx)
    return {"item": gateway.inbox.view(gateway.inbox.answer(who, item_id, outcome,
                                                            value=value, reason=reason))}


TOOLS = (recipe_list, process_start, process_steer, process_status, process_stop,
         session_close, inbox_list, inbox_answer)


def build_server() -> MCPServer:
    """The MCP server and its tools (no transport). ``MCPServer`` configures the root logger
    when it has no handler yet (``logging.basicConfig`` with rich's handler); the gateway's
    logging is ``observability.logs``', so whatever the constructor added is taken back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server = MCPServer("vancetope", instructions=(
        "Vancetope runs think processes from worker recipes (marvin plans and runs a task "
        "tree, vogon follows a strategy, zaphod asks a council, ford answers). Start one with "
        "process_start, follow it with process_status until done is true, answer its "
        "questions with process_steer or inbox_answer."),
        middleware=[_coded_refusals])
    for added in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(added)
    root.setLevel(level)
    for tool in TOOLS:
        server.add_tool(tool, structured_output=False)
    return server


async def _coded_refusals(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """The SDK's own tool errors — arguments the tool's schema refuses, a tool not known —
    carry no code: ``invalid_input`` or ``not_found`` here, like every other tool error
    (the chain's results are the wire's dicts)."""
    result = await call_next(ctx)
    if ctx.method == "tools/call" and isinstance(result, dict) and result.get("isError") \
            and result.get("structuredContent") is None:
        name = (ctx.params or {}).get("name")
        text = " ".join(str(c.get("text", "")) for c in result.get("content") or [])
        if name in {t.__name__ for t in TOOLS}:
            return _failed(InvalidInput.code, f"{text}; see the tool's input schema")
        return _failed(NotFound.code, f"no tool {name!r}; tools/list lists them")
    return result


# ── serving it from the WSGI gateway ─────────────────────────────────────────
class McpDoor:
    """The MCP server's ASGI app on one asyncio loop of this gateway process, as WSGI: the
    loop's thread and the SDK's session manager start at the first request (after a
    gunicorn fork) and stop with ``close``."""

    def __init__(self, max_body: int) -> None:
        self._server = build_server()
        self._asgi = self._server.streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, json_response=True,
            max_request_body_size=max_body,
            # Only a bearer token authorises a request (no cookie a page could ride on), so
            # a DNS-rebound page has nothing to send: no Host/Origin allow-list is needed.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._wsgi: ASGIMiddleware | None = None
        self._stop: asyncio.Event | None = None
        self._running: Future[None] | None = None

    def wsgi(self) -> ASGIMiddleware:
        with self._lock:
            if self._wsgi is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="mcp-loop",
                                                daemon=True)
                self._thread.start()
                started: Future[None] = Future()
                self._running = asyncio.run_coroutine_threadsafe(self._serve(started), loop)
                started.result(timeout=10)
                # a2wsgi types the ASGI app by its own protocol, Starlette by its own.
                self._loop, self._wsgi = loop, ASGIMiddleware(cast(Any, self._asgi), loop=loop)
            return self._wsgi

    async def _serve(self, started: Future[None]) -> None:
        self._stop = asyncio.Event()
        async with self._server.session_manager.run():
            started.set_result(None)
            await self._stop.wait()

    def close(self) -> None:
        with self._lock:
            if self._loop is None or self._stop is None or self._running is None:
                return
            self._loop.call_soon_threadsafe(self._stop.set)
            try:
                self._running.result(timeout=5)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                if self._thread is not None:
                    self._thread.join(timeout=5)
                if not self._loop.is_running():  # its thread ended: close it (its self-pipe)
                    self._loop.close()
                self._loop = self._wsgi = self._thread = None


mcp = Blueprint("mcp", __name__)


def _refusal(status: int, code: str, message: str) -> Response:
    """A refusal before the MCP server, as a JSON-RPC error (the SDK's client raises it as
    ``MCPError`` with ``data.code``)."""
    response = Response(json.dumps({"jsonrpc": "2.0", "id": None, "error": {
        "code": PROTOCOL_ERROR, "message": message, "data": {"code": code, "status": status}}}),
        status=status, mimetype="application/json")
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="vancetope"'
    return response


@mcp.route(PATH, methods=["GET", "POST", "DELETE"])
def serve() -> Any:
    gateway: Gateway = current_app.extensions["vancetope"]
    try:
        who = authenticate()
        count_in_minute(gateway.redis, keys.mcp_requests(who.tenant_id, who.user_id),
                        REQUESTS_PER_MINUTE,
                        f"more than {REQUESTS_PER_MINUTE} MCP requests in a minute; wait a "
                        "moment")
        slots = RedisSlots.take(gateway.redis, (
            (keys.mcp_calls(who.tenant_id, who.user_id), MAX_CALLS_PER_USER,
             f"you have {MAX_CALLS_PER_USER} MCP requests under way; wait for one to end"),
            (keys.mcp_gateway_calls(f"{socket.gethostname()}:{os.getpid()}"),
             MAX_CALLS_PER_GATEWAY, f"this server has {MAX_CALLS_PER_GATEWAY} MCP requests "
             "under way; try again shortly")), CALL_TTL)
    except VancetopeError as e:
        status = http_status(e)
        return _refusal(status, e.code, str(e) if status < 500 else _FAILED_BELOW)
    except redis.RedisError as e:
        log.warning("MCP door: admitting a request failed: %s", type(e).__name__)
        return _refusal(503, RuntimeFailure.code, _FAILED_BELOW)
    request.environ["vancetope.principal"] = who
    request.environ["vancetope.gateway"] = gateway
    try:
        response = Response.force_type(
            current_app.extensions["vancetope.mcp"].wsgi(), request.environ)  # type: ignore[arg-type]
    except BaseException:
        slots.give_back()
        raise
    response.call_on_close(slots.give_back)
    return response


def add_mcp_route(app: Flask) -> None:
    """``/mcp`` on the app (its bodies up to the app's ``MAX_CONTENT_LENGTH``);
    ``close_app`` stops its loop."""
    app.extensions["vancetope.mcp"] = McpDoor(app.config["MAX_CONTENT_LENGTH"])
    app.register_blueprint(mcp)

