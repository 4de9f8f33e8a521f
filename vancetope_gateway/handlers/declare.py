"""How a frame is declared: once, by decorating its handler.

``@frame("session-get")`` on ``def session_get(conn: Context, data: SessionRef) ->
SessionDetail`` registers the frame type with its request model (the ``data`` parameter's
type) and its reply model (the return type) in ``FRAMES``. Everything else is derived from
that table: the dispatch of ``protocol.Connection``, ``frames.REQUESTS`` / ``REPLIES``, the
JSON Schemas in ``docs/schemas/``, the frame list of ``docs/protocol.md`` and the web
client's TypeScript types. A name declared twice fails at import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, get_type_hints

from pydantic import Field

from vancetope_brain.identity import Principal
from vancetope_brain.models import Fingerprint, Session
from vancetope_brain.models.base import Wire
from vancetope_brain.sessions.lifecycle import Bound
from vancetope_gateway.parts import Gateway

Id = Field(min_length=1, max_length=64)


class Empty(Wire):
    """No data (``ping``, ``think-engines-list``, ``thinkengines-list``)."""


class Context(Protocol):
    """What a handler sees of the connection serving its frame (``protocol.Connection``):
    who sent it, the gateway's parts, and the few steps that change the connection's state."""

    @property
    def who(self) -> Principal: ...
    @property
    def gateway(self) -> Gateway: ...
    @property
    def connection_id(self) -> str: ...
    @property
    def fingerprint(self) -> Fingerprint | None:
        """The fingerprint the bound session was bound with."""

    def require_session(self) -> Session:
        """The bound session; ``conflict`` without one."""

    def bind(self, session_id: str, last_seq: int, fingerprint: Fingerprint | None) -> Bound:
        """Bind this connection to a session; its events after ``last_seq`` follow the reply."""

    def resume_events_after(self, last_seq: int) -> None:
        """The events after ``last_seq`` follow the reply (``starts_events``)."""

    def answer_tool_call(self, tool_call_id: str) -> bool:
        """Whether ``tool_call_id`` was sent to this connection and is unanswered; it is
        answered from now on."""


@dataclass(frozen=True)
class Frame:
    """One request type: its ``data`` model, its reply's, and the handler that answers it.
    ``starts_events``: after the reply, the bound session's events flow (from the seq the
    handler asked for)."""

    name: str
    request: type[Wire]
    reply: type[Wire]
    handler: Callable[[Context, Any], Wire]
    starts_events: bool = False


FRAMES: dict[str, Frame] = {}
"""Every request type, in the order declared; complete once ``vancetope_gateway.handlers``
is imported."""

H = TypeVar("H", bound=Callable[..., Wire])


def declare(frame: Frame) -> None:
    """Add a frame to ``FRAMES``; a name declared twice is a bug, refused at import."""
    if frame.name in FRAMES:
        raise ValueError(f"frame type {frame.name!r} is declared twice")
    FRAMES[frame.name] = frame


def frame(name: str, *, starts_events: bool = False) -> Callable[[H], H]:
    """Declare the frame ``name`` answered by the decorated ``handler(conn, data) -> Reply``:
    its request and reply models are the annotations of ``data`` and of the return."""
    def register(handler: H) -> H:
        hints = get_type_hints(handler)
        declare(Frame(name, hints["data"], hints["return"], handler, starts_events))
        return handler
    return register
