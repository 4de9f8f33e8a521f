"""PostgreSQL ``WebhookStore``: tables ``webhook_subscriptions`` and ``webhook_deliveries``.

A row holds the whole record in ``doc`` (JSONB) with copies of its fields for the indexes
and the compare-and-sets; ``row_no`` breaks ties of equal times as SQLite's ``rowid``
does. Atomicity: ``add_subscription`` counts and inserts under a transaction-scoped
advisory lock of its project, so two racing creates never pass the cap;
``claim_deliveries`` is one ``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)``,
so two senders claim disjoint deliveries; ``finish_attempt`` and ``save_subscription``
are single-statement compare-and-sets (on ``claim``, on ``revision``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models.webhooks import (
    WebhookDelivery,
    WebhookDeliveryStatus,
    WebhookSubscription,
)
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, load_all, load_one
from vancetope_brain.store.sql import iso, to_ms
from vancetope_brain.store.webhooks import WebhookStore, project_full, requeued

_TABLES = """
CREATE TABLE IF NOT EXISTS webhook_subscriptions (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL, revision BIGINT NOT NULL,
    row_no BIGINT GENERATED ALWAYS AS IDENTITY, doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_subscriptions_by_project
    ON webhook_subscriptions (tenant_id, project_id, created_ms, row_no);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, subscription_id TEXT NOT NULL,
    status TEXT NOT NULL, next_ms BIGINT NOT NULL, claim TEXT, created_ms BIGINT NOT NULL,
    row_no BIGINT GENERATED ALWAYS AS IDENTITY, doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (status, next_ms);
CREATE INDEX IF NOT EXISTS webhook_deliveries_by_subscription
    ON webhook_deliveries (tenant_id, subscription_id, created_ms, row_no);
"""
_PENDING = WebhookDeliveryStatus.PENDING.value


class PostgresWebhooks(PostgresAdapter, WebhookStore):
    tables = _TABLES

    def add_subscription(self, subscription: WebhookSubscription, *, cap: int) -> None:
        with self.db.write() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                         (f"webhooks:{subscription.tenant_id}:{subscription.project_id}",))
            row = conn.execute(
                "SELECT count(*) FROM webhook_subscriptions WHERE tenant_id = %s "
                "AND project_id = %s", (subscription.tenant_id, subscription.project_id)).fetchone()
            held = row[0] if row else 0
            if held >= cap:
                raise project_full(held, cap)
            conn.execute(
                "INSERT INTO webhook_subscriptions (id, tenant_id, project_id, created_ms, "
                "revision, doc) VALUES (%s, %s, %s, %s, %s, %s)",
                (subscription.id, subscription.tenant_id, subscription.project_id,
                 to_ms(subscription.created_at), subscription.revision, doc_json(subscription)))

    def get_subscription(self, tenant_id: str, subscription_id: str) -> WebhookSubscription:
        return load_one(WebhookSubscription, self.db.read(
            "SELECT doc FROM webhook_subscriptions WHERE id = %s AND tenant_id = %s",
            (subscription_id, tenant_id)), f"no webhook subscription {subscription_id!r}")

    def list_subscriptions(self, tenant_id: str,
                           project_id: str | None = None) -> list[WebhookSubscription]:
        if project_id is None:
            rows = self.db.read("SELECT doc FROM webhook_subscriptions WHERE tenant_id = %s "
                                "ORDER BY created_ms, row_no", (tenant_id,))
        else:
            rows = self.db.read("SELECT doc FROM webhook_subscriptions WHERE tenant_id = %s "
                                "AND project_id = %s ORDER BY created_ms, row_no",
                                (tenant_id, project_id))
        return load_all(WebhookSubscription, rows)

    def save_subscription(self, subscription: WebhookSubscription) -> WebhookSubscription:
        saved = subscription.model_copy(update={"revision": subscription.revision + 1})
        changed = self.db.execute(
            "UPDATE webhook_subscriptions SET revision = %s, doc = %s "
            "WHERE id = %s AND tenant_id = %s AND revision = %s",
            (saved.revision, doc_json(saved), subscription.id, subscription.tenant_id,
             subscription.revision))
        if changed <= 0:
            self.get_subscription(subscription.tenant_id, subscription.id)  # NotFound
            raise Conflict("the subscription changed meanwhile; read it again")
        return saved

    def delete_subscription(self, tenant_id: str, subscription_id: str) -> None:
        with self.db.write() as conn:
            if not conn.execute("DELETE FROM webhook_subscriptions WHERE id = %s "
                                "AND tenant_id = %s", (subscription_id, tenant_id)).rowcount:
                raise NotFound(f"no webhook subscription {subscription_id!r}")
            conn.execute("DELETE FROM webhook_deliveries WHERE tenant_id = %s "
                         "AND subscription_id = %s", (tenant_id, subscription_id))

    def add_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> int:
        if not deliveries:
            return 0
        with self.db.write() as conn:
            return add_deliveries_in(conn, deliveries)

    def claim_deliveries(self, now: datetime, until: datetime, claim: str,
                         limit: int) -> list[WebhookDelivery]:
        rows = self.db.read(
            "UPDATE webhook_deliveries SET next_ms = %s, claim = %s, "
            "doc = doc || jsonb_build_object('claim', %s::text, 'nextAt', %s::text) "
            "WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = %s AND next_ms <= %s "
            "ORDER BY next_ms, row_no LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING doc",
            (to_ms(until), claim, claim, iso(until), _PENDING, to_ms(now), max(0, limit)))
        return sorted(load_all(WebhookDelivery, rows), key=lambda d: d.created_at)

    def finish_attempt(self, delivery: WebhookDelivery, claim: str) -> bool:
        done = delivery.model_copy(update={"claim": None})
        return self.db.execute(
            "UPDATE webhook_deliveries SET status = %s, next_ms = %s, claim = NULL, doc = %s "
            "WHERE id = %s AND tenant_id = %s AND claim = %s",
            (done.status.value, to_ms(done.next_at), doc_json(done), done.id, done.tenant_id,
             claim)) > 0

    def get_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery:
        return load_one(WebhookDelivery, self.db.read(
            "SELECT doc FROM webhook_deliveries WHERE id = %s AND tenant_id = %s",
            (delivery_id, tenant_id)), f"no webhook delivery {delivery_id!r}")

    def list_deliveries(self, tenant_id: str, subscription_id: str,
                        limit: int = 50) -> list[WebhookDelivery]:
        return load_all(WebhookDelivery, self.db.read(
            "SELECT doc FROM webhook_deliveries WHERE tenant_id = %s AND subscription_id = %s "
            "ORDER BY created_ms DESC, row_no DESC LIMIT %s",
            (tenant_id, subscription_id, max(0, limit))))

    def requeue_delivery(self, tenant_id: str, delivery_id: str,
                         now: datetime) -> WebhookDelivery:
        with self.db.write() as conn:
            row = conn.execute("SELECT doc FROM webhook_deliveries WHERE id = %s "
                               "AND tenant_id = %s FOR UPDATE", (delivery_id, tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"no webhook delivery {delivery_id!r}")
            delivery = WebhookDelivery.load(row[0])
            again = requeued(delivery, now)
            conn.execute("UPDATE webhook_deliveries SET status = %s, next_ms = %s, claim = NULL, "
                         "doc = %s WHERE id = %s", (_PENDING, to_ms(now), doc_json(again),
                                                    delivery_id))
        return again


def add_deliveries_in(conn: psycopg.Connection[Any],
                      deliveries: Sequence[WebhookDelivery]) -> int:
    """``add_deliveries`` inside the caller's transaction (``save_inbox_item``'s)."""
    return sum(conn.execute(
        "INSERT INTO webhook_deliveries (id, tenant_id, subscription_id, status, next_ms, "
        "claim, created_ms, doc) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (id) DO NOTHING",
        (d.id, d.tenant_id, d.subscription_id, d.status.value, to_ms(d.next_at), d.claim,
         to_ms(d.created_at), doc_json(d))).rowcount for d in deliveries)
