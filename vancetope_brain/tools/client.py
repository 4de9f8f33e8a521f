"""Client-side tools: executed by the connected client over its WebSocket.

A client registers its tools for its session (per connection, in Redis). A call
from any worker travels as a ``client-tool-request`` event on the session's
stream, addressed to one connection that registered the tool; the gateway
holding that socket sends the client a ``tool-call`` frame, and the client's
``tool-result`` frame comes back through a Redis list the worker waits on.

A result that comes after the worker stopped waiting (the call timed out, and the
model was told so) is not lost: the worker's give-up and the gateway's delivery are
each one Lua script, so exactly one of them wins. The worker's leaves the caller in
``vt:tool-call:{call}``; a later delivery finds it there and returns it, and the
gateway sends the result to that process's inbox as a ``ToolResult`` steer message
(arthur-engine §2.3).
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

import redis

from vancetope_brain import keys
from vancetope_brain.errors import InvalidInput
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.llm import ToolSpec
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.tools.dispatcher import Safety, ToolManifest, ToolOutcome

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
REGISTRATION_TTL = 86400
RESULT_TTL = 300

# KEYS: the result list, the call key. ARGV: the caller (JSON), the TTL. A result pushed
# before the give-up is taken; else the caller is left for a late delivery.
_GIVE_UP = """
local result = redis.call('LPOP', KEYS[1])
if result then return result end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return false
"""
# KEYS: the result list, the call key. ARGV: the result (JSON), the TTL. Returns the
# caller when the call had timed out, else hands the result to the waiting worker.
_DELIVER = """
local caller = redis.call('GET', KEYS[2])
if caller then
  redis.call('DEL', KEYS[2])
  return caller
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return false
"""


@dataclass(frozen=True)
class LateCall:
    """A client tool call whose result came after its caller stopped waiting."""

    process_id: str
    tool_name: str


class ClientToolBridge:
    """The Redis side of client tools; one per OS process."""

    def __init__(self, client: redis.Redis, events: EventBus) -> None:
        self._redis = client
        self._events = events
        self._give_up = client.register_script(_GIVE_UP)
        self._deliver = client.register_script(_DELIVER)

    def register(self, session_id: str, connection_id: str, tools: list[dict[str, Any]]) -> int:
        """Replace the tools this connection offers its session; returns how many."""
        for tool in tools:
            if not TOOL_NAME.match(str(tool.get("name", ""))):
                raise InvalidInput(f"client tool name {tool.get('name')!r} must match "
                                   f"{TOOL_NAME.pattern}")
        key = keys.client_tools(session_id)
        pipe = self._redis.pipeline()
        pipe.hset(key, connection_id, json.dumps(tools))
        pipe.expire(key, REGISTRATION_TTL)
        pipe.execute()
        return len(tools)

    def unregister(self, session_id: str, connection_id: str) -> None:
        self._redis.hdel(keys.client_tools(session_id), connection_id)

    def deliver(self, call_id: str, outcome: dict[str, Any]) -> LateCall | None:
        """Hand a client's result to the worker waiting for it; if the call timed out
        already, return its caller instead (the result then goes to its inbox)."""
        caller = self._deliver(keys=[keys.tool_result(call_id), keys.tool_call(call_id)],
                               args=[json.dumps(outcome), RESULT_TTL])
        if not caller:
            return None
        data = json.loads(caller)
        return LateCall(process_id=data["processId"], tool_name=data["toolName"])

    def give_up(self, call_id: str, process_id: str, tool_name: str) -> dict[str, Any] | None:
        """The caller stops waiting: the result if it came meanwhile, else None (and a
        later result is routed to the caller's inbox by ``deliver``)."""
        caller = json.dumps({"processId": process_id, "toolName": tool_name})
        raw = self._give_up(keys=[keys.tool_result(call_id), keys.tool_call(call_id)],
                            args=[caller, RESULT_TTL])
        return json.loads(raw) if raw else None

    def source(self, session_id: str, process_id: str, *, timeout: float) -> ClientTools:
        return ClientTools(self, session_id, process_id, timeout)

    def _offers(self, session_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(connection id, tool) of live connections, oldest registration first."""
        pipe = self._redis.pipeline(transaction=False)  # one round trip
        pipe.zrangebyscore(keys.presence(session_id), time.time(), "+inf")
        pipe.hgetall(keys.client_tools(session_id))
        members, registered = pipe.execute()
        live = {m.decode() for m in members}
        offers: list[tuple[str, dict[str, Any]]] = []
        for cid, raw in registered.items():
            if cid.decode() in live:
                offers.extend((cid.decode(), tool) for tool in json.loads(raw))
        return offers


@dataclass
class ClientTools:
    """The tool source of one session's connected clients."""

    bridge: ClientToolBridge
    session_id: str
    process_id: str
    timeout: float

    def manifests(self) -> list[ToolManifest]:
        seen: dict[str, ToolManifest] = {}
        for _, tool in self.bridge._offers(self.session_id):
            seen.setdefault(tool["name"], ToolManifest(
                ToolSpec(tool["name"], tool.get("description", ""),
                         tool.get("parameters") or {"type": "object", "properties": {}}),
                "client", Safety(tool.get("safety", Safety.MUTATING)),
                requires_engine_roles=frozenset(tool.get("requiresEngineRoles") or ()),
                idempotent=bool(tool.get("idempotent", False))))
        return list(seen.values())

    def call(self, name: str, params: dict[str, Any]) -> ToolOutcome:
        target = next((cid for cid, tool in self.bridge._offers(self.session_id)
                       if tool["name"] == name), None)
        if target is None:
            return ToolOutcome.failed(f"no connected client offers the tool {name!r}; "
                                      "it runs on the user's machine, which is not connected")
        call_id = "tc_" + secrets.token_hex(12)
        self.bridge._events.publish(self.session_id, self.process_id,
                                    EventType.CLIENT_TOOL_REQUEST,
                                    {"toolCallId": call_id, "toolName": name, "params": params,
                                     "connectionId": target, "timeoutSec": self.timeout})
        popped = self.bridge._redis.blpop([keys.tool_result(call_id)], timeout=self.timeout)
        answer = json.loads(popped[1]) if popped is not None else \
            self.bridge.give_up(call_id, self.process_id, name)
        if answer is None:
            return ToolOutcome(ToolCallStatus.TIMEOUT,
                               error=f"the client did not answer {name} within "
                                     f"{self.timeout:g} s; a later answer reaches this "
                                     f"process as a tool-result message")
        if answer.get("status") == ToolCallStatus.SUCCESS:
            return ToolOutcome(ToolCallStatus.SUCCESS, answer.get("result"))
        return ToolOutcome.failed(str(answer.get("error") or "the client reported an error"))
