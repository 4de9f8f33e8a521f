"""User presence and the WebSocket channel: a push lands in the user's feed only when a live
connection's notifyMode admits the item."""

from __future__ import annotations

import time

import fakeredis
import pytest

from tests.notifications.conftest import TENANT
from vancetope_brain import keys
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.events.presence import Presence
from vancetope_brain.models.inbox import Criticality, DeliveryStatus
from vancetope_brain.notifications import NotificationPrefs, NotifyEvent, WsChannel
from vancetope_brain.settings import SettingsApi

PREFS = NotificationPrefs.from_settings(SettingsApi.defaults())


def event(criticality: Criticality, user: str = "ada") -> NotifyEvent:
    return NotifyEvent(tenant_id=TENANT, user_id=user, item_id="item_1",
                       criticality=criticality, title="Pick a colour", body=None,
                       deep_link="https://vt.example/inbox/item_1",
                       item={"id": "item_1", "title": "Pick a colour"})


def expired_connection(redis_client: fakeredis.FakeRedis, user: str, mode: str) -> None:
    """What a gateway that died leaves behind: a member whose expiry has passed."""
    redis_client.zadd(keys.user_presence(TENANT, user), {f"conn-dead:{mode}": time.time() - 1})


# ── presence ──────────────────────────────────────────────────────────────
def test_user_presence_lists_the_modes_of_live_connections(
        presence: Presence, redis_client: fakeredis.FakeRedis) -> None:
    assert presence.user_modes(TENANT, "ada") == []
    presence.user_connect(TENANT, "ada", "conn-1", "all")
    presence.user_connect(TENANT, "ada", "conn:2", "critical-only")  # ":" in an id is fine
    presence.user_connect(TENANT, "ada", "conn-1", "all")  # renewal, not a second one
    assert sorted(presence.user_modes(TENANT, "ada")) == ["all", "critical-only"]
    assert presence.user_modes(TENANT, "bob") == []
    assert 0 < redis_client.ttl(keys.user_presence(TENANT, "ada")) <= 60

    presence.user_disconnect(TENANT, "ada", "conn-1", "all")
    assert presence.user_modes(TENANT, "ada") == ["critical-only"]


def test_expired_connections_are_dropped(presence: Presence,
                                         redis_client: fakeredis.FakeRedis) -> None:
    expired_connection(redis_client, "ada", "all")
    presence.user_connect(TENANT, "ada", "conn-1", "none")
    assert presence.user_modes(TENANT, "ada") == ["none"]
    assert redis_client.zcard(keys.user_presence(TENANT, "ada")) == 1


# ── the channel ───────────────────────────────────────────────────────────
@pytest.mark.parametrize(("modes", "criticality", "reason"), [
    ([], Criticality.CRITICAL, "no active WebSocket connection"),
    (["all"], Criticality.LOW, None),
    (["all"], Criticality.CRITICAL, None),
    (["critical-only"], Criticality.NORMAL, "connections opted out (notifyMode)"),
    (["critical-only"], Criticality.CRITICAL, None),
    (["none"], Criticality.CRITICAL, "connections opted out (notifyMode)"),
    (["none", "critical-only"], Criticality.NORMAL, "connections opted out (notifyMode)"),
    (["none", "all"], Criticality.LOW, None),
])
def test_can_handle_follows_presence_and_notify_mode(
        presence: Presence, events: EventBus, modes: list[str], criticality: Criticality,
        reason: str | None) -> None:
    for n, mode in enumerate(modes):
        presence.user_connect(TENANT, "ada", f"conn-{n}", mode)
    assert WsChannel(presence, events).can_handle(event(criticality), PREFS) == reason


def test_an_expired_connection_does_not_count(presence: Presence, events: EventBus,
                                              redis_client: fakeredis.FakeRedis) -> None:
    expired_connection(redis_client, "ada", "all")
    reason = WsChannel(presence, events).can_handle(event(Criticality.CRITICAL), PREFS)
    assert reason == "no active WebSocket connection"


def test_deliver_publishes_the_item_into_the_users_feed_only(
        presence: Presence, events: EventBus) -> None:
    presence.user_connect(TENANT, "ada", "conn-1", "all")
    channel = WsChannel(presence, events)
    ada = event(Criticality.NORMAL)
    assert channel.can_handle(ada, PREFS) is None

    assert channel.deliver(ada, PREFS) == (DeliveryStatus.SENT, None)

    [pushed] = events.read(keys.user_feed(TENANT, "ada"), 0)
    assert pushed.type is EventType.INBOX_ITEM_ADDED
    assert pushed.data == {"item": {"id": "item_1", "title": "Pick a colour"}}
    assert events.read(keys.user_feed(TENANT, "bob"), 0) == []
