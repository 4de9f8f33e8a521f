"""MongoDB ``DeliveryStore``: collection ``notification_deliveries``.

A ``NotificationDelivery`` with ``_id`` = its id. Indexes put ``tenantId``
first, except the one of the batch job's system query (channel, status,
createdAt). Atomicity: each call is one single-document operation;
``finish_delivery`` is an ``update_one`` whose filter holds
``status: QUEUED`` (the compare-and-set), so two batch runs never both finish
one delivery.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ASCENDING

from vancetope_brain.models.inbox import DeliveryStatus, NotificationDelivery
from vancetope_brain.store.deliveries import DeliveryStore
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import (
    OLDEST_FIRST,
    from_bson,
    naive_utc,
    to_bson,
    translated,
)

_QUEUED = DeliveryStatus.QUEUED.value


class MongoDeliveries(MongoAdapter, DeliveryStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._deliveries = db.database["notification_deliveries"]
        self._deliveries.create_index(
            [("tenantId", ASCENDING), ("itemId", ASCENDING), ("createdAt", ASCENDING)],
            name="by_item")
        self._deliveries.create_index(
            [("tenantId", ASCENDING), ("userId", ASCENDING), ("createdAt", ASCENDING)],
            name="by_user")
        self._deliveries.create_index(
            [("channel", ASCENDING), ("status", ASCENDING), ("createdAt", ASCENDING)],
            name="queued")

    @translated
    def add_delivery(self, delivery: NotificationDelivery) -> None:
        self._deliveries.insert_one(to_bson(delivery))

    @translated
    def list_deliveries(self, tenant_id: str, *, item_id: str | None = None,
                        user_id: str | None = None) -> list[NotificationDelivery]:
        query: dict[str, Any] = {"tenantId": tenant_id}
        if item_id is not None:
            query["itemId"] = item_id
        if user_id is not None:
            query["userId"] = user_id
        cursor = self._deliveries.find(query).sort(OLDEST_FIRST)
        return [from_bson(NotificationDelivery, raw) for raw in cursor]

    @translated
    def queued_deliveries(self, channel: str, limit: int = 1000) -> list[NotificationDelivery]:
        if limit <= 0:  # Mongo reads limit(0) as "no limit"
            return []
        cursor = self._deliveries.find({"channel": channel, "status": _QUEUED})
        return [from_bson(NotificationDelivery, raw)
                for raw in cursor.sort(OLDEST_FIRST).limit(limit)]

    @translated
    def finish_delivery(self, tenant_id: str, delivery_id: str, status: DeliveryStatus, *,
                        reason: str | None = None, sent_at: datetime | None = None) -> bool:
        result = self._deliveries.update_one(
            {"_id": delivery_id, "tenantId": tenant_id, "status": _QUEUED},
            {"$set": {"status": status.value, "reason": reason,
                      "sentAt": None if sent_at is None else naive_utc(sent_at)}})
        return bool(result.matched_count)
