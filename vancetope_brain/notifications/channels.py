"""The WebSocket push channel and the mobile placeholder (the e-mail channel is in ``mail``)."""

from __future__ import annotations

from vancetope_brain import keys
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.events.presence import Presence
from vancetope_brain.models.inbox import Criticality, DeliveryStatus
from vancetope_brain.notifications.model import NotifyEvent
from vancetope_brain.notifications.prefs import NotificationPrefs


def admits(notify_mode: str, criticality: Criticality) -> bool:
    """Whether a connection opened with ``notifyMode`` wants an item of this criticality."""
    return notify_mode == "all" or (notify_mode == "critical-only"
                                    and criticality is Criticality.CRITICAL)


class WsChannel:
    """Pushes ``inbox-item-added`` into the user's feed, which every gateway holding one of
    the user's sockets follows. Active whenever the user is online (§12.2): no settings,
    no quiet hours; only each connection's ``notifyMode`` (§12.4) can opt out."""

    name = "ws"

    def __init__(self, presence: Presence, events: EventBus) -> None:
        self._presence = presence
        self._events = events

    def can_handle(self, event: NotifyEvent, prefs: NotificationPrefs) -> str | None:
        modes = self._presence.user_modes(event.tenant_id, event.user_id)
        if not modes:
            return "no active WebSocket connection"
        if not any(admits(mode, event.criticality) for mode in modes):
            return "connections opted out (notifyMode)"
        return None

    def deliver(self, event: NotifyEvent,
                prefs: NotificationPrefs) -> tuple[DeliveryStatus, str | None]:
        # The feed reaches every connection of the user: a gateway must drop the push on a
        # connection whose own notifyMode does not admit it (``admits``).
        self._events.publish(keys.user_feed(event.tenant_id, event.user_id), "",
                             EventType.INBOX_ITEM_ADDED, {"item": event.item})
        return DeliveryStatus.SENT, None


class MobileChannel:
    """Mobile push (v2): listed so the delivery log shows why nobody's phone buzzed."""

    name = "mobile"
    REASON = "no registered device (mobile push is not available yet)"

    def can_handle(self, event: NotifyEvent, prefs: NotificationPrefs) -> str | None:
        return self.REASON

    def deliver(self, event: NotifyEvent,
                prefs: NotificationPrefs) -> tuple[DeliveryStatus, str | None]:
        return DeliveryStatus.SKIPPED, self.REASON
