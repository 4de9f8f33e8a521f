"""Outbound webhooks (issue 33; docs/architecture.md, "Webhooks"): a project's subscriptions,
the deliveries events leave for them, and the sender that posts them signed as the
Standard Webhooks specification says.

Rule: imports the store, models and config only; the parts that publish events (the event
outbox, the Inbox service, schedules) call ``WebhookEmitter`` and never the sender, which
runs only in workers (``WebhookDispatcher``, from the ``vancetope.webhooks`` task).
"""

from vancetope_brain.webhooks.destinations import check_destination
from vancetope_brain.webhooks.dispatcher import RETRY_SCHEDULE, WebhookDispatcher
from vancetope_brain.webhooks.emitter import WebhookEmitter
from vancetope_brain.webhooks.sender import WebhookSender
from vancetope_brain.webhooks.service import WebhookService
from vancetope_brain.webhooks.signing import new_secret, sign

__all__ = ["RETRY_SCHEDULE", "WebhookDispatcher", "WebhookEmitter",
           "WebhookSender", "WebhookService", "check_destination", "new_secret", "sign"]
