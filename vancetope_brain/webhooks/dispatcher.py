"""Sending due deliveries: claim, sign, post, log the attempt, schedule the next or give up.

Runs in workers only (the ``vancetope.webhooks`` task on the maintenance queue, sent with
every sweep). Each delivery is claimed for as long as one attempt can take plus a margin
(``WebhookStore.claim_deliveries``); a worker that dies mid-attempt leaves the delivery
due again when the claim runs out, and the next attempt carries the same ``webhook-id``
(at least once). A delivery that fails every attempt of the schedule goes DEAD; only a
manual redelivery sends it again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from vancetope_brain.errors import NotFound
from vancetope_brain.models import new_id, utcnow
from vancetope_brain.models.webhooks import (
    WebhookAttempt,
    WebhookDelivery,
    WebhookDeliveryStatus,
)
from vancetope_brain.observability import metrics
from vancetope_brain.store import WebhookStore
from vancetope_brain.webhooks.sender import WebhookSender
from vancetope_brain.webhooks.signing import sign

log = logging.getLogger(__name__)

RETRY_SCHEDULE: tuple[float, ...] = (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
"""Seconds before each attempt, counted from the failure of the one before (the first:
from the event) — the Standard Webhooks suggestion: at once, 5 s, 5 min, 30 min, 2 h, 5 h,
10 h, 10 h; eight attempts over about 27.5 hours (``VANCETOPE_WEBHOOK_RETRY_SCHEDULE``)."""
MAX_ATTEMPTS_KEPT = 50
"""Attempts a delivery's log keeps (the newest), across redeliveries."""
CLAIM_MARGIN = 5.0
"""Seconds a claim outlasts the longest attempt."""


class WebhookDispatcher:
    """Sends what is due. ``schedule``: the retry schedule (tests inject a short one)."""

    def __init__(self, store: WebhookStore, sender: WebhookSender, *,
                 schedule: Sequence[float] = RETRY_SCHEDULE,
                 clock: Callable[[], datetime] = utcnow) -> None:
        if not schedule:
            raise ValueError("a retry schedule has one attempt at least")
        self._store = store
        self._sender = sender
        self._schedule = tuple(schedule)
        self._clock = clock

    def deliver_due(self, *, budget: float = 5.0, limit: int = 100) -> int:
        """Claim and send due deliveries one at a time, until none is due, ``limit`` were
        sent or ``budget`` seconds have passed (an attempt under way finishes). Returns how
        many attempts were made."""
        claim, done, started = new_id("claim"), 0, time.monotonic()
        while done < limit and time.monotonic() - started < budget:
            now = self._clock()
            until = now + timedelta(seconds=self._sender.longest + CLAIM_MARGIN)
            claimed = self._store.claim_deliveries(now, until, claim, 1)
            if not claimed:
                break
            self.attempt(claimed[0], claim)
            done += 1
        return done

    def attempt(self, delivery: WebhookDelivery, claim: str) -> WebhookDelivery:
        """One attempt of a claimed delivery, written to its log; returns it as written."""
        at = self._clock()
        try:
            subscription = self._store.get_subscription(delivery.tenant_id,
                                                        delivery.subscription_id)
        except NotFound:  # deleted meanwhile, with its deliveries
            return delivery
        if not subscription.enabled:
            attempt = WebhookAttempt(at=at, duration_ms=0,
                                     error="the subscription is disabled; enable it and "
                                           "redeliver")
            return self._finish(delivery, claim, attempt, ok=False, last=True)
        body = json.dumps(delivery.body, separators=(",", ":")).encode()
        headers = sign(subscription.secret, delivery.id, int(at.timestamp()), body)
        outcome = self._sender.post(subscription.url, headers, body)
        attempt = WebhookAttempt(at=at, status_code=outcome.status_code,
                                 duration_ms=outcome.duration_ms, error=outcome.error)
        return self._finish(delivery, claim, attempt, ok=outcome.error is None,
                            last=delivery.tries + 1 >= len(self._schedule))

    def _finish(self, delivery: WebhookDelivery, claim: str, attempt: WebhookAttempt, *,
                ok: bool, last: bool) -> WebhookDelivery:
        tries = delivery.tries + 1
        now = self._clock()
        if ok:
            status, next_at = WebhookDeliveryStatus.DELIVERED, now
        elif last:
            status, next_at = WebhookDeliveryStatus.DEAD, now
            log.warning("webhook delivery %s of subscription %s is dead after %s attempts "
                        "(last: %s)", delivery.id, delivery.subscription_id, tries,
                        attempt.error)
        else:
            status = WebhookDeliveryStatus.PENDING
            next_at = now + timedelta(seconds=self._schedule[tries])
        metrics.WEBHOOK_ATTEMPTS.labels("ok" if ok else "dead" if last else "retry").inc()
        written = delivery.model_copy(update={
            "status": status, "tries": tries, "next_at": next_at, "updated_at": now,
            "attempts": [*delivery.attempts, attempt][-MAX_ATTEMPTS_KEPT:]})
        if not self._store.finish_attempt(written, claim):
            log.info("webhook delivery %s was claimed by another sender meanwhile",
                     delivery.id)
        return written
