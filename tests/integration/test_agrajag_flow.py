"""Issue 14's service-engine acceptance on real Redis, real Celery worker processes and the
real echo MCP server (stdio, started by each worker): user turns that all hit an
unclassifiable tool failure start ONE agrajag process in the project's system session; it
probes only SAFE_PROBE tools (a MUTATING probe is refused by the dispatcher) and writes a
verdict that the next manifest honours; users never see the system session or its
processes, operators do (``vancetope admin system-session list``); a tool with
``requiresEngineRoles`` on the MCP server is invisible to an engine without the role and
callable by one with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import REPO, Cluster
from vancetope_brain.engines import ENGINES
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.models.tool_health import HealthSource, HealthState
from vancetope_brain.recipes import RecipeAdmin
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.services import SYSTEM_USER
from vancetope_brain.store import LaneStore, SessionStore, ToolHealthStore
from vancetope_brain.store.sessions import every_session

USERS_AT_ONCE = 4
RECIPES = ["""
name: echo-worker
engine: ford
category: worker
description: a worker that may use the echo MCP server
allowedToolsAdd: ["echo__*"]
""", """
name: auditor
engine: ford
category: worker
description: an echo worker with the engine role tool-auditor
allowedToolsAdd: ["echo__*"]
roles: [tool-auditor]
"""]


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str):
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps([{
        "name": "echo", "transport": "stdio", "command": sys.executable,
        "args": ["-m", "tests.tools.mcp_echo_server"], "cwd": str(REPO),
        "tool_roles": {"sleep": ["tool-auditor"]}}]))
    cluster = Cluster(tmp_path, redis_url, VANCETOPE_MCP_SERVERS=str(servers))
    operator = RecipeAdmin.on(cluster.brain.store, engine=ENGINES.get, operator=True)
    for text in RECIPES:  # as `vancetope admin recipe put` would: auditor carries a role
        operator.put("acme", None, parse_recipe(text, "test"))
    yield cluster
    cluster.close()


def run_worker(cluster: Cluster, session_id: str, goal: str, recipe: str = "echo-worker"):
    process = cluster.brain.sessions.create_process(cluster.who, session_id, recipe=recipe,
                                                    goal=goal)
    return process


def closed(cluster: Cluster, process_id: str, timeout: float = 90.0):
    store = cluster.brain.store.port(SessionStore)
    return wait_for(lambda: (p := store.get_process("acme", process_id)).status
                    is ProcessStatus.CLOSED and p, timeout=timeout, what=f"{process_id} closed")


def reply(process) -> str:
    return process.engine_state["lastReply"]


@pytest.mark.slow
def test_one_agrajag_for_many_failing_turns_probes_safely_and_its_verdict_is_honoured(cluster):
    workers = cluster.start_workers("agrajag-flow", "agrajag-flow")
    brain, who = cluster.brain, cluster.who
    store = brain.store.port(SessionStore)
    session = brain.sessions.create(who, title="tools")
    users = [run_worker(cluster, session.id, "call echo__fail") for _ in range(USERS_AT_ONCE)]

    def system_processes():
        return [p for s in every_session(store, "acme", SYSTEM_USER)
                for p in store.list_processes("acme", s.id)]

    # Every user turn fails while the one diagnosis waits (its model holds until released).
    for user in users:
        done = closed(cluster, user.id)
        assert "echo__fail" in reply(done) and "this tool always fails" in reply(done)
    agrajag = wait_for(system_processes, what="the agrajag process")
    for worker in workers:
        worker.release()
    diagnosis = closed(cluster, agrajag[0].id)
    assert len(system_processes()) == 1  # one, however many turns hit it at once
    assert (diagnosis.engine, diagnosis.close_reason, diagnosis.user_id,
            diagnosis.originating_user_id) == ("agrajag", CloseReason.DONE, SYSTEM_USER, "ada")

    # It probed only SAFE_PROBE tools: the MUTATING one was refused without being called.
    probes = [line for line in brain.store.port(LaneStore).chat_history("acme", diagnosis.id)
              if line.role is ChatRole.TOOL]
    assert [line.meta["status"] for line in probes] == ["error", "success"]
    assert "echo__add" in probes[0].content and "MUTATING and was not called" in probes[0].content
    assert "echo__echo" in probes[1].content

    # The verdict is in tool_health, and the next manifest honours it.
    health = brain.store.port(ToolHealthStore).get_tool_health("acme", "default", "echo",
                                                                "echo__fail")
    assert health is not None
    assert (health.state, health.source) == (HealthState.DOWN, HealthSource.AGRAJAG)
    after = closed(cluster, run_worker(cluster, session.id, "call echo__echo").id)
    offered = reply(after).split(";")[0]
    assert "echo__echo" in offered and "echo__fail" not in offered

    # Users never see the system session or its processes; operators do.
    system_session = store.get_session("acme", diagnosis.session_id)
    assert system_session.system and system_session.user_id == SYSTEM_USER
    assert [s.id for s in brain.sessions.list_sessions(who).sessions] == [session.id]
    assert diagnosis.id not in {p.id for p in brain.sessions.processes(who, session.id)}
    listed = subprocess.run([sys.executable, "-m", "vancetope_gateway.cli", "admin",
                             "system-session", "list", "--tenant", "acme"], cwd=REPO,
                            env=cluster.env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if diagnosis.id in line).split()
    assert row[:5] == [system_session.id, "default", "_agrajag", "OPEN", diagnosis.id]
    assert "CLOSED/DONE" in row and "ada" in row


@pytest.mark.slow
def test_an_mcp_tool_with_engine_roles_is_only_for_engines_with_the_role(cluster):
    cluster.start_workers("agrajag-flow")
    for worker in cluster.workers:
        worker.release()
    session = cluster.brain.sessions.create(cluster.who, title="roles")
    plain = closed(cluster, run_worker(cluster, session.id, "call echo__sleep").id)
    auditor = closed(cluster, run_worker(cluster, session.id, "call echo__sleep",
                                         recipe="auditor").id)
    offered, got = reply(plain).split("; got: ")
    assert "echo__sleep" not in offered and "echo__echo" in offered
    assert "needs the engine role(s) tool-auditor" in got
    offered, got = reply(auditor).split("; got: ")
    assert "echo__sleep" in offered and "slept 0" in got
