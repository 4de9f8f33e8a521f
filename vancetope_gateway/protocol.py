"""The WebSocket protocol as a plain class: testable with any object that has
``receive(timeout=None) -> str | bytes | None`` and ``send(str)``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from enum import Enum
from typing import Any, Protocol

from pydantic import ValidationError

from vancetope_brain import __version__
from vancetope_brain.errors import Conflict, InvalidInput, RateLimited, VancetopeError
from vancetope_brain.events import EventListener, StreamEvent
from vancetope_brain.identity import Principal
from vancetope_brain.models import Session
from vancetope_brain.runtime import Brain
from vancetope_gateway import frames

log = logging.getLogger(__name__)


class Socket(Protocol):
    def receive(self, timeout: float | None = None) -> str | bytes | None: ...
    def send(self, data: str) -> None: ...


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
    """One authenticated client connection: requests in, replies and events out."""

    RATE_PER_SEC = 50.0
    RATE_BURST = 200

    def __init__(self, sock: Socket, principal: Principal, brain: Brain,
                 listener: EventListener, *, llm: str, max_frame_bytes: int) -> None:
        self._sock = sock
        self._who = principal
        self._brain = brain
        self._listener = listener
        self._llm = llm
        self._max_frame_bytes = max_frame_bytes
        self._send_lock = threading.Lock()
        self._bucket = TokenBucket(self.RATE_PER_SEC, self.RATE_BURST)
        self._follow: int | None = None
        self.state = ConnState.OPEN
        self.session: Session | None = None
        self._handlers: dict[str, Callable[[Any], frames.Wire]] = {
            "session-create": self._session_create,
            "session-resume": self._session_resume,
            "session-list": self._session_list,
            "process-steer": self._process_steer,
            "chat-history": self._chat_history,
            "ping": lambda _: frames.Pong(),
        }

    # ── loop ────────────────────────────────────────────────────────────
    def run(self) -> None:
        """Serve until the client goes away."""
        self.push("welcome", frames.Welcome(
            server_version=__version__, tenant_id=self._who.tenant_id,
            user_id=self._who.user_id, llm=self._llm, max_frame_bytes=self._max_frame_bytes))
        try:
            while self.state is not ConnState.CLOSED:
                raw = self._sock.receive()
                if raw is None:
                    break
                self.handle(raw)
        finally:
            self.close()

    def close(self) -> None:
        if self.state is ConnState.CLOSED:
            return
        if self._follow is not None:
            self._listener.unfollow(self._follow)
        self.state = self.state.to(ConnState.CLOSED)

    def handle(self, raw: str | bytes) -> None:
        """Answer one frame: exactly one reply or error; never raises for bad input."""
        request_id = None
        try:
            if isinstance(raw, bytes):
                raise InvalidInput("binary frames are not part of the protocol; send JSON text")
            if len(raw.encode()) > self._max_frame_bytes:
                raise InvalidInput(f"frame larger than {self._max_frame_bytes} bytes")
            try:
                body = json.loads(raw)
            except ValueError as e:
                raise _ProtocolError("bad_json", f"frame is not valid JSON: {e}") from e
            if isinstance(body, dict) and isinstance(body.get("id"), str):
                request_id = body["id"][:128]
            envelope = frames.Envelope.model_validate(body)
            request_id = envelope.id
            if not self._bucket.take():
                raise RateLimited(f"more than {self.RATE_PER_SEC:g} frames/s; slow down")
            model = frames.REQUESTS.get(envelope.type)
            if model is None:
                raise _ProtocolError("unknown_type", f"unknown frame type {envelope.type!r}; "
                                     f"known: {', '.join(sorted(frames.REQUESTS))}")
            if envelope.id is None:
                raise InvalidInput("requests need an 'id' so the reply can name it")
            data = model.model_validate(envelope.data)
            reply = self._handlers[envelope.type](data)
            self._send(frames.Envelope(type=envelope.type, reply_to=envelope.id,
                                       data=reply.dump()))
            if envelope.type in ("session-create", "session-resume"):
                self._start_events()
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(map(str, err["loc"])) or "frame"
            self._error(request_id, "invalid_input", f"{where}: {err['msg']}")
        except _ProtocolError as e:
            self._error(request_id, e.code, str(e))
        except VancetopeError as e:
            self._error(request_id, e.code, str(e))
        except Exception:
            log.exception("unexpected error handling a frame")
            self._error(request_id, "internal", "internal error; the server log has details")

    # ── handlers ────────────────────────────────────────────────────────
    def _session_create(self, data: frames.SessionCreate) -> frames.SessionBound:
        session = self._brain.sessions.create_interactive(self._who, data.title)
        return self._bind(session, 0)

    def _session_resume(self, data: frames.SessionResume) -> frames.SessionBound:
        session = self._brain.sessions.get(self._who, data.session_id)
        return self._bind(session, data.last_seq)

    def _session_list(self, _: frames.SessionList) -> frames.SessionsListed:
        return frames.SessionsListed(sessions=[s.dump() for s in self._brain.sessions.list_sessions(self._who)])

    def _process_steer(self, data: frames.ProcessSteer) -> frames.SteerAccepted:
        session = self._require_session()
        process = self._brain.sessions.process(self._who, data.target_think_process_id)
        if process.session_id != session.id:
            raise Conflict("the target process belongs to another session; resume that one")
        message, created = self._brain.sessions.steer(
            self._who, process.id, data.content, data.idempotency_key)
        return frames.SteerAccepted(message_id=message.id, seq=message.seq, duplicate=not created)

    def _chat_history(self, data: frames.ChatHistory) -> frames.ChatPage:
        lines = self._brain.sessions.chat_history(self._who, data.process_id,
                                                  before_seq=data.before_seq, limit=data.limit)
        return frames.ChatPage(messages=[line.dump() for line in lines])

    # ── events ──────────────────────────────────────────────────────────
    def _bind(self, session: Session, last_seq: int) -> frames.SessionBound:
        if self._follow is not None:
            self._listener.unfollow(self._follow)
            self._follow = None
        self.session = session
        self._resume_after = last_seq
        self.state = self.state.to(ConnState.BOUND)
        return frames.SessionBound(session=session.dump(), chat_process_id=session.chat_process_id,
                                   last_seq=self._brain.events.last_seq(session.id))

    def _start_events(self) -> None:
        """After the reply went out: catch up from the requested seq, then live."""
        assert self.session is not None
        after = self._resume_after
        first = self._brain.events.missed(self.session.id, after)
        if first is not None:
            self.push("events-gap", frames.EventsGap(
                session_id=self.session.id, requested_after=after, first_available=first))
            after = first - 1
        self._follow = self._listener.follow(self.session.id, after, self._on_event)

    def _on_event(self, event: StreamEvent) -> None:
        self._send(frames.Envelope(type="event", data=event.dump()))

    def _require_session(self) -> Session:
        if self.session is None:
            raise Conflict("no session bound: send session-create or session-resume first")
        return self.session

    # ── output ──────────────────────────────────────────────────────────
    def push(self, type: str, data: frames.Wire) -> None:
        self._send(frames.Envelope(type=type, data=data.dump()))

    def _error(self, reply_to: str | None, code: str, message: str) -> None:
        self._send(frames.Envelope(type="error", reply_to=reply_to,
                                   data=frames.ErrorData(code=code, message=message).dump()))

    def _send(self, envelope: frames.Envelope) -> None:
        text = json.dumps(envelope.model_dump(mode="json", by_alias=True, exclude_none=True),
                          separators=(",", ":"))
        with self._send_lock:
            if self.state is ConnState.CLOSED:
                return
            try:
                self._sock.send(text)
            except Exception:
                log.info("send failed; the client is gone")
                self.close()


class _ProtocolError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
