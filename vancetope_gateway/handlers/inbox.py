"""Inbox frames: list the caller's items, read one, answer, delegate, dismiss, archive it or
revoke its auto-answer, the pending summary, and the tenant's users (whom an item can be
delegated to)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models.base import Wire
from vancetope_brain.models.inbox import Criticality, InboxItem, ItemStatus, Outcome
from vancetope_gateway.handlers.declare import Context, Empty, Id, frame

Tag = Annotated[str, Field(min_length=1, max_length=64)]


class InboxList(Wire):
    """The caller's Inbox (items assigned to them), newest first. ``status`` defaults to
    everything but ARCHIVED; ``tags``: items carrying every one; ``cursor``: the
    ``nextCursor`` of the previous page."""

    status: list[ItemStatus] | None = Field(default=None, max_length=4)
    criticality: list[Criticality] | None = Field(default=None, max_length=3)
    tags: list[Tag] = Field(default_factory=list, max_length=20)
    session_id: str | None = Field(default=None, min_length=1, max_length=64)
    cursor: str | None = Field(default=None, min_length=1, max_length=200)
    limit: int = Field(default=50, ge=1, le=200)


class InboxItemRef(Wire):
    """Names an item assigned to (or created by) the caller (``inbox-item``,
    ``inbox-archive``, ``inbox-revoke-auto-answer``)."""

    item_id: str = Id


class InboxAnswerData(Wire):
    """Answer an ask assigned to the caller: DECIDED with the type's ``value``
    (user-interaction.txt §6), or INSUFFICIENT_INFO / UNDECIDABLE with a ``reason``."""

    item_id: str = Id
    outcome: Outcome
    value: Any = None
    reason: str | None = Field(default=None, min_length=1, max_length=10_000)


class InboxDelegate(Wire):
    """Hand a PENDING item to another user of the same tenant (they are notified)."""

    item_id: str = Id
    to_user_id: str = Id
    note: str | None = Field(default=None, max_length=2000)


class InboxDismiss(Wire):
    """Click a PENDING item away unanswered; an ask's process gets a skip answer."""

    item_id: str = Id
    note: str | None = Field(default=None, max_length=2000)


class UserList(Wire):
    """The users of the caller's tenant (another tenant's are never listed), oldest first:
    ``id`` and ``name`` only. ``query``: those whose id or name contains it (any case);
    ``cursor``: the ``nextCursor`` of the previous page."""

    query: str | None = Field(default=None, max_length=200)
    cursor: str | None = Field(default=None, min_length=1, max_length=64)
    limit: int = Field(default=50, ge=1, le=200)


class InboxPendingSummary(Wire):
    """Right after ``welcome``, and the reply to ``inbox-summary``: the caller's PENDING
    items at a glance (user-interaction.txt §12.5). The Inbox is the truth; pushes only
    speed things up."""

    total_pending: int
    by_criticality: dict[str, int]
    oldest_pending_at: str | None = None


class InboxListed(Wire):
    """Reply to ``inbox-list``: items as the user sees them; ``nextCursor`` when more
    follow."""

    items: list[dict[str, Any]]
    next_cursor: str | None = None


class InboxItemReply(Wire):
    """Reply to ``inbox-item`` and the item commands: the item as it is now."""

    item: dict[str, Any]


class UserEntry(Wire):
    """One user of the tenant as another user sees them (never a token)."""

    id: str
    name: str


class UsersListed(Wire):
    """Reply to ``user-list``: a page of the tenant's users; ``nextCursor`` when more
    follow."""

    users: list[UserEntry]
    next_cursor: str | None = None


@frame("inbox-list")
def inbox_list(conn: Context, data: InboxList) -> InboxListed:
    inbox = conn.gateway.inbox
    items = inbox.list(conn.who, statuses=data.status, criticalities=data.criticality,
                       tags=data.tags, session_id=data.session_id,
                       before=_parse_cursor(data.cursor), limit=data.limit + 1)
    page = items[:data.limit]
    cursor = f"{page[-1].created_at.isoformat()}|{page[-1].id}" \
        if len(items) > data.limit else None
    return InboxListed(items=[inbox.view(i) for i in page], next_cursor=cursor)


@frame("inbox-item")
def inbox_item(conn: Context, data: InboxItemRef) -> InboxItemReply:
    return _item(conn, conn.gateway.inbox.get(conn.who, data.item_id))


@frame("inbox-answer")
def inbox_answer(conn: Context, data: InboxAnswerData) -> InboxItemReply:
    return _item(conn, conn.gateway.inbox.answer(conn.who, data.item_id, data.outcome,
                                                 value=data.value, reason=data.reason))


@frame("inbox-delegate")
def inbox_delegate(conn: Context, data: InboxDelegate) -> InboxItemReply:
    return _item(conn, conn.gateway.inbox.delegate(conn.who, data.item_id, data.to_user_id,
                                                   data.note))


@frame("inbox-dismiss")
def inbox_dismiss(conn: Context, data: InboxDismiss) -> InboxItemReply:
    return _item(conn, conn.gateway.inbox.dismiss(conn.who, data.item_id, data.note))


@frame("inbox-archive")
def inbox_archive(conn: Context, data: InboxItemRef) -> InboxItemReply:
    return _item(conn, conn.gateway.inbox.archive(conn.who, data.item_id))


@frame("inbox-revoke-auto-answer")
def inbox_revoke_auto_answer(conn: Context, data: InboxItemRef) -> InboxItemReply:
    return _item(conn, conn.gateway.inbox.revoke_auto_answer(conn.who, data.item_id))


@frame("inbox-summary")
def inbox_summary(conn: Context, data: Empty) -> InboxPendingSummary:
    return InboxPendingSummary.model_validate(conn.gateway.inbox.pending_summary(conn.who))


@frame("user-list")
def user_list(conn: Context, data: UserList) -> UsersListed:
    users = conn.gateway.identity.list_users(conn.who.tenant_id)
    if data.cursor is not None:
        at = next((i for i, u in enumerate(users) if u.id == data.cursor), None)
        if at is None:
            raise InvalidInput("cursor is not a nextCursor of user-list")
        users = users[at + 1:]
    if data.query:
        needle = data.query.casefold()
        users = [u for u in users if needle in u.id.casefold() or needle in u.name.casefold()]
    page = users[:data.limit]
    return UsersListed(users=[UserEntry(id=u.id, name=u.name) for u in page],
                       next_cursor=page[-1].id if len(users) > data.limit else None)


def _item(conn: Context, item: InboxItem) -> InboxItemReply:
    return InboxItemReply(item=conn.gateway.inbox.view(item))


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
