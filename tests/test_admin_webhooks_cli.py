"""``vancetope admin webhook …``: create (the secret printed once), list, disable and enable,
rotate, the delivery log and a redelivery, delete — each write audited; refusals as codes."""

from __future__ import annotations

from tests.test_admin_cli import admin, store, store_url  # noqa: F401 (fixtures)
from vancetope_brain.models import utcnow
from vancetope_brain.models.webhooks import WebhookDelivery, WebhookDeliveryStatus, WebhookEvent
from vancetope_brain.store import AuditStore, Backend, WebhookStore

URL = "https://93.184.215.14/hook"


def test_an_operator_manages_a_tenants_webhooks(admin, store: Backend) -> None:  # noqa: F811
    assert admin("tenant", "create", "Acme", "--id", "acme").code == 0
    assert admin("project", "create", "--tenant", "acme", "Web", "--id", "web").code == 0
    created = admin("webhook", "create", "--tenant", "acme", "--project", "web", "--url", URL,
                    "--event", "process.done", "--event", "inbox.item.created")
    assert created.code == 0, created.err
    sid, secret = created.out.split()
    assert secret.startswith("whsec_") and "shown this once" in created.err
    listed = admin("webhook", "list", "--tenant", "acme")
    assert sid in listed.out and "process.done,inbox.item.created" in listed.out
    assert "whsec_" not in listed.out
    assert admin("webhook", "disable", "--tenant", "acme", sid).code == 0
    assert " no " in admin("webhook", "list", "--tenant", "acme").out
    assert admin("webhook", "enable", "--tenant", "acme", sid).code == 0
    rotated = admin("webhook", "rotate-secret", "--tenant", "acme", "-q", sid)
    assert rotated.out.strip().startswith("whsec_") and rotated.out.strip() != secret
    store.port(WebhookStore).add_deliveries([WebhookDelivery(
        id="msg_cli", tenant_id="acme", project_id="web", subscription_id=sid,
        event=WebhookEvent.PROCESS_DONE, body={"type": "process.done", "data": {}},
        status=WebhookDeliveryStatus.DEAD, tries=8, next_at=utcnow())])
    assert "msg_cli" in admin("webhook", "deliveries", "--tenant", "acme", sid).out
    assert admin("webhook", "redeliver", "--tenant", "acme", "msg_cli").code == 0
    assert admin("webhook", "redeliver", "--tenant", "acme", "msg_cli").code != 0  # pending
    refused = admin("webhook", "create", "--tenant", "acme", "--project", "web", "--url",
                    "http://10.0.0.1/", "--event", "process.done")
    assert refused.code != 0 and "public addresses only" in refused.err
    assert admin("webhook", "delete", "--tenant", "acme", sid).code == 0
    assert admin("webhook", "delete", "--tenant", "acme", sid).code != 0
    actions = [r.action for r in store.port(AuditStore).list_audit("acme")]
    assert {"webhook.create", "webhook.disable", "webhook.enable", "webhook.rotate-secret",
            "webhook.redeliver", "webhook.delete"} <= set(actions)
