"""The MCP server in the distributed shape (issue 33 part 4): the gateway as the Procfile runs
it (gunicorn, ``GatewayWorker``) and a real Celery worker process on the offline demo model.
Several ``mcp`` SDK clients at once list the tools, start marvin processes with goals and
read their reports when done — each through its own requests on the gateway's threads and
the MCP server's one asyncio loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession

from tests.gateway.test_mcp_server import TOOLS, _ok, _run
from tests.integration.gateways import Stack, running_stack

CLIENTS = 6


@pytest.fixture
def stack(tmp_path: Path, redis_url: str) -> Iterator[Stack]:
    with running_stack(tmp_path, redis_url) as s:
        yield s


def _delegate(host: str, token: str, goal: str) -> dict[str, Any]:
    """One client's whole path: list, start marvin on ``goal``, poll until done."""
    async def body(session: ClientSession) -> dict[str, Any]:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        started = _ok(await session.call_tool("process_start",
                                              {"recipe": "marvin", "goal": goal}))
        with anyio.fail_after(60):
            while not (status := _ok(await session.call_tool(
                    "process_status", {"process_id": started["processId"]})))["done"]:
                await anyio.sleep(0.2)
        return status

    return _run(host, token, body)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_mcp_clients_at_once_start_marvin_and_read_its_report_under_gunicorn(stack):
    stack.cluster.start_workers("demo", "demo")
    [gateway] = stack.start_gateways(1)
    host = f"127.0.0.1:{gateway.port}"
    results: dict[int, dict[str, Any]] = {}
    failures: list[BaseException] = []

    def client(i: int) -> None:
        try:
            results[i] = _delegate(host, stack.token, f"Compare {i + 2} databases")
        except BaseException as e:  # shown below
            failures.append(e)

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    print(f"{CLIENTS} MCP clients, list + start + report each: "
          f"{time.monotonic() - began:.1f} s")
    assert not failures, failures
    assert sorted(results) == list(range(CLIENTS))
    for i, status in results.items():
        assert (status["status"], status["closeReason"]) == ("CLOSED", "DONE")
        assert status["report"]["event"] == "done"
        assert f"Compare {i + 2} databases" in status["report"]["summary"]
    assert len({s["sessionId"] for s in results.values()}) == CLIENTS
