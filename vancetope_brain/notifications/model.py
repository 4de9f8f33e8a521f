"""What a channel is told (``NotifyEvent``) and what a channel is (``Channel``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from vancetope_brain.models.inbox import Criticality, DeliveryStatus

if TYPE_CHECKING:
    from vancetope_brain.notifications.prefs import NotificationPrefs


def item_link(base_url: str, item_id: str) -> str:
    """The deep link to one inbox item: the one format for pushes and e-mails alike."""
    return f"{base_url}/inbox/{item_id}"


@dataclass(frozen=True)
class NotifyEvent:
    """A new inbox item for one user (user-interaction.txt §12.1). Frozen, so channels can
    be handed the same object and fields can be added without breaking them.

    ``item`` is the item's JSON exactly as clients get it pushed; ``project_id``, when
    known, lets a project's settings take part in the cascade.
    """

    tenant_id: str
    user_id: str
    item_id: str
    criticality: Criticality
    title: str
    body: str | None
    deep_link: str
    item: dict[str, Any]
    project_id: str | None = None


class Channel(Protocol):
    """One way of reaching a user. The dispatcher asks every channel about every event."""

    name: str

    def can_handle(self, event: NotifyEvent, prefs: NotificationPrefs) -> str | None:
        """None when this channel takes the event; else why not (the SKIPPED reason in the
        delivery log, e.g. ``"no notify.email.address"``)."""

    def deliver(self, event: NotifyEvent,
                prefs: NotificationPrefs) -> tuple[DeliveryStatus, str | None]:
        """Deliver (or queue) an event ``can_handle`` took: the status to log and, for
        FAILED, the error. Delivery failures are reported, not raised."""


@runtime_checkable
class BatchChannel(Channel, Protocol):
    """A channel that queues deliveries (status QUEUED) and sends them in batches."""

    def flush(self, now: datetime) -> int:
        """Send every batch that is due at ``now``, finishing its QUEUED deliveries;
        returns how many messages went out."""
