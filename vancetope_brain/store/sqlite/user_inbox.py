"""SQLite ``UserInboxStore``: table ``inbox_items``.

A row holds the whole ``InboxItem`` in ``doc``; its other columns are copies
of document fields for the indexes, rewritten with ``doc`` by every save.

Atomicity: each call is one ``BEGIN IMMEDIATE`` transaction. An idempotent
create looks up the (origin process, key) pair and inserts under the write
lock, and the unique partial index ``inbox_idempotency`` backs it.
``save_inbox_item`` checks the revision, rewrites the row and appends its
message (``append_in`` of the lanes adapter) in that one transaction, so a
crash or a missing target leaves nothing written and
``redeliver_inbox_messages`` never has anything to do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import InboxMessage
from vancetope_brain.models.inbox import InboxItem, InboxQuery, ItemStatus
from vancetope_brain.models.webhooks import WebhookDelivery
from vancetope_brain.store.sql import from_ms, to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import equal_clauses, load_all, load_one, marks
from vancetope_brain.store.sqlite.lanes import append_in
from vancetope_brain.store.sqlite.webhooks import add_deliveries_in
from vancetope_brain.store.user_inbox import UserInboxStore

# The columns are copies of document fields for the indexes, rewritten with ``doc``
# on every save; the other filters (tags, requiresAction) read ``doc``.
_TABLES = """
CREATE TABLE IF NOT EXISTS inbox_items (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, assigned_to TEXT NOT NULL,
    status TEXT NOT NULL, criticality TEXT NOT NULL, origin_process_id TEXT,
    origin_session_id TEXT, idempotency_key TEXT, created_ms INTEGER NOT NULL,
    resolved_ms INTEGER, revision INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS inbox_by_assignee
    ON inbox_items (tenant_id, assigned_to, status, criticality);
CREATE INDEX IF NOT EXISTS inbox_by_session ON inbox_items (tenant_id, origin_session_id, status);
CREATE INDEX IF NOT EXISTS inbox_by_process ON inbox_items (tenant_id, origin_process_id, status);
CREATE UNIQUE INDEX IF NOT EXISTS inbox_idempotency
    ON inbox_items (tenant_id, origin_process_id, idempotency_key)
    WHERE origin_process_id IS NOT NULL AND idempotency_key IS NOT NULL;
"""

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


def _where(tenant_id: str, query: InboxQuery) -> tuple[str, list[Any]]:
    """The WHERE clause of ``list_inbox_items`` and its parameters."""
    clauses, params = equal_clauses(tenant_id, assigned_to=query.assigned_to,
                                    origin_session_id=query.origin_session_id,
                                    origin_process_id=query.origin_process_id)
    for column, values in (("status", query.statuses), ("criticality", query.criticalities)):
        if values is not None:  # an empty set matches nothing
            clauses.append(f"{column} IN {marks(values)}")
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


class SqliteUserInbox(SqliteAdapter, UserInboxStore):
    tables = _TABLES

    def create_inbox_item(self, item: InboxItem) -> tuple[InboxItem, bool]:
        with self.db.write() as conn:
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
        return load_one(InboxItem, self.db.read("SELECT doc FROM inbox_items WHERE id = ? AND "
                                                "tenant_id = ?", (item_id, tenant_id)),
                        f"inbox item {item_id} not found")

    def save_inbox_item(self, item: InboxItem, *, expected_revision: int,
                        message: InboxMessage | None = None,
                        deliveries: Sequence[WebhookDelivery] = ()) -> InboxItem:
        stored = item.model_copy(update={"revision": expected_revision + 1})
        with self.db.write() as conn:
            row = conn.execute("SELECT revision FROM inbox_items WHERE id = ? AND tenant_id = ?",
                               (item.id, item.tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"inbox item {item.id} not found")
            if row[0] != expected_revision:
                raise Conflict(f"inbox item {item.id} is at revision {row[0]}, "
                               f"not {expected_revision}")
            conn.execute(_UPDATE_ITEM, (*_item_values(stored), item.id, item.tenant_id))
            if message is not None:
                append_in(conn, message)  # NotFound rolls the save back
            add_deliveries_in(conn, deliveries)
        return stored

    def redeliver_inbox_messages(self, limit: int = 100) -> int:
        return 0  # save_inbox_item writes the item and its message in one transaction

    def list_inbox_items(self, tenant_id: str, query: InboxQuery) -> list[InboxItem]:
        where, params = _where(tenant_id, query)
        return load_all(InboxItem, self.db.read(
            f"SELECT doc FROM inbox_items WHERE {where} "
            "ORDER BY created_ms DESC, id DESC LIMIT ?", (*params, query.limit)))

    def inbox_pending_counts(self, tenant_id: str,
                             user_id: str) -> tuple[dict[str, int], datetime | None]:
        rows = self.db.read(
            "SELECT criticality, COUNT(*), MIN(created_ms) FROM inbox_items "
            "WHERE tenant_id = ? AND assigned_to = ? AND status = ? GROUP BY criticality",
            (tenant_id, user_id, ItemStatus.PENDING.value))
        counts = {criticality: count for criticality, count, _ in rows}
        return counts, from_ms(min((oldest for _, _, oldest in rows), default=None))

    def open_items_by_criticality(self) -> dict[str, int]:
        rows = self.db.read("SELECT criticality, COUNT(*) FROM inbox_items WHERE status = ? "
                            "GROUP BY criticality", (ItemStatus.PENDING.value,))
        return {criticality: count for criticality, count in rows}
