"""SQLite ``WebhookStore``: tables ``webhook_subscriptions`` and ``webhook_deliveries``.

A row holds the whole record in ``doc``; the other columns are copies of its fields for
the indexes and the compare-and-sets, rewritten with ``doc``. Atomicity: each call is one
``BEGIN IMMEDIATE`` transaction (the file's write lock), so the cap check and insert of
``add_subscription``, the claim of ``claim_deliveries`` and the check of ``finish_attempt``
each see no other writer between read and write.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models.webhooks import (
    WebhookDelivery,
    WebhookDeliveryStatus,
    WebhookSubscription,
)
from vancetope_brain.store.sql import to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all, load_one
from vancetope_brain.store.webhooks import WebhookStore, project_full, requeued

_TABLES = """
CREATE TABLE IF NOT EXISTS webhook_subscriptions (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL, revision INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_subscriptions_by_project
    ON webhook_subscriptions (tenant_id, project_id, created_ms);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, subscription_id TEXT NOT NULL,
    status TEXT NOT NULL, next_ms INTEGER NOT NULL, claim TEXT, created_ms INTEGER NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (status, next_ms);
CREATE INDEX IF NOT EXISTS webhook_deliveries_by_subscription
    ON webhook_deliveries (tenant_id, subscription_id, created_ms);
"""
_PENDING = WebhookDeliveryStatus.PENDING.value


def _doc(record: WebhookSubscription | WebhookDelivery) -> str:
    return record.model_dump_json(by_alias=True)


class SqliteWebhooks(SqliteAdapter, WebhookStore):
    tables = _TABLES

    def add_subscription(self, subscription: WebhookSubscription, *, cap: int) -> None:
        with self.db.write() as conn:
            held = conn.execute(
                "SELECT count(*) FROM webhook_subscriptions WHERE tenant_id = ? AND project_id = ?",
                (subscription.tenant_id, subscription.project_id)).fetchone()[0]
            if held >= cap:
                raise project_full(held, cap)
            conn.execute(
                "INSERT INTO webhook_subscriptions (id, tenant_id, project_id, created_ms, "
                "revision, doc) VALUES (?, ?, ?, ?, ?, ?)",
                (subscription.id, subscription.tenant_id, subscription.project_id,
                 to_ms(subscription.created_at), subscription.revision, _doc(subscription)))

    def get_subscription(self, tenant_id: str, subscription_id: str) -> WebhookSubscription:
        return load_one(WebhookSubscription, self.db.read(
            "SELECT doc FROM webhook_subscriptions WHERE id = ? AND tenant_id = ?",
            (subscription_id, tenant_id)), f"no webhook subscription {subscription_id!r}")

    def list_subscriptions(self, tenant_id: str,
                           project_id: str | None = None) -> list[WebhookSubscription]:
        where, params = "tenant_id = ?", [tenant_id]
        if project_id is not None:
            where, params = where + " AND project_id = ?", [*params, project_id]
        return load_all(WebhookSubscription, self.db.read(
            f"SELECT doc FROM webhook_subscriptions WHERE {where} ORDER BY created_ms, rowid",
            params))

    def save_subscription(self, subscription: WebhookSubscription) -> WebhookSubscription:
        saved = subscription.model_copy(update={"revision": subscription.revision + 1})
        with self.db.write() as conn:
            changed = conn.execute(
                "UPDATE webhook_subscriptions SET revision = ?, doc = ? "
                "WHERE id = ? AND tenant_id = ? AND revision = ?",
                (saved.revision, _doc(saved), subscription.id, subscription.tenant_id,
                 subscription.revision)).rowcount
            if not changed:
                found = conn.execute("SELECT 1 FROM webhook_subscriptions WHERE id = ? "
                                     "AND tenant_id = ?",
                                     (subscription.id, subscription.tenant_id)).fetchone()
                if found is None:
                    raise NotFound(f"no webhook subscription {subscription.id!r}")
                raise Conflict("the subscription changed meanwhile; read it again")
        return saved

    def delete_subscription(self, tenant_id: str, subscription_id: str) -> None:
        with self.db.write() as conn:
            if not conn.execute("DELETE FROM webhook_subscriptions WHERE id = ? AND tenant_id = ?",
                                (subscription_id, tenant_id)).rowcount:
                raise NotFound(f"no webhook subscription {subscription_id!r}")
            conn.execute("DELETE FROM webhook_deliveries WHERE tenant_id = ? "
                         "AND subscription_id = ?", (tenant_id, subscription_id))

    def add_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> int:
        if not deliveries:
            return 0
        with self.db.write() as conn:
            return add_deliveries_in(conn, deliveries)

    def claim_deliveries(self, now: datetime, until: datetime, claim: str,
                         limit: int) -> list[WebhookDelivery]:
        with self.db.write() as conn:
            due = load_all(WebhookDelivery, conn.execute(
                "SELECT doc FROM webhook_deliveries WHERE status = ? AND next_ms <= ? "
                "ORDER BY next_ms, rowid LIMIT ?", (_PENDING, to_ms(now), max(0, limit))))
            claimed = [d.model_copy(update={"claim": claim, "next_at": until}) for d in due]
            for d in claimed:
                conn.execute("UPDATE webhook_deliveries SET next_ms = ?, claim = ?, doc = ? "
                             "WHERE id = ?", (to_ms(until), claim, _doc(d), d.id))
        return claimed

    def finish_attempt(self, delivery: WebhookDelivery, claim: str) -> bool:
        done = delivery.model_copy(update={"claim": None})
        return bool(self.db.execute(
            "UPDATE webhook_deliveries SET status = ?, next_ms = ?, claim = NULL, doc = ? "
            "WHERE id = ? AND tenant_id = ? AND claim = ?",
            (done.status.value, to_ms(done.next_at), _doc(done), done.id, done.tenant_id,
             claim)).rowcount)

    def get_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery:
        return load_one(WebhookDelivery, self.db.read(
            "SELECT doc FROM webhook_deliveries WHERE id = ? AND tenant_id = ?",
            (delivery_id, tenant_id)), f"no webhook delivery {delivery_id!r}")

    def list_deliveries(self, tenant_id: str, subscription_id: str,
                        limit: int = 50) -> list[WebhookDelivery]:
        return load_all(WebhookDelivery, self.db.read(
            "SELECT doc FROM webhook_deliveries WHERE tenant_id = ? AND subscription_id = ? "
            "ORDER BY created_ms DESC, rowid DESC LIMIT ?",
            (tenant_id, subscription_id, max(0, limit))))

    def requeue_delivery(self, tenant_id: str, delivery_id: str,
                         now: datetime) -> WebhookDelivery:
        with self.db.write() as conn:
            row = conn.execute("SELECT doc FROM webhook_deliveries WHERE id = ? AND tenant_id = ?",
                               (delivery_id, tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"no webhook delivery {delivery_id!r}")
            delivery = WebhookDelivery.load(json.loads(row[0]))
            again = requeued(delivery, now)
            conn.execute("UPDATE webhook_deliveries SET status = ?, next_ms = ?, claim = NULL, "
                         "doc = ? WHERE id = ?", (_PENDING, to_ms(now), _doc(again), delivery_id))
        return again


def add_deliveries_in(conn: sqlite3.Connection, deliveries: Sequence[WebhookDelivery]) -> int:
    """``add_deliveries`` inside the caller's transaction (``save_inbox_item``'s)."""
    return sum(conn.execute(
        "INSERT OR IGNORE INTO webhook_deliveries (id, tenant_id, subscription_id, "
        "status, next_ms, claim, created_ms, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (d.id, d.tenant_id, d.subscription_id, d.status.value, to_ms(d.next_at),
         d.claim, to_ms(d.created_at), _doc(d))).rowcount for d in deliveries)
