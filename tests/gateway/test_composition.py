"""The gateway's composition root builds the front door only (ARCHITECTURE §4)."""

from __future__ import annotations

from pathlib import Path

import fakeredis
import pytest

from tests.helpers import server_env
from vancetope_brain import runtime
from vancetope_brain.config import Config
from vancetope_brain.engines.contexts import ContextFactory
from vancetope_brain.identity import Principal
from vancetope_brain.knowledge.retrieval import Retriever
from vancetope_brain.lanes import LaneRunner, LeaseKeeper
from vancetope_brain.lanes.waker import shard_for
from vancetope_brain.models import ProcessStatus
from vancetope_brain.tools.mcp import McpRegistry
from vancetope_gateway.parts import build_gateway


def test_the_gateway_builds_no_lane_runner_leases_contexts_mcp_or_retriever(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: object, *args: object, **kwargs: object) -> None:
        raise AssertionError(f"the gateway built a {type(self).__name__}")

    for part in (LaneRunner, LeaseKeeper, ContextFactory, McpRegistry, Retriever):
        monkeypatch.setattr(part, "__init__", refuse)
    # An in-memory Redis of its own: in the process-wide one, another test of this process
    # may have left its shard's queued flag, and the wake below would be coalesced into it.
    monkeypatch.setattr(runtime, "_embedded_server", fakeredis.FakeServer())
    enqueued: list[tuple[int]] = []
    config = Config.from_env(server_env(tmp_path))
    gateway = build_gateway(config, lambda *task: enqueued.append(task),
                            enqueue_index=lambda job: enqueued.append(job))
    try:
        gateway.identity.create_tenant("acme", "acme")
        gateway.identity.create_user("acme", "ada", "ada")
        who = Principal("acme", "ada")
        session = gateway.sessions.create_interactive(who)
        assert session.chat_process_id is not None
        gateway.sessions.steer(who, session.chat_process_id, "hello")
        # The front door persists and produces lane turns; a worker would run them.
        assert enqueued == [(shard_for(session.chat_process_id, config.lane_shards),)]
        assert gateway.sessions.process(who, session.chat_process_id).status \
            is ProcessStatus.INIT
    finally:
        gateway.close()
