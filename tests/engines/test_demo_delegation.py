"""With no endpoint configured, the offline demo model still shows delegation: asked for a
piece of work, Arthur starts a worker and later relays its result."""

from __future__ import annotations

from tests.helpers import wait_for
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.models import ChatRole, CloseReason
from vancetope_brain.store import LaneStore, SessionStore


def test_arthur_on_the_demo_model_delegates_and_relays(embedded):
    embedded.model = DemoModel()
    session = embedded.brain.sessions.create(embedded.who)
    pid = session.chat_process_id
    embedded.brain.sessions.steer(embedded.who, pid, "Please analyze the quarterly numbers")

    def relayed():
        lines = embedded.brain.store.port(LaneStore).chat_history("acme", pid)
        return [m.content for m in lines if m.role is ChatRole.ASSISTANT
                and "It reports: Demo result" in m.content]

    wait_for(relayed, timeout=20, what="Arthur relaying the worker's result")
    assistant = [m.content for m in embedded.brain.store.port(LaneStore).chat_history("acme", pid)
                 if m.role is ChatRole.ASSISTANT]
    assert assistant[1].startswith("I started a worker (demo-worker)")
    worker = next(p for p in embedded.brain.store.port(SessionStore).list_processes("acme", session.id)
                  if p.name == "demo-worker")
    assert worker.recipe_name == "analyze" and worker.close_reason is CloseReason.DONE
