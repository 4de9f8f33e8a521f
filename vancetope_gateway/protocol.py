"""The WebSocket protocol as a plain class, served by the socket hub (``hub.py``): the hub
calls ``open`` once and then ``handle`` per frame, and drains the connection's
``outbound`` queue into the socket whenever the ``Socket``'s ``pump`` is called.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Protocol

import redis
from pydantic import ValidationError

from vancetope_brain import __version__, keys
from vancetope_brain.errors import (
    REDIS_DOWN,
    BadJson,
    Conflict,
    InvalidInput,
    RateLimited,
    RuntimeFailure,
    Unauthorized,
    UnknownFrameType,
    VancetopeError,
)
from vancetope_brain.events import EventListener, EventType, Gap, LiveEvent
from vancetope_brain.identity import Principal
from vancetope_brain.models import Fingerprint, Session
from vancetope_brain.models.inbox import Criticality
from vancetope_brain.notifications import admits
from vancetope_brain.observability import metrics, tracing
from vancetope_brain.schemas import nested_deeper
from vancetope_brain.sessions.lifecycle import Bound
from vancetope_gateway import frames
from vancetope_gateway.handlers import FRAMES, Frame
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
    """The hub's handle on one socket (``hub.HubSocket``)."""

    def pump(self) -> None:
        """Frames were queued in ``outbound``: the hub takes them (``Outbound.take``)."""

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
    """One authenticated client connection: requests in, replies and events out. It holds
    the transport and the connection's state; what each request does is its handler's
    (``vancetope_gateway.handlers``).

    Threads: the one serving its frames (``handle``, one frame at a time; it also
    replays missed events: a thread of the hub's pool), the gateway's event listener
    (live events and feed pushes), the hub's thread, draining ``Outbound`` (every frame
    goes out there, in order), and the presence renewer.
    ``_lock`` guards ``state``, ``session``, the follow handles and the outbound queue,
    and is held only for steps in memory, never across I/O, so the listener never waits
    for anybody's Redis, store or socket. ``bind`` and ``_start_events`` do their I/O
    first and commit under the lock only if the connection is still open (``bind``
    undoes its binding otherwise). ``close`` may come from any thread; after it the
    hub sends the close frame and ``_release`` runs exactly once.
    """

    # Frames waiting for one client; one more and it is dropped (close 1013). Live events
    # come at the pace of turns; a catch-up fills at most half of it (``_catch_up``).
    OUTBOUND_QUEUE_MAX = 1000
    # How long the gateway waits on a client that does not read: a catch-up waiting for
    # room in its queue (then it is dropped), or a closed connection's queue still not
    # drained, which cannot get the close frame out (then the TCP connection
    # is cut).
    STALL_GRACE_SEC = 10.0
    # The request types it answers, each with its models and its handler, which gets the
    # connection as its ``handlers.Context``.
    _handlers: Mapping[str, Frame] = FRAMES

    def __init__(self, sock: Socket, principal: Principal, gateway: Gateway,
                 listener: EventListener, *, llm: str, max_frame_bytes: int,
                 notify_mode: frames.NotifyMode = "all", frame_rate: float = 50.0,
                 frame_burst: int = 200, connection_id: str | None = None,
                 authorized: Callable[[], bool] = lambda: True) -> None:
        """``frame_rate`` / ``frame_burst``: ``VANCETOPE_FRAME_RATE`` / ``_BURST``.
        ``connection_id``: the id the gateway already counted the connection under (its
        per-user slot in presence); a new one by default. ``authorized`` says whether
        the socket's token still holds (``TokenWatch``); it is asked before each request
        is served."""
        self.connection_id = connection_id or uuid.uuid4().hex
        self.who = principal
        self.gateway = gateway
        self._listener = listener
        self._llm = llm
        self._max_frame_bytes = max_frame_bytes
        self._notify_mode = notify_mode
        self._authorized = authorized
        self._lock = threading.Lock()
        self.outbound = Outbound(sock, self._lock, limit=self.OUTBOUND_QUEUE_MAX,
                                 grace=self.STALL_GRACE_SEC,
                                 on_closed=self._release)
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
        self.fingerprint: Fingerprint | None = None  # what this connection bound with

    # ── lifecycle ───────────────────────────────────────────────────────
    def open(self) -> None:
        """Greet the client (``welcome``, the Inbox summary) and follow the user's feed."""
        counts = self.gateway.sessions.count_sessions(self.who)
        self.push("welcome", frames.Welcome(
            server_version=__version__, tenant_id=self.who.tenant_id,
            user_id=self.who.user_id, llm=self._llm,
            max_frame_bytes=self._max_frame_bytes, notify_mode=self._notify_mode,
            sessions={status.value: count for status, count in counts.items()}))
        self._follow_feed()
        self.push("inbox-pending-summary", frames.InboxPendingSummary.model_validate(
            self.gateway.inbox.pending_summary(self.who)))

    def close(self, code: int | None = None, message: str = "", *,
              last_frame: str | None = None) -> None:
        """Go CLOSED, from any thread, without blocking: events stop, frames still queued
        are discarded, and the hub sends ``last_frame`` (if given), the close frame (if
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
                 self.connection_id, self.who.user_id)
        self.close(REVOKED, REVOKED_MESSAGE, last_frame=error)

    def _release(self) -> None:
        """After the connection's last frame (``Outbound.finish``): forget the socket's binding (if it was its
        session's last client, the session's ``onDisconnect`` policy applies) and presence."""
        with self._lock:
            session, self.session = self.session, None
        if session is not None:
            self._leave(session.id)
        try:
            self.gateway.presence.user_disconnect(self.who.tenant_id, self.who.user_id,
                                                 self.connection_id, self._notify_mode)
        except Exception:  # its presence entry expires on its own
            log.exception("forgetting connection %s of user %s failed",
                          self.connection_id, self.who.user_id)

    def presence(self) -> tuple[tuple[str, str, str, str], tuple[str, str, str] | None] | None:
        """What keeps this connection counted as present (``Presence.renew_all``: the user's
        entry, and the bound session's), None once closed."""
        with self._lock:
            if self.state is ConnState.CLOSED:
                return None
            session = self.session
        user = (self.who.tenant_id, self.who.user_id, self.connection_id, self._notify_mode)
        return user, None if session is None else \
            (self.who.tenant_id, session.id, self.connection_id)

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
            frame = self._handlers.get(envelope.type)
            if frame is None:
                raise UnknownFrameType(f"unknown frame type {envelope.type!r}; "
                                       f"known: {', '.join(sorted(self._handlers))}")
            if envelope.id is None:
                raise InvalidInput("requests need an 'id' so the reply can name it")
            data = frame.request.model_validate(envelope.data)
            with tracing.span(f"ws {envelope.type}", frame=envelope.type):
                reply = frame.handler(self, data)
            self._send(envelope.type, reply.dump(), envelope.id)
            if frame.starts_events:
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
                     self.connection_id, self.who.user_id)
            self.close(POLICY_VIOLATION, "too many frames")
            return
        self._error(None, RateLimited.code, f"more than {self._rate:g} frames/s: a frame was "
                    f"dropped unread; slow down")

    def _close_too_big(self) -> None:
        """Close with 1009 (message too big), as the socket does for larger frames."""
        self.close(1009, f"frame larger than {self._max_frame_bytes} bytes")

    def _follow_feed(self) -> None:
        """Count this connection as the user's (for the WebSocket notification channel) and
        pass on what is pushed into the user's feed from now on."""
        with self._lock:
            if self.state is ConnState.CLOSED:
                return
        # (The gateway's renewer keeps it counted from then on, with every other connection.)
        self.gateway.presence.user_connect(self.who.tenant_id, self.who.user_id,
                                            self.connection_id, self._notify_mode)
        feed = keys.user_feed(self.who.tenant_id, self.who.user_id)
        after = self.gateway.events.last_seq(feed)
        with self._lock:
            if self.state is not ConnState.CLOSED:
                self._feed = self._listener.follow(feed, after, self._on_feed_event)

    def _on_feed_event(self, live: LiveEvent) -> None:
        event = live.decoded()
        if event.type in (EventType.DOCUMENT_UPDATED, EventType.DOCUMENT_DELETED):
            self.push(event.type.value, frames.DocumentPush(document=event.data["document"]))
            return
        item = event.data["item"]
        if event.type is EventType.INBOX_ITEM_ADDED and \
                not admits(self._notify_mode, Criticality(item["criticality"])):
            return
        self.push(event.type.value, frames.InboxPush(item=item))

    # ── events ──────────────────────────────────────────────────────────
    # ── connection state, for the handlers (``handlers.Context``) ─────────
    def bind(self, session_id: str, last_seq: int, fingerprint: Fingerprint | None) -> Bound:
        """Bind this connection to a session (leaving the one it held); after the reply, its
        events after ``last_seq`` follow (the frame ``starts_events``)."""
        bound = self.gateway.lifecycle.bind(self.who, session_id, self.connection_id, fingerprint)
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
                self.fingerprint = fingerprint
                self._resume_after = last_seq
        if left is not None:
            self._leave(left)
        return bound

    def resume_events_after(self, last_seq: int) -> None:
        """After the reply, the bound session's events after ``last_seq`` follow (the frame
        ``starts_events``)."""
        self._resume_after = last_seq

    def answer_tool_call(self, tool_call_id: str) -> bool:
        """Whether a ``tool-call`` with this id went to this client unanswered; from now on
        it counts as answered."""
        if tool_call_id not in self._tool_calls:
            return False
        self._tool_calls.discard(tool_call_id)
        return True

    def _leave(self, session_id: str) -> None:
        """Unbind a session this connection no longer holds (idempotent)."""
        try:
            self.gateway.client_tools.unregister(session_id, self.connection_id)
            self.gateway.lifecycle.unbind(self.who, session_id, self.connection_id)
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
        first = self.gateway.events.missed(session.id, after)
        if first is not None:
            self._on_gap(Gap(session.id, after, first))
            after = first - 1
        self._live_after = self.gateway.events.last_seq(session.id)
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
        while events := self.gateway.events.read_live(session_id, after, count=page):
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

    def _on_event(self, live: LiveEvent) -> None:
        if live.type is EventType.CLIENT_TOOL_REQUEST:
            event = live.decoded()
            # Addressed to one connection, and only live: a replayed request is stale.
            if event.data.get("connectionId") == self.connection_id and \
                    event.seq > self._live_after:
                self._tool_calls.add(event.data["toolCallId"])
                self.push("tool-call", frames.ToolCall(
                    tool_call_id=event.data["toolCallId"], tool_name=event.data["toolName"],
                    params=event.data["params"], timeout_sec=event.data["timeoutSec"]))
            return
        self._queue(_EVENT_FRAME_HEAD + live.json() + "}")

    def require_session(self) -> Session:
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
        """Queue a frame for the hub; never blocks. A client with ``OUTBOUND_QUEUE_MAX``
        frames waiting cannot keep up: it is dropped and resumes from its last seq."""
        self._queue(_encode(type, data, reply_to))

    def _queue(self, text: str) -> None:
        with self._lock:
            if self.state is ConnState.CLOSED or self.outbound.put(text):
                return
        self._drop()

    def _drop(self) -> None:
        log.info("dropping connection %s of user %s: it does not keep up with its frames",
                 self.connection_id, self.who.user_id)
        metrics.EVENTS_DROPPED.labels("slow-client").inc()
        self.close(TOO_SLOW, TOO_SLOW_MESSAGE)


_EVENT_FRAME_HEAD = '{"type":"event","data":'
"""What ``_encode("event", data)`` writes before ``data`` (and a ``}`` after): the listener
frames each live event without a ``json.dumps`` of the envelope."""


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

