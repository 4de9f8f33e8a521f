"""SQLite ``DeliveryStore``: table ``notification_deliveries``.

A row holds the whole ``NotificationDelivery`` in ``doc``, with copies of its
fields for the indexes. Atomicity: each call is one ``BEGIN IMMEDIATE``
transaction; ``finish_delivery`` reads the QUEUED row and rewrites its
``status`` and ``doc`` together inside it, so two batch runs never both finish
one delivery.
"""

from __future__ import annotations

import json
from datetime import datetime

from vancetope_brain.models.inbox import DeliveryStatus, NotificationDelivery
from vancetope_brain.store.deliveries import DeliveryStore
from vancetope_brain.store.sql import to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import equal_clauses, load_all

_TABLES = """
CREATE TABLE IF NOT EXISTS notification_deliveries (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, item_id TEXT NOT NULL, user_id TEXT NOT NULL,
    channel TEXT NOT NULL, status TEXT NOT NULL, created_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_by_item
    ON notification_deliveries (tenant_id, item_id, created_ms);
CREATE INDEX IF NOT EXISTS deliveries_by_user
    ON notification_deliveries (tenant_id, user_id, created_ms);
CREATE INDEX IF NOT EXISTS deliveries_queued
    ON notification_deliveries (channel, status, created_ms);
"""


class SqliteDeliveries(SqliteAdapter, DeliveryStore):
    tables = _TABLES

    def add_delivery(self, delivery: NotificationDelivery) -> None:
        self.db.execute(
            "INSERT INTO notification_deliveries (id, tenant_id, item_id, user_id, channel, "
            "status, created_ms, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (delivery.id, delivery.tenant_id, delivery.item_id, delivery.user_id,
             delivery.channel, delivery.status.value, to_ms(delivery.created_at),
             delivery.model_dump_json(by_alias=True)))

    def list_deliveries(self, tenant_id: str, *, item_id: str | None = None,
                        user_id: str | None = None) -> list[NotificationDelivery]:
        clauses, params = equal_clauses(tenant_id, item_id=item_id, user_id=user_id)
        return load_all(NotificationDelivery, self.db.read(
            f"SELECT doc FROM notification_deliveries WHERE {' AND '.join(clauses)} "
            "ORDER BY created_ms, rowid", tuple(params)))

    def queued_deliveries(self, channel: str, limit: int = 1000) -> list[NotificationDelivery]:
        return load_all(NotificationDelivery, self.db.read(
            "SELECT doc FROM notification_deliveries WHERE channel = ? AND status = ? "
            "ORDER BY created_ms, rowid LIMIT ?", (channel, DeliveryStatus.QUEUED.value, limit)))

    def finish_delivery(self, tenant_id: str, delivery_id: str, status: DeliveryStatus, *,
                        reason: str | None = None, sent_at: datetime | None = None) -> bool:
        with self.db.write() as conn:
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
