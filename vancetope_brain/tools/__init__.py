"""Tools engines may call through ``context.tools()``.

Rule: a tool outside the calling engine's effective pool cannot be called;
calling it yields an error result, never an exception in the turn.
"""

from vancetope_brain.tools.dispatcher import SERVER_TOOLS, ToolDispatcher, ToolOutcome, server_tool

__all__ = ["SERVER_TOOLS", "ToolDispatcher", "ToolOutcome", "server_tool"]
