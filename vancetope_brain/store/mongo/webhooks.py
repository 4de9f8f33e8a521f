"""MongoDB ``WebhookStore``: collections ``webhook_subscriptions`` and ``webhook_deliveries``.

Records with ``_id`` = their id; indexes put ``tenantId`` first, except the sender's system
query (status, nextAt). Atomicity: single-document operations. ``claim_deliveries`` claims
each due delivery with an ``update_one`` whose filter holds the ``nextAt`` it was read with
(the compare-and-set); ``finish_attempt`` filters on ``claim``, ``save_subscription`` on
``revision``. The subscription cap is a count before the insert: two racing creates may
pass it by one (no multi-document transaction on this path).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models.webhooks import (
    WebhookDelivery,
    WebhookDeliveryStatus,
    WebhookSubscription,
)
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import (
    OLDEST_FIRST,
    from_bson,
    load_one,
    naive_utc,
    to_bson,
    translated,
)
from vancetope_brain.store.webhooks import WebhookStore, project_full, requeued

_PENDING = WebhookDeliveryStatus.PENDING.value
DELIVERIES = "webhook_deliveries"


class MongoWebhooks(MongoAdapter, WebhookStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._subscriptions = db.database["webhook_subscriptions"]
        self._deliveries = db.database[DELIVERIES]
        self._subscriptions.create_index(
            [("tenantId", ASCENDING), ("projectId", ASCENDING), ("createdAt", ASCENDING)],
            name="by_project")
        self._deliveries.create_index([("status", ASCENDING), ("nextAt", ASCENDING)], name="due")
        self._deliveries.create_index(
            [("tenantId", ASCENDING), ("subscriptionId", ASCENDING), ("createdAt", ASCENDING)],
            name="by_subscription")

    @translated
    def add_subscription(self, subscription: WebhookSubscription, *, cap: int) -> None:
        held = self._subscriptions.count_documents(
            {"tenantId": subscription.tenant_id, "projectId": subscription.project_id})
        if held >= cap:
            raise project_full(held, cap)
        self._subscriptions.insert_one(to_bson(subscription))

    @translated
    def get_subscription(self, tenant_id: str, subscription_id: str) -> WebhookSubscription:
        return load_one(WebhookSubscription, self._subscriptions.find_one(
            {"_id": subscription_id, "tenantId": tenant_id}),
            f"no webhook subscription {subscription_id!r}")

    @translated
    def list_subscriptions(self, tenant_id: str,
                           project_id: str | None = None) -> list[WebhookSubscription]:
        query: dict[str, Any] = {"tenantId": tenant_id}
        if project_id is not None:
            query["projectId"] = project_id
        return [from_bson(WebhookSubscription, raw)
                for raw in self._subscriptions.find(query).sort(OLDEST_FIRST)]

    @translated
    def save_subscription(self, subscription: WebhookSubscription) -> WebhookSubscription:
        saved = subscription.model_copy(update={"revision": subscription.revision + 1})
        result = self._subscriptions.replace_one(
            {"_id": subscription.id, "tenantId": subscription.tenant_id,
             "revision": subscription.revision}, to_bson(saved))
        if not result.matched_count:
            self.get_subscription(subscription.tenant_id, subscription.id)  # NotFound
            raise Conflict("the subscription changed meanwhile; read it again")
        return saved

    @translated
    def delete_subscription(self, tenant_id: str, subscription_id: str) -> None:
        if not self._subscriptions.delete_one(
                {"_id": subscription_id, "tenantId": tenant_id}).deleted_count:
            raise NotFound(f"no webhook subscription {subscription_id!r}")
        self._deliveries.delete_many({"tenantId": tenant_id, "subscriptionId": subscription_id})

    @translated
    def add_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> int:
        return add_deliveries_in(self.db.database, deliveries)

    @translated
    def claim_deliveries(self, now: datetime, until: datetime, claim: str,
                         limit: int) -> list[WebhookDelivery]:
        if limit <= 0:  # Mongo reads limit(0) as "no limit"
            return []
        due = list(self._deliveries.find({"status": _PENDING, "nextAt": {"$lte": naive_utc(now)}})
                   .sort([("nextAt", ASCENDING), ("createdAt", ASCENDING)]).limit(limit))
        claimed = []
        for raw in due:
            if self._deliveries.update_one(
                    {"_id": raw["_id"], "status": _PENDING, "nextAt": raw["nextAt"]},
                    {"$set": {"nextAt": naive_utc(until), "claim": claim}}).modified_count:
                claimed.append(from_bson(WebhookDelivery, raw).model_copy(
                    update={"claim": claim, "next_at": until}))
        return claimed

    @translated
    def finish_attempt(self, delivery: WebhookDelivery, claim: str) -> bool:
        done = delivery.model_copy(update={"claim": None})
        return bool(self._deliveries.replace_one(
            {"_id": done.id, "tenantId": done.tenant_id, "claim": claim},
            to_bson(done)).matched_count)

    @translated
    def get_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery:
        return load_one(WebhookDelivery, self._deliveries.find_one(
            {"_id": delivery_id, "tenantId": tenant_id}), f"no webhook delivery {delivery_id!r}")

    @translated
    def list_deliveries(self, tenant_id: str, subscription_id: str,
                        limit: int = 50) -> list[WebhookDelivery]:
        if limit <= 0:
            return []
        cursor = self._deliveries.find({"tenantId": tenant_id, "subscriptionId": subscription_id})
        return [from_bson(WebhookDelivery, raw) for raw in cursor.sort(
            [("createdAt", DESCENDING), ("_id", DESCENDING)]).limit(limit)]

    @translated
    def requeue_delivery(self, tenant_id: str, delivery_id: str,
                         now: datetime) -> WebhookDelivery:
        delivery = self.get_delivery(tenant_id, delivery_id)
        again = requeued(delivery, now)
        if not self._deliveries.replace_one(
                {"_id": delivery_id, "tenantId": tenant_id, "status": delivery.status.value},
                to_bson(again)).matched_count:
            raise Conflict("the delivery changed meanwhile; read it again")
        return again


def add_deliveries_in(database: Any, deliveries: Sequence[WebhookDelivery]) -> int:
    """``add_deliveries`` on ``database`` (``save_inbox_item``'s, after its item)."""
    added = 0
    for delivery in deliveries:
        try:
            database[DELIVERIES].insert_one(to_bson(delivery))
        except DuplicateKeyError:
            continue
        added += 1
    return added
