"""The notification delivery log: filtered lists per tenant, the batch job's queued query
across tenants, and finishing a queued delivery exactly once."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict
from vancetope_brain.models import utcnow
from vancetope_brain.models.inbox import DeliveryStatus, NotificationDelivery
from vancetope_brain.store import DeliveryStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

D = DeliveryStatus


def _ids(found: list[NotificationDelivery]) -> list[str]:
    return [delivery.id for delivery in found]


def test_deliveries_round_trip_and_list_oldest_first(
    deliveries: DeliveryStore, world: World
) -> None:
    base = utcnow() - timedelta(minutes=5)
    late = world.delivery("ten_1", status=D.SENT, created_at=base + timedelta(seconds=2),
                          sent_at=base + timedelta(seconds=3), project_id="prj_1")
    early = world.delivery("ten_1", status=D.SKIPPED, reason="quiet hours", created_at=base)
    for delivery in (late, early):
        deliveries.add_delivery(delivery)
    assert deliveries.list_deliveries("ten_1") == [early, late]


def test_list_filters_by_item_and_user_within_the_tenant(
    deliveries: DeliveryStore, world: World
) -> None:
    a1 = world.delivery("ten_1", "itm_a", user_id="usr_1")
    a2 = world.delivery("ten_1", "itm_a", user_id="usr_2", channel="ws")
    b1 = world.delivery("ten_1", "itm_b", user_id="usr_1")
    foreign = world.delivery("ten_2", "itm_a", user_id="usr_1")
    for delivery in (a1, a2, b1, foreign):
        deliveries.add_delivery(delivery)
    assert set(_ids(deliveries.list_deliveries("ten_1"))) == {a1.id, a2.id, b1.id}
    assert set(_ids(deliveries.list_deliveries("ten_1", item_id="itm_a"))) == {a1.id, a2.id}
    assert set(_ids(deliveries.list_deliveries("ten_1", user_id="usr_1"))) == {a1.id, b1.id}
    assert _ids(deliveries.list_deliveries("ten_1", item_id="itm_a", user_id="usr_2")) == [a2.id]
    assert deliveries.list_deliveries("ten_1", item_id="itm_c") == []
    assert deliveries.list_deliveries("ten_2") == [foreign]
    assert deliveries.list_deliveries("ten_3") == []


def test_a_duplicate_delivery_id_conflicts(deliveries: DeliveryStore, world: World) -> None:
    delivery = world.delivery("ten_1")
    deliveries.add_delivery(delivery)
    with pytest.raises(Conflict):
        deliveries.add_delivery(delivery)


def test_queued_deliveries_of_a_channel_across_tenants_oldest_first(
    deliveries: DeliveryStore, world: World
) -> None:
    base = utcnow() - timedelta(minutes=5)
    newer = world.delivery("ten_1", created_at=base + timedelta(seconds=2))
    older = world.delivery("ten_2", created_at=base)
    middle = world.delivery("ten_1", created_at=base + timedelta(seconds=1))
    for delivery in (newer, older, middle,
                     world.delivery("ten_1", channel="ws"),
                     world.delivery("ten_1", status=D.SENT),
                     world.delivery("ten_2", status=D.FAILED, reason="SMTP 550")):
        deliveries.add_delivery(delivery)
    assert deliveries.queued_deliveries("email") == [older, middle, newer]
    assert deliveries.queued_deliveries("email", limit=2) == [older, middle]
    assert deliveries.queued_deliveries("email", limit=0) == []
    assert len(deliveries.queued_deliveries("ws")) == 1
    assert deliveries.queued_deliveries("sms") == []


def test_finish_moves_a_queued_delivery_once(deliveries: DeliveryStore, world: World) -> None:
    queued = world.delivery("ten_1", reason="batched")
    deliveries.add_delivery(queued)
    sent_at = utcnow()
    assert deliveries.finish_delivery("ten_1", queued.id, D.SENT, sent_at=sent_at)
    sent = queued.model_copy(update={"status": D.SENT, "reason": None, "sent_at": sent_at})
    assert deliveries.list_deliveries("ten_1") == [sent]
    assert deliveries.queued_deliveries("email") == []
    # Another run of the batch finished it first: nothing changes.
    assert not deliveries.finish_delivery("ten_1", queued.id, D.FAILED, reason="SMTP timeout")
    assert deliveries.list_deliveries("ten_1") == [sent]


def test_finish_records_the_failure_reason(deliveries: DeliveryStore, world: World) -> None:
    queued = world.delivery("ten_1")
    deliveries.add_delivery(queued)
    assert deliveries.finish_delivery("ten_1", queued.id, D.FAILED, reason="SMTP 550")
    assert deliveries.list_deliveries("ten_1") == [
        queued.model_copy(update={"status": D.FAILED, "reason": "SMTP 550"})]


def test_finish_ignores_other_statuses_other_tenants_and_missing_ids(
    deliveries: DeliveryStore, world: World
) -> None:
    now = utcnow()
    skipped = world.delivery("ten_1", status=D.SKIPPED, reason="no active WS",
                             created_at=now - timedelta(seconds=1))
    queued = world.delivery("ten_1", created_at=now)
    for delivery in (skipped, queued):
        deliveries.add_delivery(delivery)
    assert not deliveries.finish_delivery("ten_1", skipped.id, D.SENT, sent_at=utcnow())
    assert not deliveries.finish_delivery("ten_2", queued.id, D.SENT, sent_at=utcnow())
    assert not deliveries.finish_delivery("ten_1", "dlv_missing", D.SENT)
    assert deliveries.list_deliveries("ten_1") == [skipped, queued]
