"""The special tools of tool-health service engines (think-engines §7b): visible only to an
engine whose recipe carries their role (``requiresEngineRoles``), whatever its pool says.

- ``tool_probe`` (role ``tool-prober``, SAFE_PROBE): call a SAFE_PROBE tool of a server or
  an MCP server, in the engine's pool or not; a MUTATING one is refused by the dispatcher
  (``ToolDispatcher.probe``) without being called.
- ``tool_probe_as_user`` (role ``tool-prober``, SAFE_PROBE): the same in the originating
  user's context: through the user's session, so it reaches the tools of the user's
  connected client too. Refused for a process without an originating user.
- ``tool_health_write`` (role ``tool-health-writer``, MUTATING): record a ``Verdict`` in
  tool_health (the next manifest honours it). Idempotent: a verdict is an upsert by key.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from vancetope_brain.errors import ToolError
from vancetope_brain.llm import ToolSpec
from vancetope_brain.models import utcnow
from vancetope_brain.models.base import Wire
from vancetope_brain.models.tool_health import (
    REASON_LIMIT,
    HealthCause,
    HealthSource,
    HealthState,
    ToolHealth,
)
from vancetope_brain.tools.dispatcher import Safety, server_tool

PROBER = "tool-prober"
HEALTH_WRITER = "tool-health-writer"
SEPARATOR = "__"  # tools.mcp.SEPARATOR; not imported: that module loads the MCP SDK's deps
SERVER_SIDE = frozenset({"server", "mcp"})
"""What ``tool_probe`` reaches; ``tool_probe_as_user`` reaches the user's client too."""


class Verdict(Wire):
    """A service engine's conclusion about a server (``tool`` null) or one of its tools."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True)

    server: str = Field(min_length=1, max_length=32,
                        description="the MCP server's name (the prefix before '__')")
    tool: str | None = Field(default=None, max_length=128,
                             description="the tool as you know it ('<server>__<tool>'); "
                                         "null for the whole server")
    state: HealthState = Field(description="UP: works (the failure was the caller's or "
                                           "passing); DEGRADED: works, fails some calls; "
                                           "DOWN: do not offer it")
    reason: str = Field(min_length=1, max_length=REASON_LIMIT,
                        description="what the probes showed, for operators and models")
    recheck_after_sec: int = Field(default=300, ge=30, le=86_400,
                                   description="how long the verdict holds: no new "
                                               "diagnosis of the tool before, and the "
                                               "background probe looks again then")

    @model_validator(mode="after")
    def _tool_of_the_server(self) -> Verdict:
        if self.tool is not None and not self.tool.startswith(self.server + SEPARATOR):
            raise ValueError(f"tool {self.tool!r} is not a tool of server {self.server!r} "
                             f"(its name starts with '{self.server}{SEPARATOR}')")
        return self


_PROBE_PARAMS = {"type": "object", "properties": {
    "tool": {"type": "string", "description": "the tool's name, e.g. 'echo__echo'"},
    "arguments": {"type": "object", "description": "the tool's arguments"}},
    "required": ["tool"], "additionalProperties": False}


def _probe(context: Any, tool: str, arguments: dict[str, Any] | None,
           transports: frozenset[str] | None) -> dict[str, Any]:
    tools = context.tools()
    outcome = tools.probe(tool, arguments or {}, transports=transports)
    if tool not in {m.name for m in tools.probes(transports=transports)}:
        raise ToolError(outcome.error or f"tool {tool!r} cannot be probed")
    return {"tool": tool, "status": outcome.status.value, "result": outcome.result,
            "error": outcome.error}


@server_tool(ToolSpec("tool_probe", "Call a SAFE_PROBE tool (one that changes nothing) to see "
                      "whether it works; a MUTATING tool is refused.", _PROBE_PARAMS),
             safety=Safety.SAFE_PROBE, roles=[PROBER])
def tool_probe(context: Any, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    return _probe(context, tool, arguments, SERVER_SIDE)


@server_tool(ToolSpec("tool_probe_as_user", "Like tool_probe, as the user whose call failed: "
                      "reaches their connected client's SAFE_PROBE tools too.", _PROBE_PARAMS),
             safety=Safety.SAFE_PROBE, roles=[PROBER])
def tool_probe_as_user(context: Any, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    if context.originating_user is None:
        raise ToolError("this process has no originating user; use tool_probe")
    return _probe(context, tool, arguments, None)


WRITE_SPEC = ToolSpec("tool_health_write", "Record your verdict on the server or tool in "
                      "tool_health; the next tool listing honours it.",
                      Verdict.model_json_schema(by_alias=True))


@server_tool(WRITE_SPEC, roles=[HEALTH_WRITER], idempotent=True)
def tool_health_write(context: Any, **params: Any) -> Any:
    try:
        verdict = Verdict.model_validate(params)
    except ValueError as e:
        raise ToolError(f"invalid verdict: {e}") from e
    scope = context.scope
    record = ToolHealth(
        tenant_id=scope.tenant_id, project_id=scope.project_id, server=verdict.server,
        tool=verdict.tool, state=verdict.state,
        cause=None if verdict.state is HealthState.UP else HealthCause.PROBE_VERDICT,
        reason=verdict.reason, source=HealthSource.AGRAJAG,
        # Also on UP: until then the verdict holds (no new diagnosis of the same failure);
        # the background probe looks only at records that are not UP.
        next_probe_at=utcnow() + timedelta(seconds=verdict.recheck_after_sec))
    context.tool_health()(record)
    return {"written": True, "server": record.server, "tool": record.tool,
            "state": record.state.value}
