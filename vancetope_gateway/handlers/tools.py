"""Client tool frames: offer this connection's tools to the bound session's processes, and
answer a ``tool-call`` (the push is in ``frames``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from vancetope_brain.errors import NotFound
from vancetope_brain.models.base import Wire
from vancetope_brain.models.recipe import KEBAB
from vancetope_brain.models.steer import ToolCallStatus, ToolResult
from vancetope_gateway.handlers.declare import Context, frame


class ClientToolDef(Wire):
    """A tool the client executes on its machine (arthur-engine §2.2: transparent to engines).
    ``idempotent``: calling it again with the same arguments after a server crash repeats no
    effect (a ``SAFE_PROBE`` always is); a call of any other tool that a crash cut short is
    not repeated without the user's approval. ``requiresEngineRoles``: see the field."""

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str = Field(default="", max_length=4000)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object",
                                                                "properties": {}})
    safety: Literal["SAFE_PROBE", "MUTATING"] = "MUTATING"
    idempotent: bool = False
    requires_engine_roles: list[Annotated[str, StringConstraints(pattern=KEBAB, max_length=64)]] \
        = Field(default_factory=list, max_length=20)
    """Engine roles a process's recipe must carry to see and call the tool (think-engines
    §7b); none: every engine whose pool holds it."""


class ClientToolsRegister(Wire):
    """Offer (replace) this connection's client-side tools to the bound session's processes."""

    tools: list[ClientToolDef] = Field(max_length=200)


class ToolResultData(Wire):
    """The result of a ``tool-call`` this connection received."""

    tool_call_id: str = Field(min_length=1, max_length=64)
    status: Literal["success", "error"]
    result: Any = None
    error: str | None = Field(default=None, max_length=32_000)


class ClientToolsRegistered(Wire):
    """Reply to ``client-tools-register``: how many tools this connection now offers."""

    registered: int


class ToolResultAccepted(Wire):
    """Reply to ``tool-result``: the result reached the waiting process — or, with
    ``late``, the call had timed out and the result went to the process's inbox as a
    ToolResult message (arthur-engine §2.3)."""

    late: bool = False


@frame("client-tools-register")
def client_tools_register(conn: Context, data: ClientToolsRegister) -> ClientToolsRegistered:
    session = conn.require_session()
    conn.gateway.lifecycle.check_tool_host(conn.who, session.id, conn.fingerprint)
    count = conn.gateway.client_tools.register(
        session.id, conn.connection_id, [t.dump() for t in data.tools])
    return ClientToolsRegistered(registered=count)


@frame("tool-result")
def tool_result(conn: Context, data: ToolResultData) -> ToolResultAccepted:
    if not conn.answer_tool_call(data.tool_call_id):
        raise NotFound(f"no tool call {data.tool_call_id!r} is waiting for this connection")
    late = conn.gateway.client_tools.deliver(data.tool_call_id, data.dump())
    if late is not None:  # the call timed out: the result goes to its caller's inbox
        conn.gateway.sessions.tool_result(conn.who, late.process_id, ToolResult(
            tool_call_id=data.tool_call_id, tool_name=late.tool_name,
            status=ToolCallStatus(data.status), result=data.result, error=data.error))
    return ToolResultAccepted(late=late is not None)
