"""The dispatcher: every channel is asked, and each one leaves exactly one delivery."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from tests.notifications.conftest import BASE_URL, TENANT, Clock, SmtpServer, new_item, set_user
from vancetope_brain import keys
from vancetope_brain.config import Config
from vancetope_brain.events import EventBus
from vancetope_brain.events.presence import Presence
from vancetope_brain.identity import DEFAULT_PROJECT
from vancetope_brain.models.inbox import DeliveryStatus
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.notifications import (
    MobileChannel,
    NotificationDispatcher,
    NotificationPrefs,
    NotifyEvent,
    WsChannel,
    build_dispatcher,
)
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import Backend, DeliveryStore, UserInboxStore

NO_DEVICE = "no registered device (mobile push is not available yet)"


@pytest.fixture
def config(smtp_server: SmtpServer) -> Config:
    return Config.from_env({"VANCETOPE_SMTP_HOST": "127.0.0.1",
                            "VANCETOPE_SMTP_PORT": str(smtp_server.port),
                            "VANCETOPE_SMTP_STARTTLS": "false",
                            "VANCETOPE_PUBLIC_URL": BASE_URL})


@pytest.fixture
def notifications(config: Config, store: Backend, settings: SettingsService, presence: Presence,
                  events: EventBus, clock: Clock) -> NotificationDispatcher:
    return build_dispatcher(config, store.port(DeliveryStore), store.port(UserInboxStore), settings,
                            presence, events, clock)


def log_of(store: Backend, event: NotifyEvent) -> list[tuple[str, DeliveryStatus, str | None]]:
    return [(d.channel, d.status, d.reason)
            for d in store.port(DeliveryStore).list_deliveries(TENANT, item_id=event.item_id)]


def test_an_offline_user_without_settings_gets_a_skip_from_every_channel(
        notifications: NotificationDispatcher, store: Backend) -> None:
    event = new_item(store)
    notifications.notify(event)
    assert log_of(store, event) == [
        ("ws", DeliveryStatus.SKIPPED, "no active WebSocket connection"),
        ("email", DeliveryStatus.SKIPPED, "no notify.email.address"),
        ("mobile", DeliveryStatus.SKIPPED, NO_DEVICE),
    ]


def test_every_channel_that_can_handle_the_event_delivers_it(
        notifications: NotificationDispatcher, store: Backend, settings: SettingsService,
        presence: Presence, events: EventBus, clock: Clock, smtp_server: SmtpServer) -> None:
    presence.user_connect(TENANT, "ada", "conn-1", "all")
    set_user(settings, "ada", email_address="ada@example.com")
    event = new_item(store)

    notifications.notify(event)

    assert log_of(store, event) == [
        ("ws", DeliveryStatus.SENT, None),
        ("email", DeliveryStatus.QUEUED, None),
        ("mobile", DeliveryStatus.SKIPPED, NO_DEVICE),
    ]
    deliveries = store.port(DeliveryStore).list_deliveries(TENANT, item_id=event.item_id)
    assert all(d.user_id == "ada" and d.criticality is event.criticality
               and d.created_at == clock.now for d in deliveries)
    assert [d.sent_at for d in deliveries] == [clock.now, None, None]
    assert len({d.id for d in deliveries}) == 3
    assert all(d.id.startswith("dlv_") for d in deliveries)
    assert len(events.read(keys.user_feed(TENANT, "ada"), 0)) == 1

    assert notifications.flush(clock.advance(300)) == 1  # the e-mail batch
    assert len(smtp_server.messages) == 1
    assert [d.status for d in store.port(DeliveryStore).list_deliveries(TENANT, item_id=event.item_id)] == \
        [DeliveryStatus.SENT, DeliveryStatus.SENT, DeliveryStatus.SKIPPED]


def test_a_project_setting_applies_when_the_event_names_the_project(
        notifications: NotificationDispatcher, store: Backend, settings: SettingsService) -> None:
    settings.set(TENANT, SettingScope.project(DEFAULT_PROJECT), "notify.email.address",
                 "team@example.com")
    without, within = new_item(store), new_item(store)
    within = replace(within, project_id=DEFAULT_PROJECT)

    notifications.notify(without)
    notifications.notify(within)

    assert log_of(store, without)[1][1:] == (DeliveryStatus.SKIPPED, "no notify.email.address")
    assert log_of(store, within)[1][1:] == (DeliveryStatus.QUEUED, None)


class Broken:
    """A channel with a bug in ``can_handle`` or in ``deliver``."""

    name = "broken"

    def __init__(self, where: str) -> None:
        self.where = where

    def can_handle(self, event: NotifyEvent, prefs: NotificationPrefs) -> str | None:
        if self.where == "can_handle":
            raise RuntimeError("bug in can_handle")
        return None

    def deliver(self, event: NotifyEvent,
                prefs: NotificationPrefs) -> tuple[DeliveryStatus, str | None]:
        raise RuntimeError("bug in deliver")


@pytest.mark.parametrize("where", ["can_handle", "deliver"])
def test_a_failing_channel_is_logged_and_the_others_still_run(
        where: str, store: Backend, settings: SettingsService, presence: Presence,
        events: EventBus, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    presence.user_connect(TENANT, "ada", "conn-1", "all")
    dispatcher = NotificationDispatcher(
        store.port(DeliveryStore), settings, [Broken(where), WsChannel(presence, events), MobileChannel()], clock)
    event = new_item(store)

    with caplog.at_level(logging.ERROR):
        dispatcher.notify(event)

    assert log_of(store, event) == [
        ("broken", DeliveryStatus.FAILED, f"RuntimeError: bug in {where}"),
        ("ws", DeliveryStatus.SENT, None),
        ("mobile", DeliveryStatus.SKIPPED, NO_DEVICE),
    ]
    assert "notification channel broken failed" in caplog.text
    assert dispatcher.flush(clock.now) == 0  # no batching channel here
