"""A user's notification settings, resolved once per event, and quiet hours."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, time, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vancetope_brain.models.inbox import Criticality
from vancetope_brain.settings import SettingsApi

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NotificationPrefs:
    """The ``notify.*`` settings of one user (user-interaction.txt §12.3)."""

    email_address: str | None
    email_min_criticality: Criticality
    email_batch_interval_sec: int
    quiet_start: str | None
    quiet_end: str | None
    quiet_except_critical: bool
    time_zone: str

    @classmethod
    def from_settings(cls, settings: SettingsApi) -> NotificationPrefs:
        """Read through the cascade of ``settings`` (``SettingsApi.defaults()``: every
        key at its default)."""
        return cls(
            email_address=settings.get("notify.email.address"),
            email_min_criticality=Criticality(settings.get("notify.email.minCriticality")),
            email_batch_interval_sec=settings.get("notify.email.batchIntervalSec"),
            quiet_start=settings.get("notify.quietHours.start"),
            quiet_end=settings.get("notify.quietHours.end"),
            quiet_except_critical=settings.get("notify.quietHours.exceptCritical"),
            time_zone=settings.get("notify.timeZone"),
        )

    def quiet_for(self, criticality: Criticality, now_utc: datetime) -> bool:
        """Whether quiet hours hold back an item of this criticality at ``now_utc``. Quiet
        hours need both start and end; CRITICAL passes if ``exceptCritical``."""
        if self.quiet_start is None or self.quiet_end is None:
            return False
        if criticality is Criticality.CRITICAL and self.quiet_except_critical:
            return False
        return in_quiet_hours(now_utc, self.quiet_start, self.quiet_end, self.time_zone)


def in_quiet_hours(now_utc: datetime, start: str, end: str, tz_name: str) -> bool:
    """Whether ``now_utc`` falls in the window [start, end) (``HH:MM``) read in ``tz_name``.
    A window with end before start runs across midnight; start == end is no window."""
    local = now_utc.astimezone(_zone(tz_name)).time()
    begin, until = time.fromisoformat(start), time.fromisoformat(end)
    if begin == until:
        return False
    if begin < until:
        return begin <= local < until
    return local >= begin or local < until


@functools.cache
def _zone(name: str) -> tzinfo:
    # The setting is checked by pattern only, so a well-formed but unknown zone can be stored;
    # cached so its warning is logged once per process, not once per notification.
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        log.warning("unknown notify.timeZone %r: reading quiet hours in UTC", name)
        return UTC
