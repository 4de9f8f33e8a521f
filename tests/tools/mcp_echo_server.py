"""A tiny MCP server for the tests, written with the SDK's ``MCPServer`` (v1's FastMCP).

    python -m tests.tools.mcp_echo_server              # stdio
    python -m tests.tools.mcp_echo_server --http       # streamable HTTP on 127.0.0.1:<ephemeral>

In HTTP mode the bound port is printed as ``PORT <n>`` on stdout before serving
(``--port N`` binds that port instead, so a test can stop the server and start it again
at the same URL). When ``MCP_ECHO_LIST_LOG`` names a file, every ``tools/list`` appends
``list <pid>`` to it (the side channel the tests count, and find the server process by).

When ``MCP_ECHO_MODE_FILE`` names a file, its content sets the mode of every
``tools/list`` and ``tools/call`` at the time it arrives: ``hang`` never answers (the
handshake and pings still do: a server whose work is stuck), anything else (or no file)
answers normally — so a test hangs and heals a running server. The tool ``fail`` is the
unclassifiable failure: an ``isError`` result whose text names no known cause. With
``MCP_ECHO_TOKEN`` set, the HTTP server answers 401 unless a request carries
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import Tool, ToolAnnotations


async def _hang_if_told() -> None:
    mode_file = os.environ.get("MCP_ECHO_MODE_FILE")
    if mode_file and os.path.exists(mode_file):
        with open(mode_file) as f:
            if f.read().strip() == "hang":
                await anyio.sleep_forever()


class _CountingServer(MCPServer):
    async def list_tools(self) -> list[Tool]:
        await _hang_if_told()
        log = os.environ.get("MCP_ECHO_LIST_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"list {os.getpid()}\n")
        return await super().list_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        await _hang_if_told()
        return await super().call_tool(name, arguments, context)


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


def _bearer_only(app: Any, token: str) -> Any:
    """Answer 401 to any HTTP request without ``Authorization: Bearer <token>``."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


def _serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
    sock.bind(("127.0.0.1", port))
    sock.listen(64)  # connections queue from now on, even before uvicorn accepts them
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app: Any = server.streamable_http_app()
    token = os.environ.get("MCP_ECHO_TOKEN")
    if token:
        app = _bearer_only(app, token)
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if "--http" in sys.argv:
        _serve_http()
    else:
        server.run("stdio")
