"""The dispatcher: every channel is asked about every event, and every answer is logged."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from vancetope_brain.config import Config
from vancetope_brain.events import EventBus
from vancetope_brain.events.presence import Presence
from vancetope_brain.models.base import new_id, utcnow
from vancetope_brain.models.inbox import DeliveryStatus, NotificationDelivery
from vancetope_brain.notifications.channels import MobileChannel, WsChannel
from vancetope_brain.notifications.mail import EmailChannel
from vancetope_brain.notifications.model import BatchChannel, Channel, NotifyEvent
from vancetope_brain.notifications.prefs import NotificationPrefs
from vancetope_brain.observability import metrics
from vancetope_brain.settings import SettingsApi, SettingsService
from vancetope_brain.store import DeliveryStore, UserInboxStore

log = logging.getLogger(__name__)


class NotificationDispatcher:
    """Delivers an event over every channel that takes it — not a fallback chain, so a
    CRITICAL item may reach the user by WebSocket and e-mail at once (§12.1) — and writes
    one delivery per channel, taken or not, so "why was nobody told?" has an answer (§12.6).
    """

    def __init__(self, store: DeliveryStore, settings: SettingsService, channels: Sequence[Channel],
                 clock: Callable[[], datetime] = utcnow) -> None:
        self._store = store
        self._settings = settings
        self.channels = list(channels)
        self._clock = clock

    def notify(self, event: NotifyEvent) -> None:
        """Offer the event to each channel in order. A channel that raises is logged and
        recorded FAILED; the others still run. Raises only if the store does."""
        prefs = NotificationPrefs.from_settings(
            SettingsApi(self._settings, event.tenant_id, event.project_id, event.user_id))
        for channel in self.channels:
            try:
                reason = channel.can_handle(event, prefs)
                status, reason = ((DeliveryStatus.SKIPPED, reason) if reason is not None
                                  else channel.deliver(event, prefs))
            except Exception as e:
                log.exception("notification channel %s failed on item %s of tenant %s",
                              channel.name, event.item_id, event.tenant_id)
                status, reason = DeliveryStatus.FAILED, f"{type(e).__name__}: {e}"
            now = self._clock()
            delivery = NotificationDelivery(
                id=new_id("dlv"), tenant_id=event.tenant_id, item_id=event.item_id,
                user_id=event.user_id, project_id=event.project_id, channel=channel.name,
                status=status, reason=reason,
                criticality=event.criticality, created_at=now,
                sent_at=now if status is DeliveryStatus.SENT else None)
            self._store.add_delivery(delivery)
            metrics.NOTIFICATIONS.labels(channel.name, status.value).inc()

    def flush(self, now: datetime) -> int:
        """The beat job: send what batching channels have queued and is due at ``now``;
        returns how many messages went out."""
        return sum(channel.flush(now) for channel in self.channels
                   if isinstance(channel, BatchChannel))


def build_dispatcher(config: Config, store: DeliveryStore, items: UserInboxStore,
                     settings: SettingsService,
                     presence: Presence, events: EventBus,
                     clock: Callable[[], datetime] = utcnow) -> NotificationDispatcher:
    """The deployment's dispatcher: WebSocket, e-mail, mobile — in that order, so the
    delivery log reads the same for every event."""
    channels: list[Channel] = [
        WsChannel(presence, events),
        EmailChannel(config.smtp, store, items, settings, config.base_url(), clock),
        MobileChannel(),
    ]
    return NotificationDispatcher(store, settings, channels, clock)
