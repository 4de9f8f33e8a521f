"""Session frames: create, resume, list, search, read, suspend, close and rename a session,
replay its events (``events-resume``), and ``ping``."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from vancetope_brain.engines import shown_process
from vancetope_brain.models import Fingerprint, OnDisconnect, Session, SessionStatus, SessionType
from vancetope_brain.models.base import Wire
from vancetope_brain.models.conversation import MAX_HITS, MAX_QUERY_CHARS, ConversationHit
from vancetope_brain.sessions.service import PAGE_LIMIT, PAGE_LIMIT_MAX
from vancetope_brain.sessions.titles import TITLE_MAX
from vancetope_gateway.handlers.declare import Context, Empty, Id, frame


class SessionCreate(Wire):
    """Create a session and bind this connection to it. INTERACTIVE sessions get a chat
    process (engine from ``session.defaultChatEngine``); AUTONOMOUS ones get none."""

    title: str = Field(default="", max_length=TITLE_MAX)
    type: SessionType = SessionType.INTERACTIVE
    project_id: str = Field(default="default", min_length=1, max_length=64)
    on_disconnect: OnDisconnect = OnDisconnect.SUSPEND
    idle_timeout_sec: int = Field(default=1800, ge=10, le=30 * 86400)
    fingerprint: Fingerprint | None = None


class SessionResume(Wire):
    """Bind this connection to an existing session (resuming it if SUSPENDED) and replay
    the events after ``lastSeq``. The fingerprint is checked (think-engines §6)."""

    session_id: str = Id
    last_seq: int = Field(default=0, ge=0)
    fingerprint: Fingerprint | None = None


class SessionList(Wire):
    """A page of the caller's sessions, newest first, optionally of one status; ``cursor``:
    the ``nextCursor`` of the previous page (asked with the same ``status``)."""

    status: SessionStatus | None = None
    cursor: str | None = Field(default=None, min_length=1, max_length=64)
    limit: int = Field(default=PAGE_LIMIT, ge=1, le=PAGE_LIMIT_MAX)


class SessionRef(Wire):
    """Names a session of the caller (``session-get``, ``session-suspend``, ``session-close``)."""

    session_id: str = Id


class SessionRename(Wire):
    """Give a session of the caller a title (in any status); runs of spaces and line breaks
    become one space. An untitled session is titled from the user's first message."""

    session_id: str = Id
    title: str = Field(min_length=1, max_length=TITLE_MAX)


class SessionFind(Wire):
    """Find the caller's own sessions by words of a title or of a chat line (what the user
    and Arthur said) of those not CLOSED: every word must be there, case and Latin accents
    aside; nothing typed is query syntax (docs/architecture.md, "Memory and knowledge")."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    limit: int = Field(default=20, ge=1, le=MAX_HITS)


class EventsResume(Wire):
    """Replay the bound session's events after ``lastSeq``, then continue live."""

    last_seq: int = Field(ge=0)


class SessionBound(Wire):
    """Reply to ``session-create`` / ``session-resume``: the session, its chat process, the
    session's current last event ``seq`` (events after the requested ``lastSeq`` follow),
    and whether its processes were left SUSPENDED because the working directory changed."""

    session: dict[str, Any]
    chat_process_id: str | None
    last_seq: int
    context_drift: bool = False


class SessionsListed(Wire):
    """Reply to ``session-list``: a page of sessions; ``nextCursor`` when more follow."""

    sessions: list[dict[str, Any]]
    next_cursor: str | None = None


class SessionDetail(Wire):
    """Reply to ``session-get`` / ``session-suspend`` / ``session-close`` /
    ``session-rename``: the session and all its processes."""

    session: dict[str, Any]
    processes: list[dict[str, Any]]


class SessionsFound(Wire):
    """Reply to ``session-search``: title hits first (``seq`` null), then chat lines, newest
    first; each snippet's parts mark the words found (text, never markup)."""

    hits: list[ConversationHit]


class EventsResumed(Wire):
    """Reply to ``events-resume``: the session's current last ``seq``; the missed events follow."""

    last_seq: int


class Pong(Wire):
    """Reply to ``ping``."""


@frame("session-create", starts_events=True)
def session_create(conn: Context, data: SessionCreate) -> SessionBound:
    session = conn.gateway.sessions.create(
        conn.who, type=data.type, title=data.title, project_id=data.project_id,
        on_disconnect=data.on_disconnect, idle_timeout_sec=data.idle_timeout_sec)
    return _bind(conn, session.id, 0, data.fingerprint)


@frame("session-resume", starts_events=True)
def session_resume(conn: Context, data: SessionResume) -> SessionBound:
    return _bind(conn, data.session_id, data.last_seq, data.fingerprint)


@frame("session-list")
def session_list(conn: Context, data: SessionList) -> SessionsListed:
    page = conn.gateway.sessions.list_sessions(conn.who, status=data.status,
                                               cursor=data.cursor, limit=data.limit)
    return SessionsListed(sessions=[s.dump() for s in page.sessions],
                          next_cursor=page.next_cursor)


@frame("session-get")
def session_get(conn: Context, data: SessionRef) -> SessionDetail:
    return _detail(conn, conn.gateway.sessions.get(conn.who, data.session_id))


@frame("session-suspend")
def session_suspend(conn: Context, data: SessionRef) -> SessionDetail:
    return _detail(conn, conn.gateway.lifecycle.suspend(conn.who, data.session_id))


@frame("session-close")
def session_close(conn: Context, data: SessionRef) -> SessionDetail:
    return _detail(conn, conn.gateway.lifecycle.close(conn.who, data.session_id))


@frame("session-rename")
def session_rename(conn: Context, data: SessionRename) -> SessionDetail:
    return _detail(conn, conn.gateway.sessions.rename(conn.who, data.session_id, data.title))


@frame("session-search")
def session_search(conn: Context, data: SessionFind) -> SessionsFound:
    return SessionsFound(hits=conn.gateway.sessions.search(conn.who, data.query, data.limit))


@frame("events-resume", starts_events=True)
def events_resume(conn: Context, data: EventsResume) -> EventsResumed:
    session = conn.require_session()
    conn.resume_events_after(data.last_seq)
    return EventsResumed(last_seq=conn.gateway.events.last_seq(session.id))


@frame("ping")
def ping(conn: Context, data: Empty) -> Pong:
    return Pong()


def _bind(conn: Context, session_id: str, last_seq: int,
          fingerprint: Fingerprint | None) -> SessionBound:
    bound = conn.bind(session_id, last_seq, fingerprint)
    return SessionBound(session=bound.session.dump(),
                        chat_process_id=bound.session.chat_process_id,
                        last_seq=conn.gateway.events.last_seq(session_id),
                        context_drift=bound.context_drift)


def _detail(conn: Context, session: Session) -> SessionDetail:
    processes = conn.gateway.sessions.processes(conn.who, session.id)
    return SessionDetail(session=session.dump(),
                         processes=[shown_process(p) for p in processes])
