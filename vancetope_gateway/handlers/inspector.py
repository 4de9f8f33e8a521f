"""The inspector's frames (issue 32, part 2): the turn records of one of the caller's
processes — what its model was given and answered, its tool calls, tokens and timings
(``models/inspector.py``). A record of another user's process reads as missing."""

from __future__ import annotations

from pydantic import Field

from vancetope_brain.errors import NotFound
from vancetope_brain.models.base import Wire
from vancetope_brain.models.inspector import TurnInspection
from vancetope_gateway.handlers.declare import Context, Id, frame

PAGE_MAX = 100
"""The most records one ``turn-list`` reply holds."""


class TurnListQuery(Wire):
    """The turns of one of the caller's processes, newest first: ``limit`` of them after
    ``cursor`` (the previous page's ``nextCursor``)."""

    process_id: str = Id
    limit: int = Field(default=20, ge=1, le=PAGE_MAX)
    cursor: str | None = Field(default=None, max_length=100)


class TurnList(Wire):
    """Reply to ``turn-list``: each turn without its steps and tools (``turn-get`` has
    them); ``nextCursor`` null on the last page."""

    turns: list[TurnInspection]
    next_cursor: str | None


class TurnRef(Wire):
    """One turn: its id, as ``turn-list`` gives it and a chat line's ``meta.turn`` names it."""

    turn_id: str = Id


class TurnDetail(Wire):
    """Reply to ``turn-get``: the whole record (its texts cut to the record's caps, secrets
    redacted)."""

    turn: TurnInspection


@frame("turn-list")
def turn_list(conn: Context, data: TurnListQuery) -> TurnList:
    process = conn.gateway.sessions.process(conn.who, data.process_id)
    turns, cursor = conn.gateway.inspections.page(process.tenant_id, process.id, data.cursor,
                                                  data.limit)
    return TurnList(turns=turns, next_cursor=cursor)


@frame("turn-get")
def turn_get(conn: Context, data: TurnRef) -> TurnDetail:
    record = conn.gateway.inspections.get(conn.who.tenant_id, data.turn_id)
    try:
        conn.gateway.sessions.process(conn.who, record.process_id)
    except NotFound:  # another user's turn reads exactly like a missing one
        raise NotFound(f"turn {data.turn_id} not found") from None
    return TurnDetail(turn=record)
