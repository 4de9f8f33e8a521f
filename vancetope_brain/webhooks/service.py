"""Webhook subscriptions as a user-facing capability: create (the secret shown once), list,
read, change, delete, rotate the secret, read the delivery log, redeliver.

Who may: a subscription is its creator's and its tenant's operators' (a token with the
operator or platform role); another user of the tenant, like another tenant, finds none
(``not_found``). Creating one needs a project of the caller's tenant.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from vancetope_brain.config import Config
from vancetope_brain.errors import InvalidInput, NotFound
from vancetope_brain.identity import Principal
from vancetope_brain.models import new_id, utcnow
from vancetope_brain.models.webhooks import WebhookDelivery, WebhookEvent, WebhookSubscription
from vancetope_brain.store import Backend, IdentityStore, WebhookStore
from vancetope_brain.webhooks.destinations import check_destination
from vancetope_brain.webhooks.signing import new_secret

MAX_SUBSCRIPTIONS_PER_PROJECT = 20
"""Subscriptions one project may hold."""
MAX_DESCRIPTION = 500
MAX_LOG = 200
"""Most deliveries one read of the log returns."""

NOT_FOUND = "no webhook subscription {!r}"


class WebhookService:
    """``allow_private``: the operator's ``VANCETOPE_WEBHOOK_ALLOW_PRIVATE`` (checked at
    create and change; the sender checks again at every attempt)."""

    def __init__(self, store: WebhookStore, identity: IdentityStore, *,
                 allow_private: bool = False,
                 max_per_project: int = MAX_SUBSCRIPTIONS_PER_PROJECT,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self._store = store
        self._identity = identity
        self._allow_private = allow_private
        self._cap = max_per_project
        self._clock = clock

    @classmethod
    def on(cls, store: Backend, config: Config) -> WebhookService:
        return cls(store.port(WebhookStore), store.port(IdentityStore),
                   allow_private=config.webhook_allow_private)

    def create(self, who: Principal, project_id: str, url: str,
               events: Iterable[WebhookEvent], description: str = "") -> WebhookSubscription:
        """A new subscription of the project, enabled; returned with its secret (the only
        time but a rotation that it is)."""
        self._identity.get_project(who.tenant_id, project_id)
        now = self._clock()
        subscription = WebhookSubscription(
            id=new_id("whk"), tenant_id=who.tenant_id, project_id=project_id,
            created_by=who.user_id, url=self._checked(url), events=_events(events),
            description=_description(description), secret=new_secret(), created_at=now,
            updated_at=now)
        self._store.add_subscription(subscription, cap=self._cap)
        return subscription

    def list(self, who: Principal, project_id: str | None = None) -> list[WebhookSubscription]:
        """The subscriptions the caller may see (of one project when given), oldest first."""
        return [s for s in self._store.list_subscriptions(who.tenant_id, project_id)
                if self._mine(who, s)]

    def get(self, who: Principal, subscription_id: str) -> WebhookSubscription:
        subscription = self._store.get_subscription(who.tenant_id, subscription_id)
        if not self._mine(who, subscription):
            raise NotFound(NOT_FOUND.format(subscription_id))
        return subscription

    def update(self, who: Principal, subscription_id: str, *, url: str | None = None,
               events: Iterable[WebhookEvent] | None = None, description: str | None = None,
               enabled: bool | None = None) -> WebhookSubscription:
        """Change the given fields (None: keep)."""
        current = self.get(who, subscription_id)
        change: dict[str, Any] = {"updated_at": self._clock()}
        if url is not None:
            change["url"] = self._checked(url)
        if events is not None:
            change["events"] = _events(events)
        if description is not None:
            change["description"] = _description(description)
        if enabled is not None:
            change["enabled"] = enabled
        return self._store.save_subscription(current.model_copy(update=change))

    def rotate_secret(self, who: Principal, subscription_id: str) -> WebhookSubscription:
        """A new secret signs every attempt from now on (pending ones included); returned
        with it, once."""
        current = self.get(who, subscription_id)
        return self._store.save_subscription(current.model_copy(update={
            "secret": new_secret(), "updated_at": self._clock()}))

    def delete(self, who: Principal, subscription_id: str) -> WebhookSubscription:
        """Remove the subscription and its delivery log; returns it as it was."""
        current = self.get(who, subscription_id)
        self._store.delete_subscription(who.tenant_id, subscription_id)
        return current

    def deliveries(self, who: Principal, subscription_id: str,
                   limit: int = 50) -> builtins.list[WebhookDelivery]:
        """The subscription's deliveries, newest first (at most ``MAX_LOG``)."""
        self.get(who, subscription_id)
        return self._store.list_deliveries(who.tenant_id, subscription_id,
                                           min(max(limit, 1), MAX_LOG))

    def redeliver(self, who: Principal, delivery_id: str) -> WebhookDelivery:
        """Send a delivered or dead delivery again, under the same ``webhook-id``, with a new
        round of the retry schedule; ``conflict`` while it is still pending."""
        delivery = self._store.get_delivery(who.tenant_id, delivery_id)
        self.get(who, delivery.subscription_id)
        return self._store.requeue_delivery(who.tenant_id, delivery_id, self._clock())

    def _mine(self, who: Principal, subscription: WebhookSubscription) -> bool:
        return subscription.created_by == who.user_id or who.operator

    def _checked(self, url: str) -> str:
        check_destination(url, allow_private=self._allow_private)
        return url


def _events(events: Iterable[WebhookEvent]) -> list[WebhookEvent]:
    chosen = sorted(set(events), key=list(WebhookEvent).index)
    if not chosen:
        raise InvalidInput(f"name at least one event: {', '.join(e.value for e in WebhookEvent)}")
    return chosen


def _description(text: str) -> str:
    if len(text) > MAX_DESCRIPTION:
        raise InvalidInput(f"a description has at most {MAX_DESCRIPTION} characters")
    return text
