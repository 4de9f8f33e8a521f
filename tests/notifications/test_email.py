"""The e-mail channel against a real SMTP server on loopback, through the dispatcher, so every
case is checked in the delivery log too."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import parsedate_to_datetime

import pytest

from tests.notifications.conftest import (
    BASE_URL,
    SMTP_PASSWORD,
    SMTP_USER,
    TENANT,
    Clock,
    SmtpServer,
    free_port,
    new_item,
    set_project,
    set_user,
)
from vancetope_brain.config import SmtpConfig
from vancetope_brain.models import new_id
from vancetope_brain.models.inbox import (
    Criticality,
    DeliveryStatus,
    ItemStatus,
    NotificationDelivery,
)
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.notifications import EmailChannel, NotificationDispatcher, item_link
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import Backend, DeliveryStore, UserInboxStore

QUEUED, SENT = DeliveryStatus.QUEUED, DeliveryStatus.SENT
SKIPPED, FAILED = DeliveryStatus.SKIPPED, DeliveryStatus.FAILED


def dispatcher(store: Backend, settings: SettingsService, clock: Clock,
               smtp: SmtpConfig | None) -> NotificationDispatcher:
    return NotificationDispatcher(
        store.port(DeliveryStore), settings,
        [EmailChannel(smtp, store.port(DeliveryStore), store.port(UserInboxStore), settings,
                      BASE_URL, clock)], clock)


def text_of(message: EmailMessage) -> str:
    """The plain-text body, with the wire's CRLF line ends read back as LF."""
    return str(message.get_content()).replace("\r\n", "\n")


def log_of(store: Backend, user: str = "ada") -> list[tuple[DeliveryStatus, str | None]]:
    return [(d.status, d.reason) for d in store.port(DeliveryStore).list_deliveries(TENANT, user_id=user)]


@pytest.fixture
def night_owl(settings: SettingsService, clock: Clock) -> None:
    """Ada has an address and quiet hours 22:00–08:00 Berlin time; it is 23:30 there."""
    set_user(settings, "ada", email_address="ada@example.com", quiet_start="22:00",
             quiet_end="08:00", time_zone="Europe/Berlin")
    clock.now = datetime(2026, 1, 15, 22, 30, tzinfo=UTC)


@pytest.mark.usefixtures("night_owl")
def test_critical_is_sent_at_once_even_in_quiet_hours(store, settings, clock,
                                                      smtp_server: SmtpServer) -> None:
    event = new_item(store, criticality=Criticality.CRITICAL, title="Server room\non fire")
    dispatcher(store, settings, clock, smtp_server.config()).notify(event)

    [message] = smtp_server.messages
    assert message["Subject"] == "[Vancetope] CRITICAL: Server room on fire"
    assert message["From"] == "vancetope@vt.example"
    assert message["To"] == "ada@example.com"
    assert parsedate_to_datetime(message["Date"]) == clock.now
    assert message["Message-ID"].endswith("@vt.example>")
    text = text_of(message)
    assert "[CRITICAL] Server room\non fire" in text
    assert "Details follow." in text
    assert f"{BASE_URL}/inbox/{event.item_id}" in text
    [delivery] = store.port(DeliveryStore).list_deliveries(TENANT, item_id=event.item_id)
    assert (delivery.channel, delivery.status, delivery.reason) == ("email", SENT, None)
    assert delivery.sent_at == clock.now


@pytest.mark.parametrize("batch_interval", [300, 0])
@pytest.mark.usefixtures("night_owl")
def test_an_item_quiet_hours_hold_back_is_sent_when_they_end(
        store, settings, clock, smtp_server: SmtpServer, batch_interval: int) -> None:
    set_user(settings, "ada", batch_interval=batch_interval)
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    event = new_item(store, criticality=Criticality.NORMAL, title="Read the minutes")
    notifications.notify(event)
    assert smtp_server.messages == []
    assert log_of(store) == [(QUEUED, "quiet hours")]  # held, not dropped

    assert notifications.flush(datetime(2026, 1, 16, 6, 59, tzinfo=UTC)) == 0  # 07:59 Berlin
    assert smtp_server.messages == []
    assert notifications.flush(datetime(2026, 1, 16, 7, 0, tzinfo=UTC)) == 1   # 08:00
    [message] = smtp_server.messages
    assert (message["To"], message["Subject"]) == (
        "ada@example.com", "[Vancetope] Read the minutes")
    assert item_link(BASE_URL, event.item_id) in text_of(message)
    assert log_of(store) == [(SENT, None)]


@pytest.mark.usefixtures("night_owl")
def test_critical_in_quiet_hours_waits_for_them_without_except_critical(
        store, settings, clock, smtp_server: SmtpServer) -> None:
    set_user(settings, "ada", except_critical=False)
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    notifications.notify(new_item(store, criticality=Criticality.CRITICAL, title="Disk full"))
    assert smtp_server.messages == []
    assert log_of(store) == [(QUEUED, "quiet hours")]

    assert notifications.flush(datetime(2026, 1, 16, 7, 0, tzinfo=UTC)) == 1   # 08:00 Berlin
    assert [m["Subject"] for m in smtp_server.messages] == ["[Vancetope] CRITICAL: Disk full"]
    assert log_of(store) == [(SENT, None)]


def test_normal_items_go_out_as_one_message_per_interval(store, settings, clock,
                                                         smtp_server: SmtpServer) -> None:
    set_user(settings, "ada", email_address="ada@example.com", batch_interval=300)
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    first = clock.now
    events = []
    for n, criticality in enumerate([Criticality.NORMAL, Criticality.CRITICAL,
                                     Criticality.NORMAL, Criticality.NORMAL]):
        events.append(new_item(store, criticality=criticality, title=f"Item {n}"))
        notifications.notify(events[-1])
        clock.advance(60)
    [critical] = smtp_server.messages  # the CRITICAL one went out at once, alone
    assert "Item 1" in critical["Subject"]
    assert log_of(store) == [(QUEUED, None), (SENT, None), (QUEUED, None), (QUEUED, None)]

    assert notifications.flush(first + timedelta(seconds=299)) == 0  # not due yet
    assert len(smtp_server.messages) == 1

    assert notifications.flush(first + timedelta(seconds=300)) == 1
    batch = smtp_server.messages[1]
    assert batch["Subject"] == "[Vancetope] 3 new inbox items"
    assert batch["To"] == "ada@example.com"
    assert parsedate_to_datetime(batch["Date"]) == first + timedelta(seconds=300)
    text = text_of(batch)
    for event in (events[0], events[2], events[3]):
        assert f"[NORMAL] {event.title}\n{item_link(BASE_URL, event.item_id)}" in text
    assert "Item 1" not in text and "Details follow." not in text  # titles and links only
    assert log_of(store) == [(SENT, None)] * 4
    assert [d.sent_at - first for d in store.port(DeliveryStore).list_deliveries(TENANT)] == \
        [timedelta(seconds=s) for s in (300, 60, 300, 300)]

    assert notifications.flush(clock.advance(3600)) == 0  # nothing is sent twice
    assert len(smtp_server.messages) == 2


def test_one_message_per_user(store, settings, clock, smtp_server: SmtpServer) -> None:
    for user in ("ada", "bob"):
        set_user(settings, user, email_address=f"{user}@example.com", batch_interval=60)
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    for user in ("ada", "bob", "ada"):
        notifications.notify(new_item(store, user=user, title=f"For {user}"))

    assert notifications.flush(clock.advance(60)) == 2

    by_recipient = {m["To"]: text_of(m) for m in smtp_server.messages}
    assert by_recipient["ada@example.com"].count("For ada") == 2
    assert "For bob" not in by_recipient["ada@example.com"]
    assert by_recipient["bob@example.com"].count("For bob") == 1


def test_a_batch_is_sent_with_the_settings_of_each_items_project(
        store, settings, clock, smtp_server: SmtpServer) -> None:
    """Ada has no address of her own: items asked in a project go to that project's
    address, on that project's interval, one message per address."""
    set_project(settings, "lab", email_address="lab-team@example.com", batch_interval=60)
    set_project(settings, "field", email_address="field-team@example.com")  # 300 s
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    first = clock.now
    for title, project in (("Lab 1", "lab"), ("Field 1", "field"), ("Lab 2", "lab"),
                           ("Nowhere", None)):
        notifications.notify(new_item(store, title=title, project=project))
    assert log_of(store) == [(QUEUED, None)] * 3 + [(SKIPPED, "no notify.email.address")]

    assert notifications.flush(first + timedelta(seconds=60)) == 1
    [lab] = smtp_server.messages
    assert (lab["To"], lab["Subject"]) == ("lab-team@example.com",
                                           "[Vancetope] 2 new inbox items")
    assert "Lab 1" in text_of(lab) and "Lab 2" in text_of(lab) and "Field" not in text_of(lab)

    assert notifications.flush(first + timedelta(seconds=299)) == 0  # field's is not due yet
    assert notifications.flush(first + timedelta(seconds=300)) == 1
    field = smtp_server.messages[1]
    assert (field["To"], field["Subject"]) == ("field-team@example.com", "[Vancetope] Field 1")
    assert log_of(store) == [(SENT, None)] * 3 + [(SKIPPED, "no notify.email.address")]


def test_the_users_own_address_beats_the_projects_and_gets_one_message(
        store, settings, clock, smtp_server: SmtpServer) -> None:
    set_user(settings, "ada", email_address="ada@example.com", batch_interval=60)
    for project in ("lab", "field"):
        set_project(settings, project, email_address=f"{project}-team@example.com")
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    for project in ("lab", "field", None):
        notifications.notify(new_item(store, title=f"From {project}", project=project))

    assert notifications.flush(clock.advance(60)) == 1
    [message] = smtp_server.messages
    assert (message["To"], message["Subject"]) == ("ada@example.com",
                                                   "[Vancetope] 3 new inbox items")


@pytest.mark.usefixtures("night_owl")
def test_a_batch_due_in_quiet_hours_waits_for_them_to_end(store, settings, clock,
                                                          smtp_server: SmtpServer) -> None:
    clock.now = datetime(2026, 1, 15, 20, 50, tzinfo=UTC)  # 21:50 in Berlin
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    notifications.notify(new_item(store))
    assert log_of(store) == [(QUEUED, None)]

    assert notifications.flush(datetime(2026, 1, 15, 21, 0, tzinfo=UTC)) == 0   # 22:00
    assert notifications.flush(datetime(2026, 1, 16, 6, 59, tzinfo=UTC)) == 0   # 07:59
    assert notifications.flush(datetime(2026, 1, 16, 7, 0, tzinfo=UTC)) == 1    # 08:00
    assert log_of(store) == [(SENT, None)]


def test_a_zero_interval_sends_every_item_at_once(store, settings, clock,
                                                  smtp_server: SmtpServer) -> None:
    set_user(settings, "ada", email_address="ada@example.com", batch_interval=0,
             min_criticality="LOW")
    dispatcher(store, settings, clock, smtp_server.config()).notify(
        new_item(store, criticality=Criticality.LOW, title="FYI"))
    assert [m["Subject"] for m in smtp_server.messages] == ["[Vancetope] FYI"]
    assert log_of(store) == [(SENT, None)]


@pytest.mark.parametrize(("address", "criticality", "configured", "reason"), [
    (None, Criticality.CRITICAL, True, "no notify.email.address"),
    ("ada@example.com", Criticality.LOW, True, "below notify.email.minCriticality"),
    ("ada@example.com", Criticality.CRITICAL, False, "SMTP not configured"),
])
def test_declines(store, settings, clock, smtp_server: SmtpServer, address: str | None,
                  criticality: Criticality, configured: bool, reason: str) -> None:
    if address:
        set_user(settings, "ada", email_address=address)
    smtp = smtp_server.config() if configured else None
    dispatcher(store, settings, clock, smtp).notify(new_item(store, criticality=criticality))
    assert smtp_server.messages == []
    assert log_of(store) == [(SKIPPED, reason)]


def test_an_item_gone_by_flush_time_is_left_out(store, settings, clock,
                                                smtp_server: SmtpServer) -> None:
    set_user(settings, "ada", email_address="ada@example.com", batch_interval=60)
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    store.port(DeliveryStore).add_delivery(NotificationDelivery(
        id=new_id("dlv"), tenant_id=TENANT, item_id="item_gone", user_id="ada",
        channel="email", status=QUEUED, criticality=Criticality.NORMAL, created_at=clock.now))
    kept = new_item(store, title="Still here")
    notifications.notify(kept)

    assert notifications.flush(clock.advance(60)) == 1

    [message] = smtp_server.messages
    assert message["Subject"] == "[Vancetope] Still here"
    assert {d.item_id: (d.status, d.reason) for d in store.port(DeliveryStore).list_deliveries(TENANT)} == {
        "item_gone": (SKIPPED, "item no longer exists"), kept.item_id: (SENT, None)}


def test_an_address_removed_before_flush_skips_the_batch(store, settings, clock,
                                                         smtp_server: SmtpServer) -> None:
    set_user(settings, "ada", email_address="ada@example.com", batch_interval=60)
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    notifications.notify(new_item(store))
    settings.unset(TENANT, SettingScope.user("ada"), "notify.email.address")

    assert notifications.flush(clock.advance(60)) == 0
    assert smtp_server.messages == []
    assert log_of(store) == [(SKIPPED, "no notify.email.address")]


# ── the SMTP conversation ─────────────────────────────────────────────────
def critical_for_ada(store, settings, clock, smtp: SmtpConfig) -> None:
    set_user(settings, "ada", email_address="ada@example.com")
    dispatcher(store, settings, clock, smtp).notify(
        new_item(store, criticality=Criticality.CRITICAL))


def test_logs_in_with_the_configured_credentials(store, settings, clock,
                                                 smtp_server: SmtpServer) -> None:
    critical_for_ada(store, settings, clock,
                     smtp_server.config(user=SMTP_USER, password=SMTP_PASSWORD))
    assert len(smtp_server.messages) == 1
    assert log_of(store) == [(SENT, None)]


def test_a_refused_login_fails_without_showing_the_password(
        store, settings, clock, smtp_server: SmtpServer,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    critical_for_ada(store, settings, clock,
                     smtp_server.config(user=SMTP_USER, password=SMTP_PASSWORD + "-typo"))
    assert smtp_server.messages == []
    [(status, reason)] = log_of(store)
    assert status is FAILED
    assert reason is not None and reason.startswith("SMTP error: (535")
    assert SMTP_PASSWORD not in reason
    assert "535" in caplog.text and SMTP_PASSWORD not in caplog.text


def test_starttls_is_required_when_configured(store, settings, clock,
                                              smtp_server: SmtpServer) -> None:
    critical_for_ada(store, settings, clock, smtp_server.config(starttls=True))
    assert smtp_server.messages == []  # never sent in the clear
    assert log_of(store) == [(FAILED, "SMTP error: STARTTLS extension not supported by server.")]


def test_an_unreachable_server_fails_the_delivery(store, settings, clock,
                                                  smtp_server: SmtpServer) -> None:
    critical_for_ada(store, settings, clock, smtp_server.config(port=free_port()))
    [(status, reason)] = log_of(store)
    assert status is FAILED and reason is not None and reason.startswith("SMTP error: ")


def test_a_failed_batch_fails_each_of_its_deliveries(store, settings, clock,
                                                     smtp_server: SmtpServer) -> None:
    set_user(settings, "ada", email_address="ada@example.com", batch_interval=60)
    notifications = dispatcher(store, settings, clock, smtp_server.config(port=free_port()))
    notifications.notify(new_item(store))
    notifications.notify(new_item(store))

    assert notifications.flush(clock.advance(60)) == 0

    [(status, reason)] = set(log_of(store))
    assert status is FAILED and reason is not None and reason.startswith("SMTP error: ")
    assert len(log_of(store)) == 2


def test_items_answered_or_delegated_before_the_batch_are_left_out(store, settings, clock,
                                                                     smtp_server: SmtpServer):
    set_user(settings, "ada", email_address="ada@example.com", batch_interval=60)
    notifications = dispatcher(store, settings, clock, smtp_server.config())
    answered, delegated, open_ = (new_item(store, title=t)
                                  for t in ("Answered", "Delegated", "Still open"))
    for event in (answered, delegated, open_):
        notifications.notify(event)
    for event, change in ((answered, {"status": ItemStatus.ANSWERED}),
                          (delegated, {"assigned_to_user_id": "bob"})):
        item = store.port(UserInboxStore).get_inbox_item(TENANT, event.item_id)
        store.port(UserInboxStore).save_inbox_item(item.model_copy(update=change), expected_revision=item.revision)

    assert notifications.flush(clock.advance(60)) == 1

    [message] = smtp_server.messages
    assert message["Subject"] == "[Vancetope] Still open"
    assert {d.item_id: (d.status, d.reason) for d in store.port(DeliveryStore).list_deliveries(TENANT)} == {
        answered.item_id: (SKIPPED, "item already ANSWERED"),
        delegated.item_id: (SKIPPED, "item delegated to another user"),
        open_.item_id: (SENT, None)}
