"""The tool dispatcher: one call shape, results instead of exceptions.

Server-side tools register with ``@server_tool``; client-side and MCP
transports plug in behind the same ``invoke`` with the Arthur issue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vancetope_brain.llm import ToolSpec
from vancetope_brain.models.steer import ToolCallStatus

log = logging.getLogger(__name__)

ToolFn = Callable[..., Any]


@dataclass(frozen=True)
class ToolOutcome:
    status: ToolCallStatus
    result: Any = None
    error: str | None = None


@dataclass(frozen=True)
class _Registered:
    spec: ToolSpec
    fn: ToolFn


SERVER_TOOLS: dict[str, _Registered] = {}


def server_tool(spec: ToolSpec) -> Callable[[ToolFn], ToolFn]:
    """Register a server-side tool; ``fn(context, **params)`` returns a JSON-able result."""
    def decorate(fn: ToolFn) -> ToolFn:
        if spec.name in SERVER_TOOLS:
            raise ValueError(f"tool {spec.name!r} registered twice")
        SERVER_TOOLS[spec.name] = _Registered(spec, fn)
        return fn
    return decorate


class ToolDispatcher:
    """Invokes tools of one engine's effective pool on behalf of one turn."""

    def __init__(self, pool: frozenset[str], context: Any) -> None:
        self._pool = pool
        self._context = context

    def specs(self) -> list[ToolSpec]:
        """What the model is offered: the pool's registered tools, sorted by name."""
        return [SERVER_TOOLS[n].spec for n in sorted(self._pool) if n in SERVER_TOOLS]

    def invoke(self, name: str, params: dict[str, Any]) -> ToolOutcome:
        if name not in self._pool or name not in SERVER_TOOLS:
            return ToolOutcome(ToolCallStatus.ERROR,
                               error=f"tool {name!r} is not available to this process")
        try:
            return ToolOutcome(ToolCallStatus.SUCCESS, SERVER_TOOLS[name].fn(self._context, **params))
        except TypeError as e:
            return ToolOutcome(ToolCallStatus.ERROR, error=f"bad parameters for {name}: {e}")
        except Exception as e:  # a tool's failure is the model's business, not the turn's
            log.exception("tool %s failed", name)
            return ToolOutcome(ToolCallStatus.ERROR, error=f"{type(e).__name__}: {e}")
