"""After turns, exactly the documented keys remain (vancetope_brain/keys.py), with TTLs."""

from __future__ import annotations

from vancetope_brain import keys
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus


def test_a_turn_leaves_only_the_event_log_behind(embedded):
    emb = embedded
    emb.model = FunctionModel(lambda m, t: "fine")
    session = emb.brain.sessions.create_interactive(emb.who)
    pid = session.chat_process_id
    for text in ("a", "b", "c"):
        emb.brain.sessions.steer(emb.who, pid, text)
    emb.worker.join()
    assert not emb.brain.store.pending_messages("acme", pid)
    assert emb.brain.store.get_process("acme", pid).status is ProcessStatus.IDLE
    client = emb.brain.redis
    everything = {k.decode() for k in client.keys("*")}
    assert all(k.startswith(keys.PREFIX) for k in everything), everything
    mine = {k for k in everything if pid in k or session.id in k}
    assert mine == {keys.event_seq(session.id), keys.events(session.id),
                    keys.event_origin(session.id)}
    for key in mine:
        assert 0 < client.ttl(key) <= emb.brain.config.event_log_ttl
