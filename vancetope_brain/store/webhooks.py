"""The webhooks port: a project's subscriptions and the delivery log of each (issue 33)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import datetime

from vancetope_brain.errors import Conflict, LimitExceeded
from vancetope_brain.models.webhooks import (
    WebhookDelivery,
    WebhookDeliveryStatus,
    WebhookSubscription,
)
from vancetope_brain.store.backend import Port


class WebhookStore(Port):
    """Subscriptions (per tenant and project) and their deliveries.

    A delivery is written once per (subscription, event) under an id derived from both
    (``add_deliveries`` ignores an id it holds), so an event emitted twice — by a publisher
    that died before removing its outbox row, a tool call the journal replays — is sent as
    one message. Sending is claimed: ``claim_deliveries`` moves a due delivery's ``nextAt``
    to the end of the claim with a compare-and-set, so two workers never send one attempt,
    and a worker that dies mid-send leaves it due again when the claim runs out (at least
    once, under the same id).
    """

    @abstractmethod
    def add_subscription(self, subscription: WebhookSubscription, *, cap: int) -> None:
        """Insert a subscription; ``LimitExceeded`` when its project already holds ``cap``
        (checked in the insert's transaction on the SQL stores; on MongoDB two racing
        inserts may pass it by one)."""

    @abstractmethod
    def get_subscription(self, tenant_id: str, subscription_id: str) -> WebhookSubscription:
        """The tenant's subscription; ``NotFound`` otherwise."""

    @abstractmethod
    def list_subscriptions(self, tenant_id: str,
                           project_id: str | None = None) -> list[WebhookSubscription]:
        """The tenant's subscriptions (of one project when given), oldest first."""

    @abstractmethod
    def save_subscription(self, subscription: WebhookSubscription) -> WebhookSubscription:
        """Write a changed subscription if its stored ``revision`` is still the one it was
        read with; returns it with ``revision`` + 1. ``Conflict`` when another change came
        first, ``NotFound`` when it is gone."""

    @abstractmethod
    def delete_subscription(self, tenant_id: str, subscription_id: str) -> None:
        """Remove the subscription and its deliveries; ``NotFound`` when it is not the
        tenant's."""

    @abstractmethod
    def add_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> int:
        """Insert deliveries, skipping ids already stored; returns how many were new."""

    @abstractmethod
    def claim_deliveries(self, now: datetime, until: datetime, claim: str,
                         limit: int) -> list[WebhookDelivery]:
        """System query for the sender: PENDING deliveries of every tenant due at ``now``
        (``nextAt <= now``), earliest first, at most ``limit``, each claimed — ``claim``
        written and ``nextAt`` moved to ``until`` in a compare-and-set on its ``nextAt``,
        so a delivery is claimed by one caller. Returns them as claimed."""

    @abstractmethod
    def finish_attempt(self, delivery: WebhookDelivery, claim: str) -> bool:
        """Write a delivery after an attempt (status, tries, nextAt, attempts) if it still
        holds ``claim``; False, changing nothing, when the claim ran out and another took
        it (or the delivery is gone)."""

    @abstractmethod
    def get_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery:
        """The tenant's delivery; ``NotFound`` otherwise."""

    @abstractmethod
    def list_deliveries(self, tenant_id: str, subscription_id: str,
                        limit: int = 50) -> list[WebhookDelivery]:
        """A subscription's deliveries, newest first, at most ``limit``."""

    @abstractmethod
    def requeue_delivery(self, tenant_id: str, delivery_id: str,
                         now: datetime) -> WebhookDelivery:
        """A manual redelivery: a DELIVERED or DEAD delivery becomes PENDING, due at
        ``now``, with a new round of tries (its id and attempts kept). ``Conflict`` when it
        is PENDING already, ``NotFound`` when it is not the tenant's."""


def project_full(held: int, cap: int) -> LimitExceeded:
    """The refusal of ``add_subscription`` when the project holds ``held`` of ``cap``, said
    alike by every adapter."""
    return LimitExceeded(f"the project holds {held} webhook subscriptions, the most it may "
                         f"({cap}); delete one first")


def requeued(delivery: WebhookDelivery, now: datetime) -> WebhookDelivery:
    """What ``requeue_delivery`` writes for ``delivery``; ``Conflict`` while it is pending."""
    if delivery.status is WebhookDeliveryStatus.PENDING:
        raise Conflict("the delivery is still pending; it is sent at its next attempt")
    return delivery.model_copy(update={
        "status": WebhookDeliveryStatus.PENDING, "tries": 0, "next_at": now, "claim": None,
        "updated_at": now})
