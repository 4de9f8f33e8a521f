"""After turns, exactly the documented keys remain (vancetope_brain/keys.py), with TTLs."""

from __future__ import annotations

from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus
from vancetope_brain.store import LaneStore, SessionStore


def test_a_turn_leaves_only_the_event_log_behind(embedded):
    emb = embedded
    emb.model = FunctionModel(lambda m, t: "fine")
    session = emb.brain.sessions.create_interactive(emb.who)
    pid = session.chat_process_id
    for text in ("a", "b", "c"):
        emb.brain.sessions.steer(emb.who, pid, text)
    wait_for(lambda: not emb.brain.store.port(LaneStore).pending_messages("acme", pid)
             and emb.brain.store.port(SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE)
    wait_for(lambda: not emb.brain.redis.exists(keys.lease(pid), keys.wake(pid)),
             what="lease and wake flag gone")
    client = emb.brain.redis
    everything = {k.decode() for k in client.keys("*")}
    assert all(k.startswith(keys.PREFIX) for k in everything), everything
    mine = {k for k in everything if pid in k or session.id in k}
    assert mine == {keys.event_seq(session.id), keys.events(session.id),
                    keys.event_origin(session.id)}
    for key in mine:
        assert 0 < client.ttl(key) <= emb.brain.config.event_log_ttl
