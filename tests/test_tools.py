"""The tool dispatcher: a tool outside the pool cannot be called; a tool's failures become
results, while signals and runtime failures end the turn."""

from __future__ import annotations

import re
import time

import fakeredis
import pytest
import redis

from vancetope_brain import keys
from vancetope_brain.errors import Fenced, LlmError, NotFound, StoreError, ToolError
from vancetope_brain.events import EventBus
from vancetope_brain.llm import ToolSpec
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.tools import (
    SERVER_TOOLS,
    Safety,
    ServerTools,
    ToolDispatcher,
    ToolManifest,
    server_tool,
)
from vancetope_brain.tools.client import ClientToolBridge


@pytest.fixture(scope="module", autouse=True)
def tools():
    @server_tool(ToolSpec("test_add", "adds", {"type": "object"}))
    def add(context, a: int, b: int) -> int:
        return a + b

    @server_tool(ToolSpec("test_fail", "fails"))
    def fail(context) -> None:
        raise RuntimeError("tool broke")

    @server_tool(ToolSpec("test_raise", "raises the exception it is given as its context"))
    def raise_context(context) -> None:
        raise context

    yield
    for name in ("test_add", "test_fail", "test_raise"):
        SERVER_TOOLS.pop(name)


def test_pool_decides_what_is_offered_and_callable():
    dispatcher = ToolDispatcher(frozenset({"test_add", "not_registered"}), sources=[ServerTools(None)])
    assert [s.name for s in dispatcher.specs()] == ["test_add"]
    assert dispatcher.invoke("test_add", {"a": 2, "b": 3}).result == 5
    outside = dispatcher.invoke("test_fail", {})
    assert outside.status is ToolCallStatus.ERROR and "not in this process's tool pool" in \
        outside.error


def test_failures_are_results_not_exceptions(caplog):
    caplog.set_level("INFO", logger="vancetope_brain.tools.dispatcher")
    dispatcher = ToolDispatcher(frozenset({"test_add", "test_fail"}), sources=[ServerTools(None)])
    broke = dispatcher.invoke("test_fail", {})
    assert broke.status is ToolCallStatus.ERROR and "tool broke" in broke.error
    assert re.search(r"tool test_fail \(server\): call failed after \d+\.\d\d s",
                     caplog.text)
    bad = dispatcher.invoke("test_add", {"a": 1})
    assert bad.status is ToolCallStatus.ERROR and "bad parameters" in bad.error
    assert re.search(r"tool test_add \(server\): call ended error after \d+\.\d\d s",
                     caplog.text)


@pytest.mark.parametrize(("raised", "error"), [
    (ToolError("no such file"), "no such file"),
    (NotFound("no process 'p9'"), "NotFound: no process 'p9'"),
    (TimeoutError("the API did not answer"), "TimeoutError: the API did not answer"),
    (ValueError("bad date"), "ValueError: bad date"),
], ids=["ToolError", "NotFound", "TimeoutError", "ValueError"])
def test_what_a_tool_raises_is_the_models_to_handle(raised, error):
    dispatcher = ToolDispatcher(frozenset({"test_raise"}), sources=[ServerTools(raised)])
    outcome = dispatcher.invoke("test_raise", {})
    assert (outcome.status, outcome.error) == (ToolCallStatus.ERROR, error)


@pytest.mark.parametrize("raised", [
    Fenced("the lane lease was lost"), StoreError("database is locked"),
    LlmError("the model timed out"), redis.ConnectionError("Redis is down"),
], ids=lambda e: type(e).__name__)
def test_signals_and_runtime_failures_end_the_turn(raised):
    class Listing:
        def manifests(self):
            raise raised

    calling = ToolDispatcher(frozenset({"test_raise"}), sources=[ServerTools(raised)])
    with pytest.raises(type(raised)) as got:
        calling.invoke("test_raise", {})
    assert got.value is raised
    listing = ToolDispatcher(frozenset({"*"}), sources=[ServerTools(None), Listing()])
    with pytest.raises(type(raised)):
        listing.specs()


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="registered twice"):
        server_tool(ToolSpec("test_add", "again"))(lambda context: None)


def test_patterns_roles_and_source_order():
    from vancetope_brain.tools import Safety, ToolManifest, ToolOutcome

    class Source:
        def __init__(self, names, transport, roles=frozenset()):
            self.names, self.transport, self.roles = names, transport, roles

        def manifests(self):
            return [ToolManifest(ToolSpec(n, n), self.transport, Safety.SAFE_PROBE, self.roles)
                    for n in self.names]

        def call(self, name, params):
            return ToolOutcome(ToolCallStatus.SUCCESS, self.transport)

    class Broken:
        def manifests(self):
            raise ConnectionError("MCP server down")

    dispatcher = ToolDispatcher(
        frozenset({"fs_*", "probe"}), roles=frozenset({"tool-prober"}),
        sources=[Source(["fs_read", "probe"], "client"), Broken(),
                 Source(["fs_read", "fs_write", "other"], "mcp"),
                 Source(["probe_secret"], "server", frozenset({"auditor"}))])
    assert [s.name for s in dispatcher.specs()] == ["fs_read", "fs_write", "probe"]
    assert dispatcher.invoke("fs_read", {}).result == "client"  # the first source wins
    assert dispatcher.invoke("fs_write", {}).result == "mcp"
    assert "tool pool" in dispatcher.invoke("other", {}).error
    gated = ToolDispatcher(frozenset({"probe_*"}), sources=[
        Source(["probe_secret"], "server", frozenset({"auditor"}))])
    assert gated.specs() == [] and gated.invoke("probe_secret", {}).status is ToolCallStatus.ERROR


def test_each_source_lists_its_tools_once_per_turn():
    from vancetope_brain.tools import Safety, ToolManifest, ToolOutcome

    class Counting:
        listed = 0

        def manifests(self):
            self.listed += 1
            return [ToolManifest(ToolSpec("fs_read", "reads"), "client", Safety.SAFE_PROBE)]

        def call(self, name, params):
            return ToolOutcome(ToolCallStatus.SUCCESS, name)

    source = Counting()
    turn = ToolDispatcher(frozenset({"fs_read"}), sources=[source])
    assert [s.name for s in turn.specs()] == ["fs_read"]
    assert [turn.invoke("fs_read", {}).result for _ in range(3)] == ["fs_read"] * 3
    assert source.listed == 1
    ToolDispatcher(frozenset({"fs_read"}), sources=[source]).specs()  # the next turn asks again
    assert source.listed == 2


def test_a_tool_declares_whether_it_is_idempotent_and_a_probe_always_is():
    spec = ToolSpec("t", "t")
    assert not ToolManifest(spec, "server").idempotent  # a side effect unless declared
    assert ToolManifest(spec, "server", idempotent=True).idempotent
    assert ToolManifest(spec, "server", Safety.SAFE_PROBE).idempotent
    assert ToolManifest(spec, "server", Safety.SAFE_PROBE, idempotent=False).idempotent
    declared = {name: SERVER_TOOLS[name].manifest.idempotent for name in (
        "process_create", "process_steer", "process_stop", "process_list", "inbox_post")}
    # The process tools' effects are committed with the turn; inbox_post writes at once.
    assert declared == {"process_create": True, "process_steer": True, "process_stop": True,
                        "process_list": True, "inbox_post": False}


def test_a_client_tool_is_idempotent_only_when_its_registration_says_so():
    client = fakeredis.FakeRedis()
    bridge = ClientToolBridge(client, EventBus(client, max_len=10, ttl=60))
    client.zadd(keys.presence("ses_1"), {"conn_1": time.time() + 60})
    bridge.register("ses_1", "conn_1", [
        {"name": "fs_write", "safety": "MUTATING"},
        {"name": "fs_touch", "safety": "MUTATING", "idempotent": True},
        {"name": "fs_read", "safety": "SAFE_PROBE"}])
    manifests = bridge.source("ses_1", "proc_1", timeout=1).manifests()
    assert {m.name: m.idempotent for m in manifests} == {
        "fs_write": False, "fs_touch": True, "fs_read": True}


def test_a_probe_reaches_only_safe_probe_tools_whatever_the_pool():
    from vancetope_brain.tools import ToolOutcome

    called: list[str] = []

    class Source:
        def manifests(self):
            return [ToolManifest(ToolSpec("srv__ping", "looks"), "mcp", Safety.SAFE_PROBE),
                    ToolManifest(ToolSpec("srv__drop", "changes"), "mcp", Safety.MUTATING),
                    ToolManifest(ToolSpec("srv__audit", "looks"), "mcp", Safety.SAFE_PROBE,
                                 frozenset({"auditor"}))]

        def call(self, name, params):
            called.append(name)
            return ToolOutcome(ToolCallStatus.SUCCESS, name)

    agrajag = ToolDispatcher(frozenset({"srv__*"}), roles=frozenset({"tool-prober"}),
                             sources=[Source()])
    assert [m.name for m in agrajag.probes()] == ["srv__ping"]  # no role for srv__audit
    outside = ToolDispatcher(frozenset(), sources=[Source()])  # nothing in its pool
    assert outside.probe("srv__ping", {}).result == "srv__ping"
    refused = outside.probe("srv__drop", {})
    assert refused.status is ToolCallStatus.ERROR and "MUTATING" in refused.error
    assert "cannot be probed" in outside.probe("srv__audit", {}).error
    with agrajag.probing():
        assert [s.name for s in agrajag.specs()] == ["srv__ping"]
        assert "MUTATING and was not called" in agrajag.invoke("srv__drop", {}).error
    assert agrajag.invoke("srv__drop", {}).result == "srv__drop"  # outside the probe turn
    assert called == ["srv__ping", "srv__drop"]


def test_a_client_tool_with_engine_roles_is_only_for_engines_with_them():
    client = fakeredis.FakeRedis()
    bridge = ClientToolBridge(client, EventBus(client, max_len=10, ttl=60))
    client.zadd(keys.presence("ses_1"), {"conn_1": time.time() + 60})
    bridge.register("ses_1", "conn_1", [
        {"name": "fs_read", "safety": "SAFE_PROBE"},
        {"name": "fs_audit", "safety": "SAFE_PROBE", "requiresEngineRoles": ["auditor"]}])
    source = bridge.source("ses_1", "proc_1", timeout=1)
    plain = ToolDispatcher(frozenset({"fs_*"}), sources=[source])
    auditor = ToolDispatcher(frozenset({"fs_*"}), roles=frozenset({"auditor"}),
                             sources=[source])
    assert [s.name for s in plain.specs()] == ["fs_read"]
    assert "needs the engine role(s) auditor" in plain.invoke("fs_audit", {}).error
    assert [s.name for s in auditor.specs()] == ["fs_audit", "fs_read"]


def test_the_tool_health_tools_exist_only_for_engines_with_their_roles():
    everything = ToolDispatcher(frozenset({"*"}), sources=[ServerTools(None)])
    names = {s.name for s in everything.specs()}
    assert not names & {"tool_probe", "tool_probe_as_user", "tool_health_write"}
    assert "needs the engine role(s) tool-health-writer" in everything.invoke(
        "tool_health_write", {}).error
    prober = ToolDispatcher(frozenset({"*"}), roles=frozenset({"tool-prober"}),
                            sources=[ServerTools(None)])
    assert {"tool_probe", "tool_probe_as_user"} <= {s.name for s in prober.specs()}
    assert "tool_health_write" not in {s.name for s in prober.specs()}
    assert SERVER_TOOLS["tool_health_write"].manifest.safety is Safety.MUTATING
    assert SERVER_TOOLS["tool_probe"].manifest.safety is Safety.SAFE_PROBE
