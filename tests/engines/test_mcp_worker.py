"""A worker calls a tool of an MCP server (stdio, written with the ``mcp`` SDK) that the
deployment configures, through the same dispatcher as every other tool.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import Embedded
from tests.engines.test_arthur import call, respond, spawn_worker
from tests.helpers import wait_for
from vancetope_brain.llm import LlmResponse
from vancetope_brain.models import ProcessStatus
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.store import SessionStore

ROOT = Path(__file__).resolve().parents[2]
RECIPE = """
name: echo-worker
engine: ford
category: worker
description: a worker that may use the echo MCP server
allowedToolsAdd: ["echo__*"]
"""


@pytest.fixture(scope="module")
def mcp_embedded(tmp_path_factory):
    data = tmp_path_factory.mktemp("mcp")
    servers = data / "mcp.json"
    servers.write_text(json.dumps([{"name": "echo", "transport": "stdio",
                                    "command": sys.executable,
                                    "args": ["-m", "tests.tools.mcp_echo_server"],
                                    "cwd": str(ROOT)}]))
    emb = Embedded(data / "data", VANCETOPE_MCP_SERVERS=str(servers))
    emb.brain.recipe_admin.put("acme", None, parse_recipe(RECIPE, "echo-worker"))
    yield emb
    emb.stop()


def test_a_worker_calls_an_mcp_tool(mcp_embedded):
    emb = mcp_embedded
    seen = []

    def worker(messages, tools):
        seen.append(sorted(t.name for t in tools))
        if messages[-1].role == "tool":
            return respond(f"the server said {json.loads(messages[-1].content)['result']}")
        return LlmResponse("", (call("echo__echo", text="hello over MCP"),))

    _, w = spawn_worker(emb, worker, recipe="echo-worker", goal="echo something")
    w = wait_for(lambda: (p := emb.brain.store.port(SessionStore).get_process("acme", w.id)).status
                 is ProcessStatus.CLOSED and p, timeout=30)
    assert "echo__echo" in seen[0] and "respond" in seen[0]
    assert "hello over MCP" in w.engine_state["lastReply"]
