"""A tiny MCP server for the tests, written with the SDK's ``MCPServer`` (v1's FastMCP).

    python -m tests.tools.mcp_echo_server              # stdio
    python -m tests.tools.mcp_echo_server --http       # streamable HTTP on 127.0.0.1:<ephemeral>

In HTTP mode the bound port is printed as ``PORT <n>`` on stdout before serving.
When ``MCP_ECHO_LIST_LOG`` names a file, every ``tools/list`` appends ``list <pid>`` to
it (the side channel the tests count, and find the server process by).
"""

from __future__ import annotations

import os
import socket
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import Tool, ToolAnnotations


class _CountingServer(MCPServer):
    async def list_tools(self) -> list[Tool]:
        log = os.environ.get("MCP_ECHO_LIST_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"list {os.getpid()}\n")
        return await super().list_tools()


server = _CountingServer("echo", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail() -> str:
    """Always fails (``ToolError``: the SDK passes its message on; other exceptions it hides)."""
    raise ToolError("this tool always fails")


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then say how long."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


def _serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue from now on, even before uvicorn accepts them
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if "--http" in sys.argv:
        _serve_http()
    else:
        server.run("stdio")
