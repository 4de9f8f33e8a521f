"""Webhook subscriptions and their deliveries (issue 33; docs/architecture.md, "Webhooks").

A subscription belongs to one project and names the events it wants; a delivery is one
event's message to one subscription, sent as a Standard Webhooks POST and retried on a
back-off schedule until it succeeds or goes DEAD.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Document, Wire, utcnow


class WebhookEvent(StrEnum):
    """What a subscription can ask for (the ``type`` of a delivery's body)."""

    PROCESS_DONE = "process.done"
    PROCESS_FAILED = "process.failed"
    PROCESS_BLOCKED = "process.blocked"
    INBOX_ITEM_CREATED = "inbox.item.created"
    INBOX_ITEM_ANSWERED = "inbox.item.answered"
    SCHEDULE_RUN_FINISHED = "schedule.run.finished"


class WebhookSubscription(Document):
    """One project's subscription. ``secret`` (``whsec_<base64>``) signs its deliveries; it
    leaves the store only to sign, and in the replies of create and rotate, once.
    ``revision`` grows with every change (a compare-and-set of ``save_subscription``)."""

    id: str
    tenant_id: str
    project_id: str
    created_by: str
    url: str
    events: list[WebhookEvent]
    description: str = ""
    enabled: bool = True
    secret: str = Field(repr=False)
    revision: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class WebhookDeliveryStatus(StrEnum):
    PENDING = "PENDING"
    """Waiting for its next attempt (``nextAt``)."""
    DELIVERED = "DELIVERED"
    """A 2xx answered an attempt."""
    DEAD = "DEAD"
    """Every attempt of the schedule failed; only a manual redelivery sends it again."""


class WebhookAttempt(Wire):
    """One POST of a delivery: when, the answer's status code (None when none came), how
    long it took, and why it failed (None on success)."""

    at: datetime
    status_code: int | None = None
    duration_ms: int
    error: str | None = None


class WebhookDelivery(Document):
    """One event's message to one subscription. ``id`` is the ``webhook-id`` every attempt
    and every redelivery sends; ``body`` is the JSON sent, fixed at creation. ``tries``
    counts the attempts of the current round (a redelivery starts a new one); ``claim``
    names the worker's claim on the delivery, which ``nextAt`` ends: a worker that dies
    mid-delivery leaves it due again when its claim runs out."""

    id: str
    tenant_id: str
    project_id: str
    subscription_id: str
    event: WebhookEvent
    body: dict[str, Any]
    status: WebhookDeliveryStatus = WebhookDeliveryStatus.PENDING
    tries: int = 0
    next_at: datetime
    claim: str | None = None
    attempts: list[WebhookAttempt] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class SubscriptionView(Wire):
    """A subscription as replies show it: everything but its secret."""

    id: str
    project_id: str
    url: str
    events: list[WebhookEvent]
    description: str
    enabled: bool
    created_by: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, subscription: WebhookSubscription) -> SubscriptionView:
        return cls.model_validate(subscription.model_dump(include=set(cls.model_fields)))


class DeliveryView(Wire):
    """A delivery as the log shows it: its ``webhook-id``, event, state and attempts."""

    id: str
    subscription_id: str
    event: WebhookEvent
    status: WebhookDeliveryStatus
    tries: int
    next_at: datetime
    attempts: list[WebhookAttempt]
    body: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, delivery: WebhookDelivery) -> DeliveryView:
        return cls.model_validate(delivery.model_dump(include=set(cls.model_fields)))
