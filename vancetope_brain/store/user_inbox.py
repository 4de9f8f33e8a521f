"""The user Inbox port (user-interaction.txt §3): items asked of users, with revisions."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import datetime

from vancetope_brain.models import InboxMessage
from vancetope_brain.models.inbox import InboxItem, InboxQuery
from vancetope_brain.models.webhooks import WebhookDelivery
from vancetope_brain.store.backend import Port


class UserInboxStore(Port):
    """User Inbox items. A save is optimistic (``revision``) and may carry the steer
    message that routes an answer back to its process, all-or-nothing."""

    @abstractmethod
    def create_inbox_item(self, item: InboxItem) -> tuple[InboxItem, bool]:
        """Insert an item. When both ``originProcessId`` and ``idempotencyKey`` are set and an
        item with the same pair exists in the tenant, store nothing and return that first item
        with ``False`` (also under concurrent creates)."""

    @abstractmethod
    def get_inbox_item(self, tenant_id: str, item_id: str) -> InboxItem:
        """The item. Raises ``NotFound``."""

    @abstractmethod
    def save_inbox_item(self, item: InboxItem, *, expected_revision: int,
                        message: InboxMessage | None = None,
                        deliveries: Sequence[WebhookDelivery] = ()) -> InboxItem:
        """Replace the stored item whole if its stored ``revision`` still equals
        ``expected_revision``; the stored (and returned) item has ``revision`` =
        ``expected_revision + 1``. ``message``, if given, is appended to its target's inbox
        (as ``append_message`` does) in the same all-or-nothing write. ``deliveries``: the
        webhook deliveries the change causes (as ``WebhookStore.add_deliveries`` adds them),
        in the same write on the SQL stores, right after it on MongoDB.
        Raises ``Conflict`` if the revision moved on (nothing written), ``NotFound`` if the
        item (or the message's target process) does not exist in the tenant.
        """

    @abstractmethod
    def redeliver_inbox_messages(self, limit: int = 100) -> int:
        """System query for housekeeping: append the messages of ``save_inbox_item`` calls
        that were cut short after the item was written (an adapter whose save is one
        transaction never has any). Idempotent; returns how many it appended."""

    @abstractmethod
    def list_inbox_items(self, tenant_id: str, query: InboxQuery) -> list[InboxItem]:
        """Items matching every filter of ``query``, newest first (``createdAt`` then ``id``,
        both descending), at most ``query.limit``; ``query.before`` continues after the
        given (createdAt, id)."""

    @abstractmethod
    def inbox_pending_counts(self, tenant_id: str,
                             user_id: str) -> tuple[dict[str, int], datetime | None]:
        """PENDING items assigned to the user: a count per criticality (only those with at
        least one item) and the oldest one's ``createdAt`` (None when there are none)."""

    @abstractmethod
    def open_items_by_criticality(self) -> dict[str, int]:
        """PENDING items of every tenant, a count per criticality (only those with at least
        one item). The one query across tenants, for the operator's metrics
        (``observability.metrics.ClusterCollector``): it returns no id."""
