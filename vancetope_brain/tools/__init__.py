"""Tools engines may call through ``context.tools()``.

Rule: a tool outside the calling engine's effective pool cannot be called;
calling it yields an error result, never an exception in the turn. Tools reach
the world only through the context they are given.
"""

# Importing a tool module registers its server tools.
from vancetope_brain.tools import memory_tools, probe_tools, process_tools  # noqa: E402,F401,I001
from vancetope_brain.tools.dispatcher import (
    SERVER_TOOLS,
    Safety,
    ServerTools,
    ToolDispatcher,
    ToolManifest,
    ToolOutcome,
    ToolSource,
    server_tool,
)

__all__ = ["SERVER_TOOLS", "Safety", "ServerTools", "ToolDispatcher", "ToolManifest",
           "ToolOutcome", "ToolSource", "server_tool"]
