"""PostgreSQL ``DeliveryStore``: table ``notification_deliveries``.

A row holds the whole ``NotificationDelivery`` in ``doc``, with copies of its
fields for the indexes; ``row_no`` (an identity column) is the insertion order that
breaks ties of equal ``created_ms``, as SQLite's ``rowid`` does.

Atomicity: each call is one statement in its own transaction. ``finish_delivery``
is one ``UPDATE … WHERE status = 'queued'`` that rewrites ``status`` and ``doc``
together (the compare-and-set): of two batch runs the second waits for the first's
row lock, re-checks the ``WHERE`` against the finished row (READ COMMITTED) and
changes nothing, so two runs never both finish one delivery.
"""

from __future__ import annotations

from datetime import datetime

from vancetope_brain.models.inbox import DeliveryStatus, NotificationDelivery
from vancetope_brain.store.deliveries import DeliveryStore
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, equal_clauses, load_all
from vancetope_brain.store.sql import iso, to_ms

_TABLES = """
CREATE TABLE IF NOT EXISTS notification_deliveries (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, item_id TEXT NOT NULL, user_id TEXT NOT NULL,
    channel TEXT NOT NULL, status TEXT NOT NULL, created_ms BIGINT NOT NULL,
    row_no BIGINT GENERATED ALWAYS AS IDENTITY, doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_by_item
    ON notification_deliveries (tenant_id, item_id, created_ms, row_no);
CREATE INDEX IF NOT EXISTS deliveries_by_user
    ON notification_deliveries (tenant_id, user_id, created_ms, row_no);
CREATE INDEX IF NOT EXISTS deliveries_queued
    ON notification_deliveries (channel, status, created_ms, row_no);
"""


class PostgresDeliveries(PostgresAdapter, DeliveryStore):
    tables = _TABLES

    def add_delivery(self, delivery: NotificationDelivery) -> None:
        self.db.execute(
            "INSERT INTO notification_deliveries (id, tenant_id, item_id, user_id, channel, "
            "status, created_ms, doc) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (delivery.id, delivery.tenant_id, delivery.item_id, delivery.user_id,
             delivery.channel, delivery.status.value, to_ms(delivery.created_at),
             doc_json(delivery)))

    def list_deliveries(self, tenant_id: str, *, item_id: str | None = None,
                        user_id: str | None = None) -> list[NotificationDelivery]:
        clauses, params = equal_clauses(tenant_id, item_id=item_id, user_id=user_id)
        return load_all(NotificationDelivery, self.db.read(
            f"SELECT doc FROM notification_deliveries WHERE {' AND '.join(clauses)} "
            "ORDER BY created_ms, row_no", params))

    def queued_deliveries(self, channel: str, limit: int = 1000) -> list[NotificationDelivery]:
        return load_all(NotificationDelivery, self.db.read(
            "SELECT doc FROM notification_deliveries WHERE channel = %s AND status = %s "
            "ORDER BY created_ms, row_no LIMIT %s",
            (channel, DeliveryStatus.QUEUED.value, max(0, limit))))

    def finish_delivery(self, tenant_id: str, delivery_id: str, status: DeliveryStatus, *,
                        reason: str | None = None, sent_at: datetime | None = None) -> bool:
        changed = self.db.execute(
            "UPDATE notification_deliveries SET status = %s, doc = doc || jsonb_build_object("
            "'status', %s::text, 'reason', %s::text, 'sentAt', %s::text) "
            "WHERE id = %s AND tenant_id = %s AND status = %s",
            (status.value, status.value, reason, None if sent_at is None else iso(sent_at),
             delivery_id, tenant_id, DeliveryStatus.QUEUED.value))
        return changed > 0
