"""Webhook frames (issue 33 part 2): each frame's success and refusal; the secret only in the
replies of create and rotate; another user or tenant finds nothing. The subscriptions live in
a project of their own, where no process of the other tests runs, and point at a public
address literal (resolved without DNS): the embedded worker posts nothing."""

from __future__ import annotations

import pytest

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers
from vancetope_brain.identity import Principal
from vancetope_brain.models import Project, utcnow
from vancetope_brain.models.webhooks import WebhookDelivery, WebhookDeliveryStatus, WebhookEvent
from vancetope_brain.store import IdentityStore, WebhookStore

URL = "https://93.184.215.14/hook"
PROJECT = "hooks"


@pytest.fixture
def project(emb) -> str:
    identity = emb.brain.store.port(IdentityStore)
    if PROJECT not in {p.id for p in identity.list_projects("acme")}:
        identity.create_project(Project(id=PROJECT, tenant_id="acme", name="Hooks"))
    return PROJECT


def _created(client: Client, **data) -> dict:
    return client.ok("webhook-create", projectId=PROJECT, url=URL, events=["process.done"],
                     **data)


@covers("webhook-create", SUCCESS, REFUSAL)
@covers("webhook-list", SUCCESS, REFUSAL)
def test_webhook_create_shows_the_secret_once_and_list_never(emb, client, project):
    created = _created(client, description="CI")
    sub, secret = created["subscription"], created["secret"]
    assert secret.startswith("whsec_") and "secret" not in sub
    listed = client.ok("webhook-list", projectId=PROJECT)["subscriptions"]
    assert sub["id"] in {s["id"] for s in listed} and "whsec_" not in str(listed)
    assert client.ok("webhook-get", subscriptionId=sub["id"])["subscription"] == sub
    client.refused("webhook-create", "destination_refused", projectId=PROJECT,
                   url="http://127.0.0.1:9/hook", events=["process.done"])
    client.refused("webhook-create", "destination_refused", projectId=PROJECT,
                   url="http://169.254.169.254/", events=["process.done"])
    client.refused("webhook-create", "not_found", projectId="no-such-project", url=URL,
                   events=["process.done"])
    client.refused("webhook-create", "invalid_input", projectId=PROJECT, url=URL, events=[])
    client.refused("webhook-list", "invalid_input", projectId="")


@covers("webhook-get", SUCCESS, REFUSAL)
@covers("webhook-update", SUCCESS, REFUSAL)
@covers("webhook-rotate-secret", SUCCESS, REFUSAL)
@covers("webhook-delete", SUCCESS, REFUSAL)
def test_webhook_update_rotate_and_delete_are_the_owners(emb, client, project):
    created = _created(client)
    sid, first = created["subscription"]["id"], created["secret"]
    changed = client.ok("webhook-update", subscriptionId=sid, enabled=False,
                        events=["inbox.item.created", "process.failed"])["subscription"]
    assert changed["enabled"] is False
    assert changed["events"] == ["process.failed", "inbox.item.created"]
    client.refused("webhook-update", "destination_refused", subscriptionId=sid,
                   url="http://[::1]/")
    rotated = client.ok("webhook-rotate-secret", subscriptionId=sid)
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != first

    emb.brain.identity.create_user("acme", "bob", "hookbob")
    emb.brain.identity.create_tenant("hookcorp", "hookcorp")
    emb.brain.identity.create_user("hookcorp", "ada", "hookada")
    for who in (Principal("acme", "hookbob"), Principal("hookcorp", "hookada")):
        other = Client(emb, who)
        try:
            assert other.ok("webhook-list")["subscriptions"] == []
            other.refused("webhook-get", "not_found", subscriptionId=sid)
            other.refused("webhook-update", "not_found", subscriptionId=sid, enabled=True)
            other.refused("webhook-rotate-secret", "not_found", subscriptionId=sid)
            other.refused("webhook-delete", "not_found", subscriptionId=sid)
            other.refused("webhook-deliveries", "not_found", subscriptionId=sid)
        finally:
            other.close()

    assert client.ok("webhook-delete", subscriptionId=sid)["subscription"]["id"] == sid
    client.refused("webhook-get", "not_found", subscriptionId=sid)
    client.refused("webhook-delete", "not_found", subscriptionId=sid)


@covers("webhook-deliveries", SUCCESS, REFUSAL)
@covers("webhook-redeliver", SUCCESS, REFUSAL)
def test_webhook_deliveries_and_redeliver(emb, client, project):
    sid = _created(client)["subscription"]["id"]
    client.ok("webhook-update", subscriptionId=sid, enabled=False)  # the worker sends nothing
    now = utcnow()
    dead = WebhookDelivery(id="msg_frames_dead", tenant_id="acme", project_id=PROJECT,
                           subscription_id=sid, event=WebhookEvent.PROCESS_DONE,
                           body={"type": "process.done", "data": {}},
                           status=WebhookDeliveryStatus.DEAD, tries=8, next_at=now)
    emb.brain.store.port(WebhookStore).add_deliveries([dead])
    log = client.ok("webhook-deliveries", subscriptionId=sid)["deliveries"]
    assert [(d["id"], d["status"]) for d in log] == [(dead.id, "DEAD")]
    again = client.ok("webhook-redeliver", deliveryId=dead.id)["delivery"]
    assert (again["id"], again["status"], again["tries"]) == (dead.id, "PENDING", 0)
    client.refused("webhook-redeliver", "conflict", deliveryId=dead.id)
    client.refused("webhook-redeliver", "not_found", deliveryId="msg_none")
    client.refused("webhook-deliveries", "not_found", subscriptionId="whk_none")
    client.refused("webhook-deliveries", "invalid_input", subscriptionId=sid, limit=0)
