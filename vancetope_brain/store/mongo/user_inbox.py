"""MongoDB ``UserInboxStore``: collection ``inbox_items``.

An ``InboxItem`` with ``_id`` = its id; a unique partial index on (tenantId,
originProcessId, idempotencyKey) decides between concurrent idempotent
creates (the loser reads the winner's item back).

``save_inbox_item`` is one ``replace_one`` whose filter holds the expected
``revision`` (the compare-and-set). With a ``message`` we use no multi-document
transaction but an outbox on the item: (1) the target process must exist, else
``NotFound`` with nothing written; (2) the compare-and-set writes the item
*with* the message in its ``_outbox`` field — one document, so atomic; (3)
``append_in`` of the lanes adapter (idempotent on the message's key); (4)
``_outbox`` is removed. A crash after (2) leaves the message in the outbox, and
``redeliver_inbox_messages`` (the housekeeping job) finishes (3) and (4).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import InboxMessage
from vancetope_brain.models.inbox import InboxItem, InboxQuery, ItemStatus
from vancetope_brain.models.webhooks import WebhookDelivery
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import (
    STRING,
    from_bson,
    load_one,
    naive_utc,
    to_bson,
    translated,
)
from vancetope_brain.store.mongo.lanes import append_in
from vancetope_brain.store.mongo.sessions import process_exists
from vancetope_brain.store.mongo.webhooks import add_deliveries_in
from vancetope_brain.store.user_inbox import UserInboxStore

_OUTBOX = "_outbox"  # the message of a save, until it is appended (see the module docstring)
# Equal creation times (millisecond resolution) fall back to the id, so the order is stable.
_NEWEST_FIRST = [("createdAt", DESCENDING), ("_id", DESCENDING)]


def _filter(tenant_id: str, query: InboxQuery) -> dict[str, Any]:
    """The ``find`` filter of ``list_inbox_items``."""
    found: dict[str, Any] = {"tenantId": tenant_id}
    for name, value in (("assignedToUserId", query.assigned_to),
                        ("originSessionId", query.origin_session_id),
                        ("originProcessId", query.origin_process_id)):
        if value is not None:
            found[name] = value
    for name, values in (("status", query.statuses), ("criticality", query.criticalities)):
        if values is not None:  # an empty set matches nothing
            found[name] = {"$in": [value.value for value in values]}
    if query.tags:  # {$all: []} would match nothing
        found["tags"] = {"$all": list(query.tags)}
    if query.requires_action is not None:
        found["requiresAction"] = query.requires_action
    if query.resolved_before is not None:  # a null resolvedAt never compares less
        found["resolvedAt"] = {"$lt": naive_utc(query.resolved_before)}
    if query.before is not None:
        at, item_id = naive_utc(query.before[0]), query.before[1]
        found["$or"] = [{"createdAt": {"$lt": at}}, {"createdAt": at, "_id": {"$lt": item_id}}]
    return found


class MongoUserInbox(MongoAdapter, UserInboxStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._items = db.database["inbox_items"]
        self._items.create_index(
            [("tenantId", ASCENDING), ("assignedToUserId", ASCENDING), ("status", ASCENDING),
             ("criticality", ASCENDING)], name="by_assignee")
        self._items.create_index(
            [("tenantId", ASCENDING), ("originSessionId", ASCENDING), ("status", ASCENDING)],
            name="by_session")
        self._items.create_index(
            [("tenantId", ASCENDING), ("originProcessId", ASCENDING), ("status", ASCENDING)],
            name="by_process")
        self._items.create_index(
            [("tenantId", ASCENDING), ("originProcessId", ASCENDING),
             ("idempotencyKey", ASCENDING)],
            unique=True, partialFilterExpression={"originProcessId": STRING,
                                                  "idempotencyKey": STRING},
            name="idempotency")

    def _item_by_key(self, item: InboxItem) -> InboxItem | None:
        """The stored item with ``item``'s (originProcessId, idempotencyKey), if both are set."""
        if item.origin_process_id is None or item.idempotency_key is None:
            return None
        raw = self._items.find_one({"tenantId": item.tenant_id,
                                    "originProcessId": item.origin_process_id,
                                    "idempotencyKey": item.idempotency_key})
        return None if raw is None else from_bson(InboxItem, raw)

    @translated
    def create_inbox_item(self, item: InboxItem) -> tuple[InboxItem, bool]:
        first = self._item_by_key(item)
        if first is not None:
            return first, False
        try:
            self._items.insert_one(to_bson(item))
        except DuplicateKeyError:
            first = self._item_by_key(item)  # a concurrent create with the same key won
            if first is None:
                raise
            return first, False
        return item, True

    @translated
    def get_inbox_item(self, tenant_id: str, item_id: str) -> InboxItem:
        raw = self._items.find_one({"_id": item_id, "tenantId": tenant_id})
        return load_one(InboxItem, raw, f"inbox item {item_id} not found")

    @translated
    def save_inbox_item(self, item: InboxItem, *, expected_revision: int,
                        message: InboxMessage | None = None,
                        deliveries: Sequence[WebhookDelivery] = ()) -> InboxItem:
        if message is not None and not process_exists(self.db.database, message.tenant_id,
                                                      message.target_process_id):
            raise NotFound(f"process {message.target_process_id} not found")
        stored = item.model_copy(update={"revision": expected_revision + 1})
        document = to_bson(stored)
        if message is not None:
            document[_OUTBOX] = to_bson(message)
        result = self._items.replace_one(
            {"_id": item.id, "tenantId": item.tenant_id, "revision": expected_revision},
            document)
        if result.matched_count == 0:
            current = self.get_inbox_item(item.tenant_id, item.id)  # raises NotFound
            raise Conflict(f"inbox item {item.id} is at revision {current.revision}, "
                           f"not {expected_revision}")
        if message is not None:
            self._deliver_outbox(item.id, message)
        add_deliveries_in(self.db.database, deliveries)
        return stored

    def _deliver_outbox(self, item_id: str, message: InboxMessage) -> None:
        append_in(self.db.database, message)
        self._items.update_one({"_id": item_id, f"{_OUTBOX}.id": message.id},
                               {"$unset": {_OUTBOX: ""}})

    @translated
    def redeliver_inbox_messages(self, limit: int = 100) -> int:
        done = 0
        for raw in self._items.find({_OUTBOX: {"$exists": True}}, {_OUTBOX: True}).limit(limit):
            self._deliver_outbox(raw["_id"], from_bson(InboxMessage, raw[_OUTBOX]))
            done += 1
        return done

    @translated
    def list_inbox_items(self, tenant_id: str, query: InboxQuery) -> list[InboxItem]:
        if query.limit <= 0:  # Mongo reads limit(0) as "no limit"
            return []
        cursor = self._items.find(_filter(tenant_id, query)).sort(_NEWEST_FIRST)
        return [from_bson(InboxItem, raw) for raw in cursor.limit(query.limit)]

    @translated
    def inbox_pending_counts(self, tenant_id: str,
                             user_id: str) -> tuple[dict[str, int], datetime | None]:
        groups = list(self._items.aggregate([
            {"$match": {"tenantId": tenant_id, "assignedToUserId": user_id,
                        "status": ItemStatus.PENDING.value}},
            {"$group": {"_id": "$criticality", "count": {"$sum": 1},
                        "oldest": {"$min": "$createdAt"}}},
        ]))
        counts = {group["_id"]: group["count"] for group in groups}
        oldest = min((naive_utc(group["oldest"]) for group in groups), default=None)
        return counts, None if oldest is None else oldest.replace(tzinfo=UTC)

    def open_items_by_criticality(self) -> dict[str, int]:
        groups = self._items.aggregate([
            {"$match": {"status": ItemStatus.PENDING.value}},
            {"$group": {"_id": "$criticality", "count": {"$sum": 1}}},
        ])
        return {group["_id"]: group["count"] for group in groups}
