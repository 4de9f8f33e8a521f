"""The WebSocket protocol as a plain class: testable with any object that has
``receive(timeout=None) -> str | bytes | None``, ``send(str)``, ``close(code, message)``
and ``abort()``.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, Protocol

import redis
from pydantic import ValidationError

from vancetope_brain import __version__, keys
from vancetope_brain.engines import ENGINES
from vancetope_brain.errors import (
    REDIS_DOWN,
    BadJson,
    Conflict,
    InvalidInput,
    NotFound,
    RateLimited,
    RuntimeFailure,
    Unauthorized,
    UnknownFrameType,
    VancetopeError,
)
from vancetope_brain.events import EventListener, EventType, Gap, StreamEvent
from vancetope_brain.identity import Principal
from vancetope_brain.models import Fingerprint, ProcessStatus, Session, SessionStatus
from vancetope_brain.models.inbox import Criticality, InboxItem
from vancetope_brain.models.lifecycle import LifecycleCall
from vancetope_brain.models.steer import ToolCallStatus, ToolResult
from vancetope_brain.notifications import admits
from vancetope_brain.observability import metrics, tracing
from vancetope_brain.recipes import Recipe, RecipeAdmin
from vancetope_brain.recipes.kinds import kind_named
from vancetope_brain.recipes.loader import definition_from_mapping, recipe_from_mapping
from vancetope_brain.schemas import nested_deeper
from vancetope_gateway import frames
from vancetope_gateway.outbound import Outbound
from vancetope_gateway.parts import Gateway

log = logging.getLogger(__name__)

# The close code of a dropped slow client: 1013 "try again later" (RFC 6455 registry).
TOO_SLOW = 1013
TOO_SLOW_MESSAGE = "client too slow; resume with your last seq"
# The close code of a socket whose token was revoked, or of a client that keeps
# flooding past its frame rate: 1008 "policy violation" (RFC 6455 registry).
POLICY_VIOLATION = 1008
REVOKED = POLICY_VIOLATION
REVOKED_MESSAGE = "token revoked"
# How deeply a frame's arrays and objects may nest (the envelope is level 1, ``data`` 2).
MAX_NESTING = 64


class Socket(Protocol):
    def receive(self, timeout: float | None = None) -> str | bytes | None: ...
    def send(self, data: str) -> None: ...
    def close(self, reason: int, message: str) -> None: ...
    def abort(self) -> None:
        """Cut the connection now: a send blocked on a client that stopped reading fails."""


class ConnState(Enum):
    OPEN = "open"      # authenticated, no session bound
    BOUND = "bound"    # a session is bound; its events flow
    CLOSED = "closed"  # terminal

    def to(self, new: ConnState) -> ConnState:
        """The new state; raises on a transition the protocol does not have."""
        allowed = {ConnState.OPEN: {ConnState.BOUND, ConnState.CLOSED},
                   ConnState.BOUND: {ConnState.BOUND, ConnState.CLOSED},
                   ConnState.CLOSED: set()}
        if new not in allowed[self]:
            raise RuntimeError(f"illegal connection transition {self.value} → {new.value}")
        return new


class TokenBucket:
    """``rate`` requests per second with bursts up to ``burst``."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self._rate, self._burst, self._clock = rate, burst, clock
        self._tokens, self._at = float(burst), clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class Connection:
    """One authenticated client connection: requests in, replies and events out.

    Threads: the one serving its frames (``handle``, one frame at a time; it also
    replays missed events: a thread of the hub's pool, or ``run``'s caller), the
    gateway's event listener (live events and feed pushes), the one draining
    ``Outbound`` (every frame goes out there, in order: the hub, or a writer thread of
    its own) and the presence renewer.
    ``_lock`` guards ``state``, ``session``, the follow handles and the outbound queue,
    and is held only for steps in memory, never across I/O, so the listener never waits
    for anybody's Redis, store or socket. ``_bind`` and ``_start_events`` do their I/O
    first and commit under the lock only if the connection is still open (``_bind``
    undoes its binding otherwise). ``close`` may come from any thread; after it the
    writer sends the close frame and runs ``_release`` exactly once.
    """

    # Frames waiting for one client; one more and it is dropped (close 1013). Live events
    # come at the pace of turns; a catch-up fills at most half of it (``_catch_up``).
    OUTBOUND_QUEUE_MAX = 1000
    # How long the gateway waits on a client that does not read: a catch-up waiting for
    # room in its queue (then it is dropped), or a closed connection's writer still
    # blocked in a send, which cannot get the close frame out (then the TCP connection
    # is cut).
    STALL_GRACE_SEC = 10.0

    def __init__(self, sock: Socket, principal: Principal, gateway: Gateway,
                 listener: EventListener, *, llm: str, max_frame_bytes: int,
                 notify_mode: frames.NotifyMode = "all", frame_rate: float = 50.0,
                 frame_burst: int = 200, connection_id: str | None = None,
                 authorized: Callable[[], bool] = lambda: True,
                 pump: Callable[[], None] | None = None) -> None:
        """``frame_rate`` / ``frame_burst``: ``VANCETOPE_FRAME_RATE`` / ``_BURST``.
        ``connection_id``: the id the gateway already counted the connection under (its
        per-user slot in presence); a new one by default. ``authorized`` says whether
        the socket's token still holds (``TokenWatch``); it is asked before each request
        is served. ``pump``: the socket hub drains ``outbound`` (see ``Outbound``); None:
        a writer thread of the connection's own sends with ``sock.send``."""
        self.connection_id = connection_id or uuid.uuid4().hex
        self._sock = sock
        self._who = principal
        self._gateway = gateway
        self._listener = listener
        self._llm = llm
        self._max_frame_bytes = max_frame_bytes
        self._notify_mode = notify_mode
        self._authorized = authorized
        self._lock = threading.Lock()
        self.outbound = Outbound(sock, self._lock, limit=self.OUTBOUND_QUEUE_MAX,
                                 grace=self.STALL_GRACE_SEC, on_failure=self.close,
                                 on_closed=self._release, pump=pump)
        self._rate = frame_rate
        self._bucket = TokenBucket(frame_rate, frame_burst)
        # Refusals have a bucket too: a client that ignores them as long again is closed.
        self._overrun = TokenBucket(frame_rate, frame_burst)
        self._follow: int | None = None
        self._feed: int | None = None
        self._resume_after = 0
        self._tool_calls: set[str] = set()  # tool-call ids sent to this client, unanswered
        self._live_after = 0
        self.state = ConnState.OPEN
        self.session: Session | None = None
        self._fingerprint: Fingerprint | None = None  # what this connection bound with
        # suspend is the system's call (session cascade), not a client's.
        calls = {f"process-{c.value}": c for c in LifecycleCall if c is not LifecycleCall.SUSPEND}
        self._handlers: dict[str, Callable[[Any], frames.Wire]] = {
            "session-create": self._session_create,
            "session-resume": self._session_resume,
            "session-list": self._session_list,
            "session-get": self._session_get,
            "session-suspend": self._session_suspend,
            "session-close": self._session_close,
            "session-rename": self._session_rename,
            "process-create": self._process_create,
            "process-start": self._process_start,
            **{name: functools.partial(self._process_control, call)
               for name, call in calls.items()},
            "process-status": self._process_status,
            "process-list": self._process_list,
            "process-steer": self._process_steer,
            "process-command": self._process_command,
            "chat-history": self._chat_history,
            "events-resume": self._events_resume,
            "client-tools-register": self._client_tools_register,
            "tool-result": self._tool_result,
            "think-engines-list": self._think_engines_list,
            "thinkengines-list": self._think_engines_list,
            "recipe-list": self._recipe_list,
            "recipe-create": functools.partial(self._recipe_write, RecipeAdmin.create),
            "recipe-update": functools.partial(self._recipe_write, RecipeAdmin.update),
            "recipe-delete": self._recipe_delete,
            **{t: functools.partial(self._definition_frame, t)
               for kind in frames.KIND_FRAMES.values() for t in kind[0]},
            "inbox-list": self._inbox_list,
            "inbox-item": lambda d: self._item(self._gateway.inbox.get(self._who, d.item_id)),
            "inbox-answer": lambda d: self._item(self._gateway.inbox.answer(
                self._who, d.item_id, d.outcome, value=d.value, reason=d.reason)),
            "inbox-delegate": lambda d: self._item(self._gateway.inbox.delegate(
                self._who, d.item_id, d.to_user_id, d.note)),
            "inbox-dismiss": lambda d: self._item(self._gateway.inbox.dismiss(
                self._who, d.item_id, d.note)),
            "inbox-archive": lambda d: self._item(self._gateway.inbox.archive(
                self._who, d.item_id)),
            "inbox-revoke-auto-answer": lambda d: self._item(
                self._gateway.inbox.revoke_auto_answer(self._who, d.item_id)),
            "inbox-summary": lambda _: frames.InboxPendingSummary.model_validate(
                self._gateway.inbox.pending_summary(self._who)),
            "user-list": self._user_list,
            "ping": lambda _: frames.Pong(),
        }

    # ── loop ────────────────────────────────────────────────────────────
    def run(self) -> None:
        """Serve a blocking ``Socket`` until the client goes away; returns once the writer
        has ended. (The server's hub calls ``open`` and then ``handle`` per frame.)"""
        try:
            self.open()
            while self.state is not ConnState.CLOSED:
                raw = self._sock.receive()
                if raw is None:
                    break
                self.handle(raw)
        finally:
            self.close()
            self.outbound.join()

    def open(self) -> None:
        """Greet the client (``welcome``, the Inbox summary) and follow the user's feed."""
        sessions = self._gateway.sessions.list_sessions(self._who)
        self.push("welcome", frames.Welcome(
            server_version=__version__, tenant_id=self._who.tenant_id,
            user_id=self._who.user_id, llm=self._llm,
            max_frame_bytes=self._max_frame_bytes, notify_mode=self._notify_mode,
            sessions={status.value: sum(1 for s in sessions if s.status is status)
                      for status in SessionStatus}))
        self._follow_feed()
        self.push("inbox-pending-summary", frames.InboxPendingSummary.model_validate(
            self._gateway.inbox.pending_summary(self._who)))

    def close(self, code: int | None = None, message: str = "", *,
              last_frame: str | None = None) -> None:
        """Go CLOSED, from any thread, without blocking: events stop, frames still queued
        are discarded, and the writer sends ``last_frame`` (if given), the close frame (if
        ``code``) and then runs ``_release``."""
        with self._lock:
            if self.state is ConnState.CLOSED:
                return
            self.state = self.state.to(ConnState.CLOSED)
            for handle in (self._follow, self._feed):
                if handle is not None:
                    self._listener.unfollow(handle)
            self._follow = self._feed = None
            self.outbound.close(code, message, last_frame)

    def revoked(self, request_id: str | None = None) -> None:
        """The token was revoked: close with 1008, answering the request being served (if
        any) with ``unauthorized`` first. From any thread."""
        error = None if request_id is None else _encode(
            "error", frames.ErrorData(code=Unauthorized.code, message=REVOKED_MESSAGE).dump(),
            request_id)
        log.info("closing connection %s of user %s: its token was revoked",
                 self.connection_id, self._who.user_id)
        self.close(REVOKED, REVOKED_MESSAGE, last_frame=error)

    def _release(self) -> None:
        """On the writer, after its last frame: forget the socket's binding (if it was its
        session's last client, the session's ``onDisconnect`` policy applies) and presence."""
        with self._lock:
            session, self.session = self.session, None
        if session is not None:
            self._leave(session.id)
        try:
            self._gateway.presence.user_disconnect(self._who.tenant_id, self._who.user_id,
                                                 self.connection_id, self._notify_mode)
        except Exception:  # its presence entry expires on its own
            log.exception("forgetting connection %s of user %s failed",
                          self.connection_id, self._who.user_id)

    def presence(self) -> tuple[tuple[str, str, str, str], tuple[str, str, str] | None] | None:
        """What keeps this connection counted as present (``Presence.renew_all``: the user's
        entry, and the bound session's), None once closed."""
        with self._lock:
            if self.state is ConnState.CLOSED:
                return None
            session = self.session
        user = (self._who.tenant_id, self._who.user_id, self.connection_id, self._notify_mode)
        return user, None if session is None else \
            (self._who.tenant_id, session.id, self.connection_id)

    def handle(self, raw: str | bytes) -> None:
        """Answer one frame: exactly one reply or error; never raises for bad input.

        Every frame received takes a token first, before it is parsed (binary, oversized and
        invalid ones too), so flooding costs the gateway one bucket check per frame. A frame
        over the rate is dropped unread: its ``rate_limited`` error names no request. A
        client that goes on regardless (``frame_burst`` more refused frames, beyond the
        refill) is closed with 1008.
        """
        request_id = None
        try:
            if not self._bucket.take():
                self._refuse_over_rate()
                return
            if isinstance(raw, bytes):
                raise InvalidInput("binary frames are not part of the protocol; send JSON text")
            # A character is at most 4 bytes of UTF-8: most frames need no encoding to tell.
            if len(raw) * 4 > self._max_frame_bytes and \
                    len(raw.encode()) > self._max_frame_bytes:
                # The socket layer counts what it received; the limit is in UTF-8 bytes.
                self._close_too_big()
                return
            try:
                body = json.loads(raw)
            except ValueError as e:
                raise BadJson(f"frame is not valid JSON: {e}") from e
            except RecursionError as e:
                raise InvalidInput(f"frame is nested more than {MAX_NESTING} deep") from e
            # Nesting takes an opening bracket per level: most frames need no walk to tell.
            if raw.count("[") + raw.count("{") > MAX_NESTING and \
                    nested_deeper(body, MAX_NESTING):
                # pydantic's serializer gives up far below what json.loads accepts (a
                # 900-deep ``params`` failed in ``model_dump`` and answered ``internal``).
                request_id = _request_id(body)
                raise InvalidInput(f"frame is nested more than {MAX_NESTING} deep")
            # A lone surrogate comes from a \\u escape (or a str that holds one).
            if ("\\u" in raw or not raw.isascii()) and not _valid_unicode(body):
                raise BadJson("frame contains invalid Unicode (a lone surrogate escape such as "
                              "\\ud800)")
            request_id = _request_id(body)
            envelope = frames.Envelope.model_validate(body)
            request_id = envelope.id
            if not self._authorized():
                self.revoked(request_id)
                return
            model = frames.REQUESTS.get(envelope.type)
            if model is None:
                raise UnknownFrameType(f"unknown frame type {envelope.type!r}; "
                                       f"known: {', '.join(sorted(frames.REQUESTS))}")
            if envelope.id is None:
                raise InvalidInput("requests need an 'id' so the reply can name it")
            data = model.model_validate(envelope.data)
            with tracing.span(f"ws {envelope.type}", frame=envelope.type):
                reply = self._handlers[envelope.type](data)
            self._send(envelope.type, reply.dump(), envelope.id)
            if envelope.type in _STARTS_EVENTS:
                self._start_events()
        except RecursionError:
            self._error(request_id, "invalid_input", "frame is nested too deeply")
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(map(str, err["loc"])) or "frame"
            self._error(request_id, "invalid_input", f"{where}: {err['msg']}")
        except VancetopeError as e:
            self._error(request_id, e.code, str(e))
        except redis.RedisError as e:
            log.warning("Redis failed handling a %s frame: %s", envelope.type, e)
            self._error(request_id, RuntimeFailure.code, REDIS_DOWN)
        except Exception:
            log.exception("unexpected error handling a frame")
            self._error(request_id, "internal", "internal error; the server log has details")

    def _refuse_over_rate(self) -> None:
        if not self._overrun.take():
            log.info("closing connection %s of user %s: it keeps sending over its frame rate",
                     self.connection_id, self._who.user_id)
            self.close(POLICY_VIOLATION, "too many frames")
            return
        self._error(None, RateLimited.code, f"more than {self._rate:g} frames/s: a frame was "
                    f"dropped unread; slow down")

    def _close_too_big(self) -> None:
        """Close with 1009 (message too big), as the socket does for larger frames."""
        self.close(1009, f"frame larger than {self._max_frame_bytes} bytes")

    # ── sessions ────────────────────────────────────────────────────────
    def _session_create(self, data: frames.SessionCreate) -> frames.SessionBound:
        session = self._gateway.sessions.create(
            self._who, type=data.type, title=data.title, project_id=data.project_id,
            on_disconnect=data.on_disconnect, idle_timeout_sec=data.idle_timeout_sec)
        return self._bind(session.id, 0, data.fingerprint)

    def _session_resume(self, data: frames.SessionResume) -> frames.SessionBound:
        return self._bind(data.session_id, data.last_seq, data.fingerprint)

    def _session_list(self, data: frames.SessionList) -> frames.SessionsListed:
        return frames.SessionsListed(sessions=[
            s.dump() for s in self._gateway.sessions.list_sessions(self._who)
            if data.status is None or s.status is data.status])

    def _session_get(self, data: frames.SessionRef) -> frames.SessionDetail:
        return self._detail(self._gateway.sessions.get(self._who, data.session_id))

    def _session_suspend(self, data: frames.SessionRef) -> frames.SessionDetail:
        return self._detail(self._gateway.lifecycle.suspend(self._who, data.session_id))

    def _session_close(self, data: frames.SessionRef) -> frames.SessionDetail:
        return self._detail(self._gateway.lifecycle.close(self._who, data.session_id))

    def _session_rename(self, data: frames.SessionRename) -> frames.SessionDetail:
        return self._detail(self._gateway.sessions.rename(self._who, data.session_id,
                                                          data.title))

    def _detail(self, session: Session) -> frames.SessionDetail:
        processes = self._gateway.sessions.processes(self._who, session.id)
        return frames.SessionDetail(session=session.dump(),
                                    processes=[p.dump() for p in processes])

    # ── processes ───────────────────────────────────────────────────────
    def _process_create(self, data: frames.ProcessCreate) -> frames.ProcessReply:
        session = self._require_session()
        process = self._gateway.sessions.create_process(
            self._who, session.id, data.engine, recipe=data.recipe, template=data.template,
            goal=data.goal, name=data.name, params=data.params)
        return frames.ProcessReply(process=process.dump())

    def _process_start(self, data: frames.ProcessRef) -> frames.ProcessReply:
        return frames.ProcessReply(
            process=self._gateway.sessions.start(self._who, data.process_id).dump())

    def _process_control(self, call: LifecycleCall,
                         data: frames.ProcessRef) -> frames.ProcessReply:
        return frames.ProcessReply(
            process=self._gateway.sessions.control(self._who, data.process_id, call).dump())

    def _process_status(self, data: frames.ProcessRef) -> frames.ProcessReply:
        return frames.ProcessReply(
            process=self._gateway.sessions.process(self._who, data.process_id).dump())

    def _process_list(self, data: frames.ProcessList) -> frames.ProcessesListed:
        session_id = data.session_id or self._require_session().id
        processes = self._gateway.sessions.processes(self._who, session_id)
        return frames.ProcessesListed(processes=[
            p.dump() for p in processes if data.all or p.status is not ProcessStatus.CLOSED])

    def _process_steer(self, data: frames.ProcessSteer) -> frames.SteerAccepted:
        message, created = self._gateway.sessions.steer(
            self._who, data.target_think_process_id, data.content, data.idempotency_key,
            session_id=self._require_session().id)
        return frames.SteerAccepted(message_id=message.id, seq=message.seq, duplicate=not created)

    def _process_command(self, data: frames.ProcessCommand) -> frames.SteerAccepted:
        message, created = self._gateway.sessions.command(
            self._who, data.process_id, data.command, data.params, data.idempotency_key,
            session_id=self._require_session().id)
        return frames.SteerAccepted(message_id=message.id, seq=message.seq, duplicate=not created)

    def _chat_history(self, data: frames.ChatHistory) -> frames.ChatPage:
        lines = self._gateway.sessions.chat_history(self._who, data.process_id,
                                                  before_seq=data.before_seq, limit=data.limit)
        return frames.ChatPage(messages=[line.dump() for line in lines])

    def _think_engines_list(self, _: frames.Empty) -> frames.EnginesListed:
        return frames.EnginesListed(engines=[e.describe() for e in ENGINES])

    # ── recipes (any user of the tenant manages its recipes, as in v1 of the spec) ──
    def _recipe_list(self, data: frames.RecipeList) -> frames.RecipesListed:
        self._gateway.recipe_admin.check_project(self._who.tenant_id, data.project_id)
        return frames.RecipesListed(recipes=[
            e.describe() for e in self._gateway.recipes.list(self._who.tenant_id, data.project_id)])

    def _recipe_write(self, write: Callable[[RecipeAdmin, str, str | None, Recipe], None],
                      data: frames.RecipeWrite) -> frames.RecipeStored:
        recipe = recipe_from_mapping(data.recipe, "recipe")
        write(self._gateway.recipe_admin, self._who.tenant_id, data.project_id, recipe)
        return frames.RecipeStored(project_id=data.project_id, recipe=recipe.dump())

    def _definition_frame(self, frame_type: str, data: Any) -> frames.Wire:
        """``<kind>-list/-create/-update/-delete`` of a definition kind (e.g. strategies)."""
        name, verb = frame_type.rsplit("-", 1)
        kind = kind_named(name)
        admin = self._gateway.recipe_admin.of(kind.model)
        tenant, project = self._who.tenant_id, data.project_id
        reply = frames.REPLIES[frame_type]
        if verb == "list":
            admin.check_project(tenant, project)
            return reply.model_validate({kind.model.COLLECTION: [
                e.describe() for e in self._gateway.recipes.of(kind.model).list(tenant, project)]})
        if verb == "delete":
            admin.delete(tenant, project, data.name)
            return reply.model_validate({"projectId": project, "name": data.name})
        definition = definition_from_mapping(kind.model, getattr(data, name), name)
        (admin.create if verb == "create" else admin.update)(tenant, project, definition)
        return reply.model_validate({"projectId": project, name: definition.dump()})

    def _recipe_delete(self, data: frames.RecipeDelete) -> frames.RecipeDeleted:
        self._gateway.recipe_admin.delete(self._who.tenant_id, data.project_id, data.name)
        return frames.RecipeDeleted(project_id=data.project_id, name=data.name)

    # ── the Inbox ───────────────────────────────────────────────────────
    def _inbox_list(self, data: frames.InboxList) -> frames.InboxListed:
        items = self._gateway.inbox.list(
            self._who, statuses=data.status, criticalities=data.criticality, tags=data.tags,
            session_id=data.session_id, before=_parse_cursor(data.cursor),
            limit=data.limit + 1)
        page = items[:data.limit]
        cursor = f"{page[-1].created_at.isoformat()}|{page[-1].id}" \
            if len(items) > data.limit else None
        return frames.InboxListed(items=[self._gateway.inbox.view(i) for i in page],
                                  next_cursor=cursor)

    def _item(self, item: InboxItem) -> frames.InboxItemReply:
        return frames.InboxItemReply(item=self._gateway.inbox.view(item))

    # ── users (whom an Inbox item can be delegated to) ─────────────────
    def _user_list(self, data: frames.UserList) -> frames.UsersListed:
        users = self._gateway.identity.list_users(self._who.tenant_id)
        if data.cursor is not None:
            at = next((i for i, u in enumerate(users) if u.id == data.cursor), None)
            if at is None:
                raise InvalidInput("cursor is not a nextCursor of user-list")
            users = users[at + 1:]
        if data.query:
            needle = data.query.casefold()
            users = [u for u in users if needle in u.id.casefold() or needle in u.name.casefold()]
        page = users[:data.limit]
        return frames.UsersListed(users=[frames.UserEntry(id=u.id, name=u.name) for u in page],
                                  next_cursor=page[-1].id if len(users) > data.limit else None)

    def _follow_feed(self) -> None:
        """Count this connection as the user's (for the WebSocket notification channel) and
        pass on what is pushed into the user's feed from now on."""
        with self._lock:
            if self.state is ConnState.CLOSED:
                return
        # (The gateway's renewer keeps it counted from then on, with every other connection.)
        self._gateway.presence.user_connect(self._who.tenant_id, self._who.user_id,
                                            self.connection_id, self._notify_mode)
        feed = keys.user_feed(self._who.tenant_id, self._who.user_id)
        after = self._gateway.events.last_seq(feed)
        with self._lock:
            if self.state is not ConnState.CLOSED:
                self._feed = self._listener.follow(feed, after, self._on_feed_event)

    def _on_feed_event(self, event: StreamEvent) -> None:
        item = event.data["item"]
        if event.type is EventType.INBOX_ITEM_ADDED and \
                not admits(self._notify_mode, Criticality(item["criticality"])):
            return
        self.push(event.type.value, frames.InboxPush(item=item))

    # ── client tools ────────────────────────────────────────────────────
    def _client_tools_register(self, data: frames.ClientToolsRegister) -> frames.Wire:
        session = self._require_session()
        self._gateway.lifecycle.check_tool_host(self._who, session.id, self._fingerprint)
        count = self._gateway.client_tools.register(
            session.id, self.connection_id, [t.dump() for t in data.tools])
        return frames.ClientToolsRegistered(registered=count)

    def _tool_result(self, data: frames.ToolResultData) -> frames.Wire:
        if data.tool_call_id not in self._tool_calls:
            raise NotFound(f"no tool call {data.tool_call_id!r} is waiting for this connection")
        self._tool_calls.discard(data.tool_call_id)
        late = self._gateway.client_tools.deliver(data.tool_call_id, data.dump())
        if late is not None:  # the call timed out: the result goes to its caller's inbox
            self._gateway.sessions.tool_result(self._who, late.process_id, ToolResult(
                tool_call_id=data.tool_call_id, tool_name=late.tool_name,
                status=ToolCallStatus(data.status), result=data.result, error=data.error))
        return frames.ToolResultAccepted(late=late is not None)

    # ── events ──────────────────────────────────────────────────────────
    def _events_resume(self, data: frames.EventsResume) -> frames.EventsResumed:
        session = self._require_session()
        self._resume_after = data.last_seq
        return frames.EventsResumed(last_seq=self._gateway.events.last_seq(session.id))

    def _bind(self, session_id: str, last_seq: int,
              fingerprint: Fingerprint | None) -> frames.SessionBound:
        bound = self._gateway.lifecycle.bind(self._who, session_id, self.connection_id, fingerprint)
        with self._lock:
            if self.state is ConnState.CLOSED:
                left: str | None = session_id  # closed meanwhile: undo this binding
            else:
                previous = self.session
                left = previous.id if previous is not None and previous.id != session_id \
                    else None
                if left is not None and self._follow is not None:
                    self._listener.unfollow(self._follow)
                    self._follow = None
                self.state = self.state.to(ConnState.BOUND)
                self.session = bound.session
                self._fingerprint = fingerprint
                self._resume_after = last_seq
        if left is not None:
            self._leave(left)
        return frames.SessionBound(session=bound.session.dump(),
                                   chat_process_id=bound.session.chat_process_id,
                                   last_seq=self._gateway.events.last_seq(session_id),
                                   context_drift=bound.context_drift)

    def _leave(self, session_id: str) -> None:
        """Unbind a session this connection no longer holds (idempotent)."""
        try:
            self._gateway.client_tools.unregister(session_id, self.connection_id)
            self._gateway.lifecycle.unbind(self._who, session_id, self.connection_id)
        except Exception:  # the socket is gone either way; the sweeper will catch up
            log.exception("unbinding session %s failed", session_id)

    def _start_events(self) -> None:
        """After the reply went out: catch up from the requested seq, then live."""
        with self._lock:
            if self.state is ConnState.CLOSED:
                return
            session = self.session
            if self._follow is not None:
                self._listener.unfollow(self._follow)
                self._follow = None
        assert session is not None  # called only with a session bound
        after = self._resume_after
        first = self._gateway.events.missed(session.id, after)
        if first is not None:
            self._on_gap(Gap(session.id, after, first))
            after = first - 1
        self._live_after = self._gateway.events.last_seq(session.id)
        after = self._catch_up(session.id, after)
        with self._lock:
            if self.state is not ConnState.CLOSED:
                self._follow = self._listener.follow(session.id, after, self._on_event,
                                                     self._on_gap)

    def _catch_up(self, session_id: str, after: int) -> int:
        """Replay the logged events after ``after`` here, at the pace of this client's
        writer: a backlog of thousands must not reach the queue in one go, as it would
        from the listener. Pages of a quarter of the queue, each once the queue holds at
        most a quarter, leave half of it to live frames. Returns the last seq replayed."""
        page = max(1, self.OUTBOUND_QUEUE_MAX // 4)
        while events := self._gateway.events.read(session_id, after, count=page):
            with self._lock:
                room = self.outbound.wait_for_room(page, self.STALL_GRACE_SEC)
                if self.state is ConnState.CLOSED:
                    return after
            if not room:
                self._drop()
                return after
            for event in events:
                self._on_event(event)
            after = events[-1].seq
        return after

    def _on_gap(self, gap: Gap) -> None:
        """Events this client should have had are gone (trimmed, or lost with the log): it
        reloads the chat, and the events that follow come next. From the reader's thread
        (on resume) or the listener's."""
        self.push("events-gap", frames.EventsGap(session_id=gap.session_id,
                                                 requested_after=gap.requested_after,
                                                 first_available=gap.first_available))

    def _on_event(self, event: StreamEvent) -> None:
        if event.type is EventType.CLIENT_TOOL_REQUEST:
            # Addressed to one connection, and only live: a replayed request is stale.
            if event.data.get("connectionId") == self.connection_id and \
                    event.seq > self._live_after:
                self._tool_calls.add(event.data["toolCallId"])
                self.push("tool-call", frames.ToolCall(
                    tool_call_id=event.data["toolCallId"], tool_name=event.data["toolName"],
                    params=event.data["params"], timeout_sec=event.data["timeoutSec"]))
            return
        self._send("event", event.model_dump_json(by_alias=True))

    def _require_session(self) -> Session:
        if self.session is None:
            raise Conflict("no session bound: send session-create or session-resume first")
        return self.session

    # ── output ──────────────────────────────────────────────────────────
    def push(self, type: str, data: frames.Wire) -> None:
        self._send(type, data.dump())

    def _error(self, reply_to: str | None, code: str, message: str) -> None:
        self._send("error", frames.ErrorData(code=code, message=message).dump(), reply_to)

    def _send(self, type: str, data: dict[str, Any] | str,
              reply_to: str | None = None) -> None:
        """Queue a frame for the writer; never blocks. A client with ``OUTBOUND_QUEUE_MAX``
        frames waiting cannot keep up: it is dropped and resumes from its last seq."""
        text = _encode(type, data, reply_to)
        with self._lock:
            if self.state is ConnState.CLOSED or self.outbound.put(text):
                return
        self._drop()

    def _drop(self) -> None:
        log.info("dropping connection %s of user %s: it does not keep up with its frames",
                 self.connection_id, self._who.user_id)
        metrics.EVENTS_DROPPED.labels("slow-client").inc()
        self.close(TOO_SLOW, TOO_SLOW_MESSAGE)


def _encode(type: str, data: dict[str, Any] | str, reply_to: str | None = None) -> str:
    """An outgoing frame: ``frames.Envelope``'s JSON, written without building the model.
    ``data`` is JSON-ready already (a model's ``dump``), or JSON text (an event's
    ``model_dump_json``: one encoding instead of a dict and a ``json.dumps``)."""
    frame: dict[str, Any] = {"type": type} if reply_to is None else \
        {"type": type, "replyTo": reply_to}
    if isinstance(data, str):
        return f'{json.dumps(frame, separators=(",", ":"))[:-1]},"data":{data}}}'
    frame["data"] = data
    return json.dumps(frame, separators=(",", ":"))


def _parse_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    if cursor is None:
        return None
    at, sep, item_id = cursor.partition("|")
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        moment = None
    if not sep or not item_id or moment is None or moment.tzinfo is None:
        raise InvalidInput("cursor is not a nextCursor of inbox-list")
    return moment, item_id


def _request_id(body: Any) -> str | None:
    """The frame's ``id`` if it is text that an error frame can name, before validation."""
    rid = body.get("id") if isinstance(body, dict) else None
    return rid[:128] if isinstance(rid, str) and _valid_unicode(rid) else None


def _valid_unicode(body: Any) -> bool:
    """JSON may escape lone surrogates (``"\\ud800"``) that no UTF-8 text can hold."""
    try:
        json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


_STARTS_EVENTS = frozenset({"session-create", "session-resume", "events-resume"})
