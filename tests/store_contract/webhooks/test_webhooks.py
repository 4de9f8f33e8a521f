"""Webhooks: subscriptions capped per project and changed by compare-and-set; deliveries
added once per id, claimed by one caller, finished only under their claim, due again when
a claim runs out, requeued by hand; every read and write scoped to its tenant."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, LimitExceeded, NotFound
from vancetope_brain.models import new_id, utcnow
from vancetope_brain.models.webhooks import (
    WebhookAttempt,
    WebhookDelivery,
    WebhookDeliveryStatus,
    WebhookEvent,
    WebhookSubscription,
)
from vancetope_brain.store import UserInboxStore, WebhookStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World


def _subscription(tenant_id: str = "ten_1", project_id: str = "prj_1") -> WebhookSubscription:
    return WebhookSubscription(id=new_id("whk"), tenant_id=tenant_id, project_id=project_id,
                               created_by="usr_1", url="https://example.com/hook",
                               events=[WebhookEvent.PROCESS_DONE], secret="whsec_c2VjcmV0")


def _delivery(sub: WebhookSubscription, event_id: str = "evt_1", *,
              seconds: float = 0) -> WebhookDelivery:
    return WebhookDelivery(id=f"msg_{sub.id}_{event_id}", tenant_id=sub.tenant_id,
                           project_id=sub.project_id, subscription_id=sub.id,
                           event=WebhookEvent.PROCESS_DONE,
                           body={"type": "process.done", "data": {"n": event_id}},
                           next_at=utcnow() + timedelta(seconds=seconds))


def test_subscriptions_are_added_listed_and_capped_per_project(webhooks: WebhookStore) -> None:
    first = _subscription()
    second = _subscription().model_copy(update={"created_at": first.created_at
                                                + timedelta(milliseconds=1)})
    webhooks.add_subscription(first, cap=2)
    webhooks.add_subscription(second, cap=2)
    webhooks.add_subscription(_subscription(project_id="prj_2"), cap=2)
    with pytest.raises(LimitExceeded):
        webhooks.add_subscription(_subscription(), cap=2)
    assert [s.id for s in webhooks.list_subscriptions("ten_1", "prj_1")] == [first.id, second.id]
    assert len(webhooks.list_subscriptions("ten_1")) == 3
    assert webhooks.get_subscription("ten_1", first.id) == first


def test_a_save_is_a_compare_and_set_on_the_revision(webhooks: WebhookStore) -> None:
    sub = _subscription()
    webhooks.add_subscription(sub, cap=5)
    saved = webhooks.save_subscription(sub.model_copy(update={"enabled": False}))
    assert saved.revision == 1 and not webhooks.get_subscription("ten_1", sub.id).enabled
    with pytest.raises(Conflict):
        webhooks.save_subscription(sub.model_copy(update={"url": "https://other.example/"}))
    webhooks.delete_subscription("ten_1", sub.id)
    with pytest.raises(NotFound):
        webhooks.save_subscription(saved)


def test_deleting_a_subscription_deletes_its_deliveries(webhooks: WebhookStore) -> None:
    sub = _subscription()
    webhooks.add_subscription(sub, cap=5)
    delivery = _delivery(sub)
    webhooks.add_deliveries([delivery])
    webhooks.delete_subscription("ten_1", sub.id)
    with pytest.raises(NotFound):
        webhooks.get_delivery("ten_1", delivery.id)
    with pytest.raises(NotFound):
        webhooks.delete_subscription("ten_1", sub.id)


def test_a_delivery_is_added_once_per_id(webhooks: WebhookStore) -> None:
    sub = _subscription()
    webhooks.add_subscription(sub, cap=5)
    assert webhooks.add_deliveries([_delivery(sub, "a"), _delivery(sub, "b")]) == 2
    assert webhooks.add_deliveries([_delivery(sub, "a"), _delivery(sub, "c")]) == 1
    assert {d.id for d in webhooks.list_deliveries("ten_1", sub.id)} == {
        _delivery(sub, n).id for n in "abc"}
    assert len(webhooks.list_deliveries("ten_1", sub.id, limit=2)) == 2


def test_a_due_delivery_is_claimed_by_one_caller_until_its_claim_runs_out(
    webhooks: WebhookStore,
) -> None:
    sub = _subscription()
    webhooks.add_subscription(sub, cap=5)
    due, later = _delivery(sub, "a"), _delivery(sub, "b", seconds=60)
    webhooks.add_deliveries([due, later])
    now = utcnow()
    claimed = webhooks.claim_deliveries(now, now + timedelta(seconds=30), "c1", 10)
    assert [d.id for d in claimed] == [due.id] and claimed[0].claim == "c1"
    assert webhooks.claim_deliveries(now, now + timedelta(seconds=30), "c2", 10) == []
    # The first claimer died: when its claim has run out the delivery is due again.
    again = webhooks.claim_deliveries(now + timedelta(seconds=31),
                                      now + timedelta(seconds=61), "c2", 1)
    assert [d.id for d in again] == [due.id]
    finished = again[0].model_copy(update={
        "status": WebhookDeliveryStatus.DELIVERED, "tries": 1,
        "attempts": [WebhookAttempt(at=now, status_code=200, duration_ms=3)]})
    assert not webhooks.finish_attempt(finished, "c1")  # the stale claim writes nothing
    assert webhooks.finish_attempt(finished, "c2")
    stored = webhooks.get_delivery("ten_1", due.id)
    assert stored.status is WebhookDeliveryStatus.DELIVERED and stored.claim is None
    assert stored.attempts[0].status_code == 200
    assert webhooks.claim_deliveries(now + timedelta(days=1), now + timedelta(days=2),
                                     "c3", 10)[0].id == later.id


def test_a_finished_delivery_is_requeued_by_hand_with_its_id(webhooks: WebhookStore) -> None:
    sub = _subscription()
    webhooks.add_subscription(sub, cap=5)
    delivery = _delivery(sub)
    webhooks.add_deliveries([delivery])
    with pytest.raises(Conflict):
        webhooks.requeue_delivery("ten_1", delivery.id, utcnow())
    now = utcnow()
    [claimed] = webhooks.claim_deliveries(now, now + timedelta(seconds=30), "c1", 10)
    assert webhooks.finish_attempt(claimed.model_copy(update={
        "status": WebhookDeliveryStatus.DEAD, "tries": 8}), "c1")
    again = webhooks.requeue_delivery("ten_1", delivery.id, now)
    assert again.status is WebhookDeliveryStatus.PENDING and again.tries == 0
    assert [d.id for d in webhooks.claim_deliveries(now, now, "c2", 10)] == [delivery.id]


def test_a_foreign_tenant_sees_and_touches_nothing(webhooks: WebhookStore) -> None:
    sub = _subscription("ten_a")
    webhooks.add_subscription(sub, cap=5)
    delivery = _delivery(sub)
    webhooks.add_deliveries([delivery])
    assert webhooks.list_subscriptions("ten_b") == []
    assert webhooks.list_deliveries("ten_b", sub.id) == []
    with pytest.raises(NotFound):
        webhooks.get_subscription("ten_b", sub.id)
    with pytest.raises(NotFound):
        webhooks.get_delivery("ten_b", delivery.id)
    with pytest.raises(NotFound):
        webhooks.save_subscription(sub.model_copy(update={"tenant_id": "ten_b"}))
    with pytest.raises(NotFound):
        webhooks.delete_subscription("ten_b", sub.id)
    with pytest.raises(NotFound):
        webhooks.requeue_delivery("ten_b", delivery.id, utcnow())
    assert webhooks.get_subscription("ten_a", sub.id) == sub


def test_an_inbox_save_writes_its_deliveries_and_a_lost_race_none(
    webhooks: WebhookStore, user_inbox: UserInboxStore, world: World,
) -> None:
    sub = _subscription()
    webhooks.add_subscription(sub, cap=5)
    item = world.add_item("ten_1")
    lost = _delivery(sub, "lost")
    with pytest.raises(Conflict):
        user_inbox.save_inbox_item(item, expected_revision=item.revision + 7, deliveries=[lost])
    won = _delivery(sub, "won")
    user_inbox.save_inbox_item(item.model_copy(update={"title": "answered"}),
                               expected_revision=item.revision, deliveries=[won])
    assert [d.id for d in webhooks.list_deliveries("ten_1", sub.id)] == [won.id]
