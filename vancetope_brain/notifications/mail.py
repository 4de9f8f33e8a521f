"""The e-mail channel: CRITICAL items at once, the rest collected into one message per user,
address and batch interval (``flush``, run by the beat job); what quiet hours hold back is
queued and sent by the first ``flush`` after them.

Not a module named ``email``: that is the standard library package this one uses.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
from collections.abc import Callable
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import NamedTuple

from vancetope_brain.config import SmtpConfig
from vancetope_brain.errors import NotFound
from vancetope_brain.models.base import utcnow
from vancetope_brain.models.inbox import (
    Criticality,
    DeliveryStatus,
    InboxItem,
    ItemStatus,
    NotificationDelivery,
)
from vancetope_brain.notifications.model import NotifyEvent, item_link
from vancetope_brain.notifications.prefs import NotificationPrefs
from vancetope_brain.settings import SettingsApi, SettingsService
from vancetope_brain.store import DeliveryStore, UserInboxStore

log = logging.getLogger(__name__)

SUBJECT_PREFIX = "[Vancetope]"
ITEM_GONE = "item no longer exists"
QUIET_HOURS = "quiet hours"
"""The reason of a delivery QUEUED because quiet hours hold it back (until they end)."""


class _Entry(NamedTuple):
    """One item as an e-mail lists it."""

    criticality: Criticality
    title: str
    body: str | None
    link: str


class _Queued(NamedTuple):
    """A QUEUED delivery and the settings it is sent with (its project's cascade)."""

    delivery: NotificationDelivery
    prefs: NotificationPrefs

    def due(self, now: datetime) -> bool:
        interval = timedelta(seconds=self.prefs.email_batch_interval_sec)
        return self.delivery.created_at + interval <= now


class EmailChannel:
    """Active when the user has ``notify.email.address`` and the item reaches
    ``notify.email.minCriticality`` (§12.2), both resolved over the cascade of the item's
    project.

    CRITICAL items (and every item when ``batchIntervalSec`` is 0) are sent at
    once; the others are logged QUEUED and ``flush`` sends them. Quiet hours delay,
    never drop: an item they hold back (CRITICAL passes while ``exceptCritical``) is
    QUEUED with the reason "quiet hours" and goes out with the first batch after them.
    ``flush`` must run in one place only (the beat job): two concurrent runs could mail
    a batch twice.
    """

    name = "email"

    def __init__(self, smtp: SmtpConfig | None, store: DeliveryStore, items: UserInboxStore,
                 settings: SettingsService, base_url: str,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self._smtp = smtp
        self._store = store
        self._items = items
        self._settings = settings
        self._base_url = base_url
        self._clock = clock

    def can_handle(self, event: NotifyEvent, prefs: NotificationPrefs) -> str | None:
        if reason := self._unreachable(prefs.email_address):
            return reason
        if event.criticality.rank < prefs.email_min_criticality.rank:
            return "below notify.email.minCriticality"
        return None

    def deliver(self, event: NotifyEvent,
                prefs: NotificationPrefs) -> tuple[DeliveryStatus, str | None]:
        if prefs.quiet_for(event.criticality, self._clock()):
            return DeliveryStatus.QUEUED, QUIET_HOURS
        if event.criticality is not Criticality.CRITICAL and \
                prefs.email_batch_interval_sec > 0:
            return DeliveryStatus.QUEUED, None
        assert prefs.email_address is not None  # can_handle checked it
        entry = _Entry(event.criticality, event.title, event.body, event.deep_link)
        error = self._send(prefs.email_address, [entry], self._clock())
        return (DeliveryStatus.FAILED, error) if error else (DeliveryStatus.SENT, None)

    def flush(self, now: datetime) -> int:
        """Send what is due at ``now``; returns how many messages were sent.

        Each QUEUED delivery is read with the settings of its user in its item's project
        (as when it was queued) and waits while those settings' quiet hours hold it. The
        rest are batched per user and resolved address, so items of projects that name
        different addresses go out as one message each. A batch goes out once one of its
        deliveries is ``batchIntervalSec`` old (by its own settings), and takes the rest of
        the batch along."""
        prefs: dict[tuple[str, str | None, str], NotificationPrefs] = {}
        batches: dict[tuple[str, str, str | None], list[_Queued]] = {}
        for delivery in self._store.queued_deliveries(self.name):
            scope = (delivery.tenant_id, delivery.project_id, delivery.user_id)
            if scope not in prefs:
                prefs[scope] = NotificationPrefs.from_settings(SettingsApi(self._settings, *scope))
            queued = _Queued(delivery, prefs[scope])
            if queued.prefs.quiet_for(delivery.criticality, now):
                continue
            batches.setdefault((delivery.tenant_id, delivery.user_id,
                                queued.prefs.email_address), []).append(queued)
        return sum(self._send_batch(tenant_id, address, [q.delivery for q in batch], now)
                   for (tenant_id, _, address), batch in batches.items()
                   if any(q.due(now) for q in batch))

    def _send_batch(self, tenant_id: str, address: str | None,
                    deliveries: list[NotificationDelivery], now: datetime) -> int:
        """Mail the batch's items to ``address`` and finish each delivery; 1 if a message
        went out."""
        if reason := self._unreachable(address):  # settings or config changed since queued
            self._finish(deliveries, DeliveryStatus.SKIPPED, reason)
            return 0
        assert address is not None  # _unreachable checked it
        entries: dict[str, _Entry] = {}
        listed: list[NotificationDelivery] = []
        for delivery in deliveries:
            try:
                item = self._items.get_inbox_item(tenant_id, delivery.item_id)
            except NotFound:
                self._finish([delivery], DeliveryStatus.SKIPPED, ITEM_GONE)
                continue
            if stale := _settled(item, delivery.user_id):  # nothing left to tell this user
                self._finish([delivery], DeliveryStatus.SKIPPED, stale)
                continue
            entries[item.id] = _Entry(item.criticality, item.title, None,
                                      item_link(self._base_url, item.id))
            listed.append(delivery)
        if not listed:
            return 0
        error = self._send(address, list(entries.values()), now)
        if error:
            self._finish(listed, DeliveryStatus.FAILED, error)
            return 0
        self._finish(listed, DeliveryStatus.SENT, sent_at=now)
        return 1

    def _finish(self, deliveries: list[NotificationDelivery], status: DeliveryStatus,
                reason: str | None = None, sent_at: datetime | None = None) -> None:
        for delivery in deliveries:
            self._store.finish_delivery(delivery.tenant_id, delivery.id, status,
                                        reason=reason, sent_at=sent_at)

    def _unreachable(self, address: str | None) -> str | None:
        if self._smtp is None:
            return "SMTP not configured"
        if address is None:
            return "no notify.email.address"
        return None

    def _send(self, to: str, entries: list[_Entry], now: datetime) -> str | None:
        """Send one message; the error text on failure (never raises, never shows the
        password)."""
        smtp = self._smtp
        assert smtp is not None  # _unreachable checked it
        message = _compose(smtp.sender, to, entries, now)
        try:
            with smtplib.SMTP(smtp.host, smtp.port, timeout=smtp.timeout) as client:
                if smtp.starttls:
                    client.starttls(context=ssl.create_default_context())
                if smtp.user:
                    client.login(smtp.user, smtp.password or "")
                client.send_message(message)
        except (smtplib.SMTPException, OSError) as e:
            error = f"SMTP error: {e}"
            if smtp.password:
                error = error.replace(smtp.password, "***")
            log.warning("notification e-mail via %s:%s failed: %s", smtp.host, smtp.port, error)
            return error
        return None


def _settled(item: InboxItem, user_id: str) -> str | None:
    """Why a queued item needs no e-mail any more: answered, dismissed or delegated away."""
    if item.status is not ItemStatus.PENDING:
        return f"item already {item.status.value}"
    if item.assigned_to_user_id != user_id:
        return "item delegated to another user"
    return None


def _compose(sender: str, to: str, entries: list[_Entry], now: datetime) -> EmailMessage:
    if len(entries) == 1:
        only = entries[0]
        flag = "CRITICAL: " if only.criticality is Criticality.CRITICAL else ""
        subject = f"{SUBJECT_PREFIX} {flag}{_one_line(only.title)}"
        intro = "A new item is waiting in your Vancetope inbox:"
    else:
        subject = f"{SUBJECT_PREFIX} {len(entries)} new inbox items"
        intro = f"{len(entries)} new items are waiting in your Vancetope inbox:"
    parts = [intro]
    for entry in entries:
        lines = [f"[{entry.criticality.value}] {entry.title}"]
        if entry.body:
            lines.append(entry.body)
        lines.append(entry.link)
        parts.append("\n".join(lines))
    message = EmailMessage()
    message["Subject"] = subject[:200]
    message["From"] = sender
    message["To"] = to
    message["Date"] = format_datetime(now)
    # An explicit domain: make_msgid's default asks DNS for this host's name.
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or "localhost")
    message.set_content("\n\n".join(parts) + "\n")
    return message


def _one_line(text: str) -> str:
    """Header-safe: a title with line breaks would be refused as a header value."""
    return " ".join(text.split())
