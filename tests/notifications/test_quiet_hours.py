"""Quiet hours: the window [start, end) read in the user's zone, and who it holds back."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from vancetope_brain.models.inbox import Criticality
from vancetope_brain.notifications import NotificationPrefs, in_quiet_hours
from vancetope_brain.notifications.prefs import _zone
from vancetope_brain.settings import SettingsApi


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(("now", "start", "end", "zone", "quiet"), [
    # across midnight
    ("2026-01-15 23:00", "22:00", "08:00", "UTC", True),
    ("2026-01-15 03:00", "22:00", "08:00", "UTC", True),
    ("2026-01-15 12:00", "22:00", "08:00", "UTC", False),
    ("2026-01-15 21:59:59", "22:00", "08:00", "UTC", False),
    ("2026-01-15 22:00", "22:00", "08:00", "UTC", True),     # start is inside
    ("2026-01-15 07:59:59", "22:00", "08:00", "UTC", True),
    ("2026-01-15 08:00", "22:00", "08:00", "UTC", False),    # end is outside
    ("2026-01-15 00:00", "22:00", "08:00", "UTC", True),
    # within one day
    ("2026-01-15 13:00", "12:30", "14:00", "UTC", True),
    ("2026-01-15 12:30", "12:30", "14:00", "UTC", True),
    ("2026-01-15 14:00", "12:30", "14:00", "UTC", False),
    ("2026-01-15 12:29", "12:30", "14:00", "UTC", False),
    ("2026-01-15 23:30", "12:30", "14:00", "UTC", False),
    # start == end: no quiet hours at all
    ("2026-01-15 22:00", "22:00", "22:00", "UTC", False),
    ("2026-01-15 03:00", "00:00", "00:00", "UTC", False),
    # read in the user's zone
    ("2026-01-15 03:00", "22:00", "08:00", "America/New_York", True),   # 22:00 EST
    ("2026-01-15 13:00", "22:00", "08:00", "America/New_York", False),  # 08:00 EST
    ("2026-01-15 12:59", "22:00", "08:00", "America/New_York", True),   # 07:59 EST
    ("2026-01-15 14:00", "22:00", "08:00", "Asia/Tokyo", True),         # 23:00 JST
    # Europe/Berlin is UTC+1 in winter, UTC+2 in summer: the same UTC time differs
    ("2026-01-15 20:30", "22:00", "08:00", "Europe/Berlin", False),     # 21:30 CET
    ("2026-07-15 20:30", "22:00", "08:00", "Europe/Berlin", True),      # 22:30 CEST
    ("2026-01-15 06:30", "22:00", "08:00", "Europe/Berlin", True),      # 07:30 CET
    ("2026-07-15 06:30", "22:00", "08:00", "Europe/Berlin", False),     # 08:30 CEST
    # the night the clocks spring forward (29 March 2026, 02:00 CET → 03:00 CEST)
    ("2026-03-29 00:59", "01:00", "03:30", "Europe/Berlin", True),      # 01:59 CET
    ("2026-03-29 01:00", "01:00", "03:30", "Europe/Berlin", True),      # 03:00 CEST
    ("2026-03-29 01:30", "01:00", "03:30", "Europe/Berlin", False),     # 03:30 CEST
])
def test_window(now: str, start: str, end: str, zone: str, quiet: bool) -> None:
    assert in_quiet_hours(utc(now), start, end, zone) is quiet


def test_an_unknown_zone_reads_as_utc_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    _zone.cache_clear()
    caplog.set_level(logging.WARNING, logger="vancetope_brain.notifications.prefs")
    for _ in range(3):
        assert in_quiet_hours(utc("2026-01-15 23:00"), "22:00", "08:00", "Mars/Olympus_Mons")
        assert not in_quiet_hours(utc("2026-01-15 21:00"), "22:00", "08:00", "Mars/Olympus_Mons")
    warnings = [r for r in caplog.records if "Mars/Olympus_Mons" in r.getMessage()]
    assert len(warnings) == 1


PREFS = NotificationPrefs.from_settings(SettingsApi.defaults())
NIGHT = utc("2026-01-15 23:00")


def test_defaults_have_no_quiet_hours() -> None:
    assert (PREFS.quiet_start, PREFS.quiet_end, PREFS.time_zone) == (None, None, "UTC")
    assert not PREFS.quiet_for(Criticality.LOW, NIGHT)


def test_quiet_hours_need_both_ends() -> None:
    assert not replace(PREFS, quiet_start="22:00").quiet_for(Criticality.LOW, NIGHT)
    assert not replace(PREFS, quiet_end="08:00").quiet_for(Criticality.LOW, NIGHT)


def test_critical_passes_quiet_hours_unless_told_otherwise() -> None:
    night = replace(PREFS, quiet_start="22:00", quiet_end="08:00")
    assert night.quiet_for(Criticality.NORMAL, NIGHT)
    assert not night.quiet_for(Criticality.CRITICAL, NIGHT)
    strict = replace(night, quiet_except_critical=False)
    assert strict.quiet_for(Criticality.CRITICAL, NIGHT)
