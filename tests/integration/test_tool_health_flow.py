"""Tool health end to end (issues 14, 27): a real Celery worker process runs Arthur turns that
call tools of real MCP servers — the project's echo server and the published
``mcp-server-time`` — while the echo server becomes unreachable, hangs or is slow to answer
one call; the test process
plays beat (``housekeeping``, which probes). Turn times are measured from the steer to
the reply, with bounds generous for a loaded 2-core machine.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import REPO, Cluster
from tests.tools.test_health import HttpEcho, free_port
from vancetope_brain.models import ChatRole
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.models.tool_health import HealthCause, HealthState, ToolHealth
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.store import ToolHealthStore

SERVER = str(REPO / "tests" / "tools" / "mcp_echo_server.py")
ARTHUR = """
name: arthur
engine: arthur
category: chat
description: Arthur, allowed the test MCP servers' tools
allowedToolsAdd: ["echo__*", "time__*"]
"""
TIME_SERVER = {"name": "time", "transport": "stdio", "command": sys.executable,
               "args": ["-m", "mcp_server_time"], "timeout": 30}
ECHO_CALL = 'call echo__echo {"text": "%s"}'
TIME_CALL = 'call time__get_current_time {"timezone": "UTC"}'


def start(tmp_path: Path, redis_url: str, echo: dict[str, Any]) -> Cluster:
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps([echo, TIME_SERVER]))
    cluster = Cluster(tmp_path, redis_url, VANCETOPE_MCP_SERVERS=str(servers),
                      VANCETOPE_TOOL_PROBE_BACKOFF="0.2")
    cluster.brain.settings.set("acme", SettingScope.tenant(), "session.defaultChatEngine",
                               "arthur")
    cluster.brain.recipe_admin.put("acme", None, parse_recipe(ARTHUR, "arthur"))
    cluster.start_workers("tool-flow")
    return cluster


@pytest.fixture
def clusters() -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for cluster in made:
        cluster.close()


def ask(cluster: Cluster, pid: str, text: str, timeout: float = 60) -> tuple[str, float]:
    """Steer ``text`` and wait for the reply: its content and the seconds it took."""
    before = len(cluster.chat(pid))
    started = time.monotonic()
    cluster.steer(pid, text)
    line = wait_for(lambda: next((m for m in cluster.chat(pid)[before:]
                                  if m.role in (ChatRole.ASSISTANT, ChatRole.ERROR)), None),
                    timeout=timeout, interval=0.02, what=f"the reply to {text!r}")
    return line.content, time.monotonic() - started


def health(cluster: Cluster) -> ToolHealth | None:
    return cluster.brain.store.port(ToolHealthStore).get_tool_health("acme", "default", "echo")


def offered(cluster: Cluster) -> str:
    """The MCP tools the model was offered in the latest turn."""
    return cluster.workers[0].entries("tools")[-1][2]


def probe_until_up(cluster: Cluster) -> None:
    """Play beat: housekeeping (which probes what is due) until the echo server is UP."""
    beat = cluster.app.vancetope_worker()

    def up() -> bool:
        beat.housekeeping()
        record = health(cluster)
        return record is not None and record.state is HealthState.UP

    try:
        wait_for(up, timeout=60, interval=0.3, what="the probe to mark echo UP")
    finally:
        beat.mcp.close()  # its stdio servers end with the test, not the test run


def test_an_unreachable_server_is_down_at_its_first_failure_and_probed_back(
        tmp_path: Path, redis_url: str, clusters: list[Cluster]) -> None:
    echo = HttpEcho(free_port())
    echo.start()
    try:
        cluster = start(tmp_path, redis_url, {"name": "echo", "transport": "http",
                                              "url": echo.url, "timeout": 5})
        clusters.append(cluster)
        pid = cluster.new_chat()
        reply, _ = ask(cluster, pid, ECHO_CALL % "before")
        assert "before" in reply and "echo__echo" in offered(cluster)
        baseline = max(ask(cluster, pid, f"hello {i}")[1] for i in range(3))

        echo.stop()
        first, _ = ask(cluster, pid, ECHO_CALL % "gone")  # its listing is still cached
        assert "'echo'" in first
        down = health(cluster)
        assert down is not None and (down.state, down.cause) == (
            HealthState.DOWN, HealthCause.UNREACHABLE)

        later, seconds = ask(cluster, pid, ECHO_CALL % "again")
        assert "MCP server 'echo' is DOWN (unreachable" in later, later
        assert "client" not in later and "echo__" not in offered(cluster)
        unrelated = [ask(cluster, pid, TIME_CALL), ask(cluster, pid, "hello after")]
        assert '"timezone": "UTC"' in unrelated[0][0] or "UTC" in unrelated[0][0]
        bound = 3 * baseline + 2.0
        assert all(t < bound for _, t in [*unrelated, (later, seconds)]), (
            baseline, seconds, [t for _, t in unrelated])

        echo.start()
        probe_until_up(cluster)
        back, _ = ask(cluster, pid, ECHO_CALL % "back")
        assert "back" in back and "DOWN" not in back
        assert "echo__echo" in offered(cluster)
    finally:
        echo.stop()


def test_a_hanging_server_costs_one_bounded_wait_across_turns(
        tmp_path: Path, redis_url: str, clusters: list[Cluster]) -> None:
    mode = tmp_path / "mode"
    mode.write_text("ok")
    timeout = 4.0
    cluster = start(tmp_path, redis_url, {
        "name": "echo", "transport": "stdio", "command": sys.executable, "args": [SERVER],
        "env": {"MCP_ECHO_MODE_FILE": str(mode)}, "timeout": timeout, "tools_ttl": 1})
    clusters.append(cluster)
    pid = cluster.new_chat()
    assert "before" in ask(cluster, pid, ECHO_CALL % "before")[0]

    mode.write_text("hang")
    times = []
    for i in range(6):  # each more than the TTL apart: every one would list again
        time.sleep(1.1)
        times.append(ask(cluster, pid, TIME_CALL if i % 2 else f"hello {i}")[1])
    slow = [t for t in times if t >= timeout]
    assert len(slow) == 1 and slow[0] < timeout + 10, times  # the one bounded wait
    down = health(cluster)
    assert down is not None and (down.state, down.cause) == (
        HealthState.DOWN, HealthCause.TIMEOUT)
    refused, seconds = ask(cluster, pid, ECHO_CALL % "stuck")
    assert "MCP server 'echo' is DOWN (timeout" in refused and seconds < timeout, refused

    mode.write_text("ok")
    probe_until_up(cluster)
    healed, _ = ask(cluster, pid, ECHO_CALL % "healed")
    assert "healed" in healed and "echo__echo" in offered(cluster)


def test_one_call_past_its_timeout_leaves_the_servers_tools_offered(
        tmp_path: Path, redis_url: str, clusters: list[Cluster]) -> None:
    timeout = 2.0
    cluster = start(tmp_path, redis_url, {
        "name": "echo", "transport": "stdio", "command": sys.executable, "args": [SERVER],
        "timeout": timeout})
    clusters.append(cluster)
    pid = cluster.new_chat()
    slow, seconds = ask(cluster, pid, 'call echo__sleep {"seconds": 30}')
    assert f"timed out after {timeout:g} s" in slow and seconds >= timeout, slow
    degraded = health(cluster)
    assert degraded is not None and (degraded.state, degraded.cause) == (
        HealthState.DEGRADED, HealthCause.TIMEOUT)

    back, _ = ask(cluster, pid, ECHO_CALL % "still here")  # no probe in between
    assert "still here" in back and "echo__echo" in offered(cluster)
    up = health(cluster)
    assert up is not None and up.state is HealthState.UP
