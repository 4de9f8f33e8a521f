"""The tool dispatcher: a tool outside the pool cannot be called; failures become results."""

from __future__ import annotations

import pytest

from vancetope_brain.llm import ToolSpec
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.tools import SERVER_TOOLS, ServerTools, ToolDispatcher, server_tool


@pytest.fixture(scope="module", autouse=True)
def tools():
    @server_tool(ToolSpec("test_add", "adds", {"type": "object"}))
    def add(context, a: int, b: int) -> int:
        return a + b

    @server_tool(ToolSpec("test_fail", "fails"))
    def fail(context) -> None:
        raise RuntimeError("tool broke")

    yield
    SERVER_TOOLS.pop("test_add")
    SERVER_TOOLS.pop("test_fail")


def test_pool_decides_what_is_offered_and_callable():
    dispatcher = ToolDispatcher(frozenset({"test_add", "not_registered"}), sources=[ServerTools(None)])
    assert [s.name for s in dispatcher.specs()] == ["test_add"]
    assert dispatcher.invoke("test_add", {"a": 2, "b": 3}).result == 5
    outside = dispatcher.invoke("test_fail", {})
    assert outside.status is ToolCallStatus.ERROR and "not in this process's tool pool" in \
        outside.error


def test_failures_are_results_not_exceptions():
    dispatcher = ToolDispatcher(frozenset({"test_add", "test_fail"}), sources=[ServerTools(None)])
    broke = dispatcher.invoke("test_fail", {})
    assert broke.status is ToolCallStatus.ERROR and "tool broke" in broke.error
    bad = dispatcher.invoke("test_add", {"a": 1})
    assert bad.status is ToolCallStatus.ERROR and "bad parameters" in bad.error


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
