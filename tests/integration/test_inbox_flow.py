"""Issue 5 with real Redis, a gunicorn gateway and real Celery worker processes: a worker
posts an APPROVAL into the user's Inbox and goes BLOCKED; the user, connected over the
WebSocket, is pushed the item, answers it; the worker receives the InboxAnswer in its next
turn and finishes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.gateways import next_push, running_stack
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.store import DeliveryStore, LaneStore, SessionStore

S = ProcessStatus



DEPLOYER = """
name: deployer
engine: ford
category: worker
description: Deploys a build once the user approves it in the Inbox.
allowedToolsAdd: [inbox_post]
"""


@pytest.mark.slow
def test_a_worker_blocks_on_an_approval_and_continues_with_the_answer(tmp_path: Path,
                                                                      redis_url: str):
    with running_stack(tmp_path, redis_url) as stack:
        cluster = stack.cluster
        cluster.brain.settings.unset("acme", SettingScope.tenant(),
                                               "session.defaultChatEngine")  # arthur
        # Ford has no inbox_post of its own (think-engines §7a): the deployer's recipe adds it.
        cluster.brain.recipe_admin.put("acme", None, parse_recipe(DEPLOYER, "deployer"))
        cluster.start_workers("inbox-flow", "inbox-flow")
        cluster.start_sweeper()
        (gateway,) = stack.start_gateways(1)
        client = stack.client(gateway)
        store = cluster.brain.store

        created = client.request("session-create", title="deploy", onDisconnect="KEEP_OPEN")
        sid, chat = created["session"]["id"], created["chatProcessId"]

        def statuses() -> dict[str, S]:
            return {p.name: p.status for p in store.port(SessionStore).list_processes("acme", sid)}

        wait_for(lambda: statuses() == {"chat": S.IDLE}, timeout=30)
        client.request("process-steer", targetThinkProcessId=chat, content="Deploy build 42")
        item = next_push(client, "inbox-item-added")["item"]
        wait_for(lambda: statuses() == {"chat": S.IDLE, "deployer": S.BLOCKED}, timeout=30)
        deployer = next(p for p in store.port(SessionStore).list_processes("acme", sid) if p.name == "deployer")
        assert (item["type"], item["criticality"], item["status"]) == (
            "APPROVAL", "CRITICAL", "PENDING")
        assert (item["originProcessId"], item["assignedToUserId"]) == (deployer.id, "ada")
        assert [i["id"] for i in client.request("inbox-list", tags=["deploy"])["items"]] == [
            item["id"]]
        # Arthur heard that its worker blocks, and said so.
        wait_for(lambda: store.port(LaneStore).chat_history("acme", chat)[-1].content
                 == "deployer waits for your approval in the Inbox.", timeout=30)
        turns_while_blocked = len(store.port(LaneStore).turn_records("acme", deployer.id))

        answered = client.request("inbox-answer", itemId=item["id"], outcome="DECIDED",
                                  value={"approved": True})["item"]
        assert answered["status"] == "ANSWERED"
        assert next_push(client, "inbox-item-updated")["item"]["status"] == "ANSWERED"
        wait_for(lambda: statuses() == {"chat": S.IDLE, "deployer": S.CLOSED}, timeout=30)
        wait_for(lambda: store.port(LaneStore).chat_history("acme", chat)[-1].content == "deployer: done.",
                 timeout=30)

    finished = store.port(SessionStore).get_process("acme", deployer.id)
    assert finished.close_reason is CloseReason.DONE
    assert finished.engine_state["lastReply"] == "Deployed."
    lines = [(m.role, m.content) for m in store.port(LaneStore).chat_history("acme", deployer.id)]
    assert [role for role, _ in lines] == [ChatRole.USER, ChatRole.TOOL, ChatRole.ASSISTANT,
                                           ChatRole.EVENT, ChatRole.ASSISTANT]
    assert lines[1][1].startswith("inbox_post(")
    assert lines[2][1] == "Waiting for approval."
    assert lines[3][1].startswith(f'<inbox-answer itemId="{item["id"]}" type="APPROVAL"')
    assert '"approved": true' in lines[3][1] and lines[4][1] == "Deployed."
    turns = store.port(LaneStore).turn_records("acme", deployer.id)
    assert len(turns) == turns_while_blocked + 1  # exactly one turn, woken by the answer
    assert {t.worker for t in turns} <= {w.worker_id for w in cluster.workers}
    deliveries = store.port(DeliveryStore).list_deliveries("acme", item_id=item["id"])
    assert [(d.channel, d.status.value) for d in deliveries] == [
        ("ws", "SENT"), ("email", "SKIPPED"), ("mobile", "SKIPPED")]
