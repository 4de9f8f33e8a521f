"""The framework to the letter of the spec (issue 10) across OS processes: real Redis, a
gunicorn gateway, a Celery worker process (``echo`` model), one SQLite file.

One session, driven over the WebSocket like a client would: the session's chat (Arthur)
cannot be stopped on its own; a process-command reaches Arthur as an ExternalCommand and
is dispatched to a worker without a model call; a worker the user paused is suspended with
its session and comes back PAUSED when the session resumes; ``thinkengines-list`` lists
each engine's ``defaultSettings``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.gateways import Stack, running_stack, turn_done
from vancetope_brain.errors import VancetopeError
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore

SETTLE = 20.0


@pytest.fixture
def stack(tmp_path: Path, redis_url: str) -> Iterator[Stack]:
    with running_stack(tmp_path, redis_url) as s:
        # Arthur chats here (the cluster's default for ada's tenant is ford).
        s.cluster.brain.settings.set("acme", SettingScope.user("ada"),
                                     "session.defaultChatEngine", "arthur")
        s.cluster.start_workers("echo")
        s.start_gateways(1)
        s.cluster.start_sweeper()
        yield s


def _settled(stack: Stack, pid: str, status: str) -> None:
    store = stack.cluster.brain.store.port(SessionStore)
    wait_for(lambda: (p := store.get_process("acme", pid)).status.value == status
             and p.pending_control is None, timeout=SETTLE, interval=0.05,
             what=f"{pid} {status}")


def test_chat_command_pause_and_suspend_over_the_wire(stack: Stack) -> None:
    client = stack.client(stack.gateways[0])
    created = client.request("session-create", onDisconnect="KEEP_OPEN")
    sid, chat = created["session"]["id"], created["chatProcessId"]
    helper = client.request("process-create", engine="ford", name="helper")["process"]["id"]
    for pid in (chat, helper):
        _settled(stack, pid, "IDLE")

    with pytest.raises(VancetopeError, match="conflict: .*session-close"):
        client.request("process-stop", processId=chat)

    # "User clicked Approve" → Arthur forwards it to the worker, without a model call.
    client.request("process-command", processId=chat, command="process-steer",
                   params={"targetProcessId": helper, "content": "approved"})
    client.until(turn_done(helper, "echo: approved"))
    lanes = stack.cluster.brain.store.port(LaneStore)
    assert [m.role.value for m in lanes.chat_history("acme", chat)] == ["assistant", "event"]

    client.request("process-pause", processId=helper)
    _settled(stack, helper, "PAUSED")
    client.request("session-suspend", sessionId=sid)
    for pid in (chat, helper):
        _settled(stack, pid, "SUSPENDED")
    client.request("session-resume", sessionId=sid)
    _settled(stack, chat, "IDLE")
    _settled(stack, helper, "PAUSED")
    assert [t.lifecycle for t in lanes.turn_records("acme", helper)][-3:] == \
        ["pause", "suspend", "resume"]

    engines = {e["name"]: e for e in client.request("thinkengines-list")["engines"]}
    assert {"arthur.model", "arthur.maxContextTokens"} <= \
        {s["name"] for s in engines["arthur"]["defaultSettings"]}
