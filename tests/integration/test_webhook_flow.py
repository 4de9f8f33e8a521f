"""Issue 33 part 2, acceptance: with real Redis, a gunicorn gateway and real Celery worker
processes (scripted models), a subscription made over the WebSocket gets the Inbox item a
worker posts (created), the worker's block, the user's answer (answered) and the worker's
end (done) as signed POSTs on a real loopback receiver, each verified with the Standard
Webhooks reference library. The receiver is on loopback, which the operator allows here
(``VANCETOPE_WEBHOOK_ALLOW_PRIVATE``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for
from tests.integration.gateways import next_push, running_stack
from tests.integration.test_inbox_flow import DEPLOYER
from tests.webhooks.receiver import receiving
from vancetope_brain.models import ProcessStatus
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.store import SessionStore

S = ProcessStatus
EVENTS = ["process.done", "process.failed", "process.blocked", "inbox.item.created",
          "inbox.item.answered"]


@pytest.mark.slow
def test_the_receiver_gets_signed_deliveries_of_an_inbox_flow(tmp_path: Path, redis_url: str):
    with receiving() as receiver, running_stack(
            tmp_path, redis_url, VANCETOPE_WEBHOOK_ALLOW_PRIVATE="true") as stack:
        cluster = stack.cluster
        cluster.brain.settings.unset("acme", SettingScope.tenant(), "session.defaultChatEngine")
        cluster.brain.recipe_admin.put("acme", None, parse_recipe(DEPLOYER, "deployer"))
        cluster.start_workers("inbox-flow", "inbox-flow", sweeping=True)
        (gateway,) = stack.start_gateways(1)
        client = stack.client(gateway)
        created = client.request("webhook-create", projectId="default", url=receiver.url,
                                 events=EVENTS)
        secret = created["secret"]
        store = cluster.brain.store

        session = client.request("session-create", title="deploy", onDisconnect="KEEP_OPEN")
        sid, chat = session["session"]["id"], session["chatProcessId"]
        client.request("process-steer", targetThinkProcessId=chat, content="Deploy build 42")
        item = next_push(client, "inbox-item-added")["item"]
        wait_for(lambda: any(p.name == "deployer" and p.status is S.BLOCKED for p in
                             store.port(SessionStore).list_processes("acme", sid)), timeout=30)
        client.request("inbox-answer", itemId=item["id"], outcome="DECIDED",
                       value={"approved": True})
        deployer = next(p for p in store.port(SessionStore).list_processes("acme", sid)
                        if p.name == "deployer")

        def seen() -> dict[str, Any]:
            payloads = [receiver.verified(secret, post) for post in receiver.posts]
            return {f"{p['type']} {p['data'].get('itemId') or p['data']['processId']}": p
                    for p in payloads}

        want = {f"inbox.item.created {item['id']}", f"process.blocked {deployer.id}",
                f"inbox.item.answered {item['id']}", f"process.done {deployer.id}"}
        got = wait_for(lambda: want <= set(seen()) and seen(), timeout=60,
                       what="the four deliveries")
        assert got[f"inbox.item.answered {item['id']}"]["data"]["answer"]["value"] == {
            "approved": True}
        assert got[f"process.done {deployer.id}"]["data"]["closeReason"] == "DONE"
        assert all(p.headers["webhook-id"].startswith("msg_") for p in receiver.posts)
        # The receiver has a post before its sender marks the delivery: the log catches up.
        def logged() -> list[dict[str, Any]] | None:
            log = client.request("webhook-deliveries",
                                 subscriptionId=created["subscription"]["id"])["deliveries"]
            return log if {d["status"] for d in log} == {"DELIVERED"} else None

        wait_for(logged, timeout=30, what="every delivery logged DELIVERED")
