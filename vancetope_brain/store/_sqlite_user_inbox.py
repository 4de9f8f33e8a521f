"""The SQLite adapter's user Inbox and notification delivery log (tables of schema 5).

An ``inbox_items`` row holds the whole ``InboxItem`` in ``doc``; its other
columns are copies of document fields for the indexes, rewritten with ``doc``
by every save. A ``notification_deliveries`` row likewise; ``finish_delivery``
rewrites its ``status`` and ``doc`` together. Each write is one
``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import InboxMessage
from vancetope_brain.models.inbox import (
    DeliveryStatus,
    InboxItem,
    InboxQuery,
    ItemStatus,
    NotificationDelivery,
)
from vancetope_brain.store._sqlite_db import from_ms, load_one, to_ms

_ITEM_COLUMNS = ("assigned_to", "status", "criticality", "origin_process_id",
                 "origin_session_id", "idempotency_key", "created_ms", "resolved_ms", "revision",
                 "doc")
_INSERT_ITEM = (f"INSERT INTO inbox_items (id, tenant_id, {', '.join(_ITEM_COLUMNS)}) "
                f"VALUES (?, ?{', ?' * len(_ITEM_COLUMNS)})")
# Not REPLACE: that would silently delete another item whose idempotency pair collides.
_UPDATE_ITEM = (f"UPDATE inbox_items SET {', '.join(f'{c} = ?' for c in _ITEM_COLUMNS)} "
                "WHERE id = ? AND tenant_id = ?")


def _item_values(item: InboxItem) -> tuple[Any, ...]:
    """The values of ``_ITEM_COLUMNS``."""
    return (item.assigned_to_user_id, item.status.value, item.criticality.value,
            item.origin_process_id, item.origin_session_id, item.idempotency_key,
            to_ms(item.created_at), None if item.resolved_at is None else to_ms(item.resolved_at),
            item.revision, item.model_dump_json(by_alias=True))


def _equal(tenant_id: str, **columns: str | None) -> tuple[list[str], list[Any]]:
    """The clauses ``tenant_id = ?`` and ``column = ?`` for each given value, and their
    parameters."""
    given = {column: value for column, value in columns.items() if value is not None}
    return ["tenant_id = ?", *(f"{column} = ?" for column in given)], [tenant_id, *given.values()]


def _where(tenant_id: str, query: InboxQuery) -> tuple[str, list[Any]]:
    """The WHERE clause of ``list_inbox_items`` and its parameters."""
    clauses, params = _equal(tenant_id, assigned_to=query.assigned_to,
                             origin_session_id=query.origin_session_id,
                             origin_process_id=query.origin_process_id)
    for column, values in (("status", query.statuses), ("criticality", query.criticalities)):
        if values is not None:  # an empty set matches nothing
            clauses.append(f"{column} IN ({', '.join('?' * len(values))})")
            params += [value.value for value in values]
    for tag in query.tags:
        clauses.append("EXISTS (SELECT 1 FROM json_each(doc, '$.tags') WHERE value = ?)")
        params.append(tag)
    if query.requires_action is not None:  # JSON true/false read as 1/0
        clauses.append("json_extract(doc, '$.requiresAction') = ?")
        params.append(int(query.requires_action))
    if query.resolved_before is not None:
        clauses.append("resolved_ms < ?")
        params.append(to_ms(query.resolved_before))
    if query.before is not None:
        at, item_id = query.before
        clauses.append("(created_ms < ? OR (created_ms = ? AND id < ?))")
        params += [to_ms(at), to_ms(at), item_id]
    return " AND ".join(clauses), params


class SqliteUserInboxMixin:
    """User Inbox items and deliveries for ``SqliteStore`` (which provides ``_read``,
    ``_execute``, ``_write`` and ``_append_in``)."""

    _read: Callable[[str, tuple[Any, ...]], list[Any]]
    _execute: Callable[[str, tuple[Any, ...]], sqlite3.Cursor]
    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _append_in: Callable[[sqlite3.Connection, InboxMessage], tuple[InboxMessage, bool]]

    # ── the user Inbox ────────────────────────────────────────────────────
    def create_inbox_item(self, item: InboxItem) -> tuple[InboxItem, bool]:
        with self._write() as conn:
            if item.origin_process_id is not None and item.idempotency_key is not None:
                first = conn.execute(
                    "SELECT doc FROM inbox_items WHERE tenant_id = ? AND origin_process_id = ? "
                    "AND idempotency_key = ?",
                    (item.tenant_id, item.origin_process_id, item.idempotency_key)).fetchone()
                if first is not None:
                    return InboxItem.load(json.loads(first[0])), False
            conn.execute(_INSERT_ITEM, (item.id, item.tenant_id, *_item_values(item)))
        return item, True

    def get_inbox_item(self, tenant_id: str, item_id: str) -> InboxItem:
        return load_one(InboxItem, self._read("SELECT doc FROM inbox_items WHERE id = ? AND "
                                              "tenant_id = ?", (item_id, tenant_id)),
                        f"inbox item {item_id} not found")

    def save_inbox_item(self, item: InboxItem, *, expected_revision: int,
                        message: InboxMessage | None = None) -> InboxItem:
        stored = item.model_copy(update={"revision": expected_revision + 1})
        with self._write() as conn:
            row = conn.execute("SELECT revision FROM inbox_items WHERE id = ? AND tenant_id = ?",
                               (item.id, item.tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"inbox item {item.id} not found")
            if row[0] != expected_revision:
                raise Conflict(f"inbox item {item.id} is at revision {row[0]}, "
                               f"not {expected_revision}")
            conn.execute(_UPDATE_ITEM, (*_item_values(stored), item.id, item.tenant_id))
            if message is not None:
                self._append_in(conn, message)  # NotFound rolls the save back
        return stored

    def redeliver_inbox_messages(self, limit: int = 100) -> int:
        return 0  # save_inbox_item writes the item and its message in one transaction

    def list_inbox_items(self, tenant_id: str, query: InboxQuery) -> list[InboxItem]:
        where, params = _where(tenant_id, query)
        rows = self._read(f"SELECT doc FROM inbox_items WHERE {where} "
                          "ORDER BY created_ms DESC, id DESC LIMIT ?", (*params, query.limit))
        return [InboxItem.load(json.loads(doc)) for (doc,) in rows]

    def inbox_pending_counts(self, tenant_id: str,
                             user_id: str) -> tuple[dict[str, int], datetime | None]:
        rows = self._read(
            "SELECT criticality, COUNT(*), MIN(created_ms) FROM inbox_items "
            "WHERE tenant_id = ? AND assigned_to = ? AND status = ? GROUP BY criticality",
            (tenant_id, user_id, ItemStatus.PENDING.value))
        counts = {criticality: count for criticality, count, _ in rows}
        return counts, from_ms(min((oldest for _, _, oldest in rows), default=None))

    # ── notification delivery log ─────────────────────────────────────────
    def add_delivery(self, delivery: NotificationDelivery) -> None:
        self._execute(
            "INSERT INTO notification_deliveries (id, tenant_id, item_id, user_id, channel, "
            "status, created_ms, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (delivery.id, delivery.tenant_id, delivery.item_id, delivery.user_id,
             delivery.channel, delivery.status.value, to_ms(delivery.created_at),
             delivery.model_dump_json(by_alias=True)))

    def list_deliveries(self, tenant_id: str, *, item_id: str | None = None,
                        user_id: str | None = None) -> list[NotificationDelivery]:
        clauses, params = _equal(tenant_id, item_id=item_id, user_id=user_id)
        rows = self._read(f"SELECT doc FROM notification_deliveries WHERE {' AND '.join(clauses)} "
                          "ORDER BY created_ms, rowid", tuple(params))
        return [NotificationDelivery.load(json.loads(doc)) for (doc,) in rows]

    def queued_deliveries(self, channel: str, limit: int = 1000) -> list[NotificationDelivery]:
        rows = self._read(
            "SELECT doc FROM notification_deliveries WHERE channel = ? AND status = ? "
            "ORDER BY created_ms, rowid LIMIT ?", (channel, DeliveryStatus.QUEUED.value, limit))
        return [NotificationDelivery.load(json.loads(doc)) for (doc,) in rows]

    def finish_delivery(self, tenant_id: str, delivery_id: str, status: DeliveryStatus, *,
                        reason: str | None = None, sent_at: datetime | None = None) -> bool:
        with self._write() as conn:
            row = conn.execute(
                "SELECT doc FROM notification_deliveries WHERE id = ? AND tenant_id = ? "
                "AND status = ?", (delivery_id, tenant_id, DeliveryStatus.QUEUED.value)).fetchone()
            if row is None:
                return False
            done = NotificationDelivery.load(json.loads(row[0])).model_copy(
                update={"status": status, "reason": reason, "sent_at": sent_at})
            conn.execute("UPDATE notification_deliveries SET status = ?, doc = ? WHERE id = ?",
                         (status.value, done.model_dump_json(by_alias=True), delivery_id))
        return True
