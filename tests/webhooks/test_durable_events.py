"""Nothing lost: a process event's deliveries come from the event outbox row its turn's
commit wrote, so a worker that died right after its commit (its events never published)
still produces them — the sweep publishes the rows, and the emitter runs before they go."""

from __future__ import annotations

from datetime import timedelta

import fakeredis

from tests.store_contract.conftest import World
from tests.webhooks.receiver import receiving
from vancetope_brain.events import EventBus, EventOutbox
from vancetope_brain.identity import Principal
from vancetope_brain.models import CloseReason, ProcessStatus, TurnEvent, utcnow
from vancetope_brain.models.webhooks import WebhookDeliveryStatus, WebhookEvent
from vancetope_brain.store import (
    Backend,
    EventOutboxStore,
    IdentityStore,
    LaneStore,
    SessionStore,
    WebhookStore,
)
from vancetope_brain.webhooks import (
    WebhookDispatcher,
    WebhookEmitter,
    WebhookSender,
    WebhookService,
)


def test_a_turn_whose_worker_died_after_the_commit_still_gets_delivered(
        acme_store: Backend) -> None:
    webhooks = acme_store.port(WebhookStore)
    service = WebhookService(webhooks, acme_store.port(IdentityStore), allow_private=True)
    emitter = WebhookEmitter(webhooks, acme_store.port(SessionStore))
    world = World(acme_store)
    session = world.session("acme", "ada")
    process = world.process("acme", session.id, project_id="p1")
    lanes = acme_store.port(LaneStore)
    epoch = lanes.acquire_epoch("acme", process.id).epoch
    done = TurnEvent("status-changed", {"from": "RUNNING", "to": "CLOSED", "reason": "DONE"})
    with receiving() as receiver:
        sub = service.create(Principal("acme", "ada"), "p1", receiver.url,
                             [WebhookEvent.PROCESS_DONE])
        assert lanes.commit_turn("acme", process.id, epoch, world.turn(
            process, epoch, status=ProcessStatus.CLOSED, close_reason=CloseReason.DONE,
            events=[done])) is not None
        # The worker died here: nothing published, no delivery yet.
        assert webhooks.list_deliveries("acme", sub.id) == []
        bus = EventBus(fakeredis.FakeRedis(), max_len=100, ttl=60)
        outbox = EventOutbox(acme_store.port(EventOutboxStore), bus,
                             on_publish=emitter.on_outbox)
        assert outbox.sweep(utcnow() + timedelta(seconds=1)) == 1
        sender = WebhookSender(allow_private=True, timeout=5)
        assert WebhookDispatcher(webhooks, sender).deliver_due() == 1
        [post] = receiver.wait(1)
        payload = receiver.verified(sub.secret, post)
    assert payload["type"] == "process.done"
    assert payload["data"]["processId"] == process.id  # type: ignore[index]
    [delivery] = webhooks.list_deliveries("acme", sub.id)
    assert delivery.status is WebhookDeliveryStatus.DELIVERED
    assert acme_store.port(EventOutboxStore).pending_events("acme", process.id) == []
