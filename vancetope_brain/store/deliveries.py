"""The notification delivery log port (user-interaction.txt §12.6)."""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime

from vancetope_brain.models.inbox import DeliveryStatus, NotificationDelivery
from vancetope_brain.store.backend import Port


class DeliveryStore(Port):
    """One record per delivery attempt of a notification. ``finish_delivery`` is a
    compare-and-set from QUEUED, so two batch runs never both send one delivery."""

    @abstractmethod
    def add_delivery(self, delivery: NotificationDelivery) -> None:
        """Insert one delivery attempt."""

    @abstractmethod
    def list_deliveries(self, tenant_id: str, *, item_id: str | None = None,
                        user_id: str | None = None) -> list[NotificationDelivery]:
        """The tenant's deliveries matching the given filters, oldest first."""

    @abstractmethod
    def queued_deliveries(self, channel: str, limit: int = 1000) -> list[NotificationDelivery]:
        """System query for the batch job: deliveries of ``channel`` in status QUEUED, all
        tenants, oldest first."""

    @abstractmethod
    def finish_delivery(self, tenant_id: str, delivery_id: str, status: DeliveryStatus, *,
                        reason: str | None = None, sent_at: datetime | None = None) -> bool:
        """Move a QUEUED delivery to ``status`` (with reason / sentAt). Returns False, changing
        nothing, if it is not QUEUED any more (another run finished it)."""
