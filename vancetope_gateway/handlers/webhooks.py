"""Webhook frames (issue 33 part 2): a project's subscriptions, their secrets and their
delivery logs. A subscription is its creator's and their tenant's operators'; anyone else
gets ``not_found``. The secret is in the replies of ``webhook-create`` and
``webhook-rotate-secret`` only."""

from __future__ import annotations

from pydantic import Field

from vancetope_brain.models.base import Wire
from vancetope_brain.models.webhooks import DeliveryView, SubscriptionView, WebhookEvent
from vancetope_gateway.handlers.declare import Context, Id, frame

Url = Field(min_length=1, max_length=2000)
Events = Field(min_length=1, max_length=len(WebhookEvent))
Description = Field(default="", max_length=500)


class WebhookNew(Wire):
    """A subscription of a project of the caller's tenant: where to POST and which events."""

    project_id: str = Id
    url: str = Url
    events: list[WebhookEvent] = Events
    description: str = Description


class WebhookWithSecret(Wire):
    """Reply to ``webhook-create`` and ``webhook-rotate-secret``: the subscription and its
    secret (``whsec_…``), shown this once — keep it to verify the signatures."""

    subscription: SubscriptionView
    secret: str


class WebhookQuery(Wire):
    """The caller's subscriptions (every one of the tenant for an operator), of one project
    when given."""

    project_id: str | None = Field(default=None, min_length=1, max_length=64)


class WebhooksListed(Wire):
    """Reply to ``webhook-list``: oldest first, without secrets."""

    subscriptions: list[SubscriptionView]


class WebhookRef(Wire):
    """Names a subscription (``webhook-get``, ``webhook-delete``, ``webhook-rotate-secret``)."""

    subscription_id: str = Id


class WebhookChange(Wire):
    """The fields to change (absent: kept); ``enabled`` false stops new deliveries and makes
    pending ones dead at their next attempt (a redelivery sends them once enabled again)."""

    subscription_id: str = Id
    url: str | None = Field(default=None, min_length=1, max_length=2000)
    events: list[WebhookEvent] | None = Field(default=None, min_length=1,
                                              max_length=len(WebhookEvent))
    description: str | None = Field(default=None, max_length=500)
    enabled: bool | None = None


class WebhookDetail(Wire):
    """Reply to ``webhook-get``, ``webhook-update`` and ``webhook-delete`` (as it was)."""

    subscription: SubscriptionView


class WebhookLogQuery(Wire):
    """A subscription's delivery log, newest first."""

    subscription_id: str = Id
    limit: int = Field(default=50, ge=1, le=200)


class WebhookLog(Wire):
    """Reply to ``webhook-deliveries``: each delivery with its attempts (time, status code,
    duration, error)."""

    deliveries: list[DeliveryView]


class DeliveryRef(Wire):
    """Names a delivery to send again (``webhook-redeliver``)."""

    delivery_id: str = Field(min_length=1, max_length=80)


class Redelivered(Wire):
    """Reply to ``webhook-redeliver``: the delivery, PENDING again under its ``webhook-id``."""

    delivery: DeliveryView


@frame("webhook-create")
def webhook_create(conn: Context, data: WebhookNew) -> WebhookWithSecret:
    sub = conn.gateway.webhooks.create(conn.who, data.project_id, data.url, data.events,
                                       data.description)
    return WebhookWithSecret(subscription=SubscriptionView.of(sub), secret=sub.secret)


@frame("webhook-list")
def webhook_list(conn: Context, data: WebhookQuery) -> WebhooksListed:
    return WebhooksListed(subscriptions=[
        SubscriptionView.of(s) for s in conn.gateway.webhooks.list(conn.who, data.project_id)])


@frame("webhook-get")
def webhook_get(conn: Context, data: WebhookRef) -> WebhookDetail:
    sub = conn.gateway.webhooks.get(conn.who, data.subscription_id)
    return WebhookDetail(subscription=SubscriptionView.of(sub))


@frame("webhook-update")
def webhook_update(conn: Context, data: WebhookChange) -> WebhookDetail:
    sub = conn.gateway.webhooks.update(conn.who, data.subscription_id, url=data.url,
                                       events=data.events, description=data.description,
                                       enabled=data.enabled)
    return WebhookDetail(subscription=SubscriptionView.of(sub))


@frame("webhook-delete")
def webhook_delete(conn: Context, data: WebhookRef) -> WebhookDetail:
    sub = conn.gateway.webhooks.delete(conn.who, data.subscription_id)
    return WebhookDetail(subscription=SubscriptionView.of(sub))


@frame("webhook-rotate-secret")
def webhook_rotate_secret(conn: Context, data: WebhookRef) -> WebhookWithSecret:
    sub = conn.gateway.webhooks.rotate_secret(conn.who, data.subscription_id)
    return WebhookWithSecret(subscription=SubscriptionView.of(sub), secret=sub.secret)


@frame("webhook-deliveries")
def webhook_deliveries(conn: Context, data: WebhookLogQuery) -> WebhookLog:
    found = conn.gateway.webhooks.deliveries(conn.who, data.subscription_id, data.limit)
    return WebhookLog(deliveries=[DeliveryView.of(d) for d in found])


@frame("webhook-redeliver")
def webhook_redeliver(conn: Context, data: DeliveryRef) -> Redelivered:
    return Redelivered(delivery=DeliveryView.of(
        conn.gateway.webhooks.redeliver(conn.who, data.delivery_id)))
