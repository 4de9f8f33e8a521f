"""MCP tools through the official SDK: a real stdio server and a real streamable-HTTP server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from vancetope_brain.config import Config
from vancetope_brain.errors import ConfigError
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.tools import mcp as mcp_tools
from vancetope_brain.tools.mcp import McpRegistry, McpServerConfig, load_mcp_servers, prefixed_name

SERVER = str(Path(__file__).with_name("mcp_echo_server.py"))
TIMEOUT = 3.0  # a call's bound; connecting has its own (connect_timeout, 30 s)
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _lists(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture(scope="module")
def list_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp") / "stdio-lists.log"


@pytest.fixture(scope="module")
def registry(list_log: Path) -> Iterator[McpRegistry]:
    """The echo server over stdio, next to a server whose command does not exist."""
    echo = McpServerConfig(name="echo", transport="stdio", command=sys.executable, args=[SERVER],
                           env={"MCP_ECHO_LIST_LOG": str(list_log)}, timeout=TIMEOUT)
    broken = McpServerConfig(name="broken", transport="stdio", command="/nonexistent/mcp-server")
    with McpRegistry([echo, broken]) as reg:
        yield reg


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The echo server on streamable HTTP at 127.0.0.1:<ephemeral>; yields its URL and list log."""
    log = tmp_path_factory.mktemp("mcp-http") / "http-lists.log"
    proc = subprocess.Popen([sys.executable, SERVER, "--http"], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "MCP_ECHO_LIST_LOG": str(log)})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp", log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# --- stdio -----------------------------------------------------------------------------------

def test_tools_are_prefixed_and_carry_description_and_schema(registry: McpRegistry):
    specs = {s.name: s for s in registry.tools()}
    assert set(specs) == {"echo__echo", "echo__add", "echo__fail", "echo__sleep"}
    assert all(OPENAI_NAME.match(name) for name in specs)
    add = specs["echo__add"]
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object"
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert sorted(add.parameters["required"]) == ["a", "b"]


def test_manifests_carry_the_read_only_and_idempotent_hints(registry: McpRegistry):
    safety = {m.name: (m.transport, str(m.safety), m.idempotent)
              for m in registry.manifests()}
    assert safety["echo__echo"] == ("mcp", "SAFE_PROBE", True)
    assert safety["echo__add"] == ("mcp", "MUTATING", True)  # idempotentHint
    assert safety["echo__fail"] == ("mcp", "MUTATING", False)  # no hint: not idempotent


def test_echo_and_add_succeed(registry: McpRegistry):
    echo = registry.call("echo__echo", {"text": "hello"})
    assert (echo.status, echo.result, echo.error) == (ToolCallStatus.SUCCESS, {"result": "hello"}, None)
    add = registry.call("echo__add", {"a": 2, "b": 40})
    assert (add.status, add.result) == (ToolCallStatus.SUCCESS, {"result": 42})


def test_a_failing_tool_is_an_error_outcome_naming_server_and_tool(registry: McpRegistry):
    outcome = registry.call("echo__fail", {})
    assert outcome.status == ToolCallStatus.ERROR
    assert "this tool always fails" in outcome.error
    assert "'echo'" in outcome.error and "echo__fail" in outcome.error


def test_bad_arguments_are_an_error_outcome(registry: McpRegistry):
    outcome = registry.call("echo__add", {"a": "not a number"})
    assert outcome.status == ToolCallStatus.ERROR and "echo__add" in outcome.error


def test_a_call_past_the_timeout_times_out_and_the_next_call_works(registry: McpRegistry):
    registry.tools()  # connected beforehand, so the bound below is the call's alone
    started = time.monotonic()
    outcome = registry.call("echo__sleep", {"seconds": 60})
    elapsed = time.monotonic() - started
    assert outcome.status == ToolCallStatus.TIMEOUT and "timed out after 3 s" in outcome.error
    assert TIMEOUT <= elapsed < TIMEOUT + 2
    assert registry.call("echo__echo", {"text": "still here"}).result == {"result": "still here"}


def test_the_tool_list_is_cached_within_its_ttl(registry: McpRegistry, list_log: Path):
    registry.tools()
    listed = _lists(list_log)
    registry.tools()
    registry.call("echo__add", {"a": 1, "b": 1})
    registry.tools()
    assert listed >= 1 and _lists(list_log) == listed


def test_a_broken_server_offers_nothing_and_errors_on_call(registry: McpRegistry):
    assert not [s for s in registry.tools() if s.name.startswith("broken__")]
    outcome = registry.call("broken__echo", {"text": "x"})
    assert outcome.status == ToolCallStatus.ERROR
    assert "'broken'" in outcome.error and "/nonexistent/mcp-server" in outcome.error
    assert registry.call("echo__echo", {"text": "ok"}).status == ToolCallStatus.SUCCESS


def test_unknown_names_are_error_outcomes(registry: McpRegistry):
    assert registry.call("nope__echo", {}).status == ToolCallStatus.ERROR
    assert registry.call("echo", {}).status == ToolCallStatus.ERROR
    missing = registry.call("echo__nope", {})
    assert missing.status == ToolCallStatus.ERROR and "no such tool" in missing.error


def test_worker_threads_share_the_session_concurrently(registry: McpRegistry):
    registry.tools()
    results: dict[int, object] = {}

    def add(i: int) -> None:
        results[i] = registry.call("echo__add", {"a": i, "b": i}).result

    def nap(i: int) -> None:
        results[100 + i] = registry.call("echo__sleep", {"seconds": 1}).status

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    threads += [threading.Thread(target=nap, args=(i,)) for i in range(4)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {i: results[i] for i in range(8)} == {i: {"result": 2 * i} for i in range(8)}
    assert [results[100 + i] for i in range(4)] == [ToolCallStatus.SUCCESS] * 4
    assert time.monotonic() - started < 2.5  # four 1-s sleeps ran side by side


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_session(registry: McpRegistry):
    registry.tools()
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads
        pid = os.fork()
    if pid == 0:  # the child, as in Celery's prefork pool
        code = 1
        try:
            signal.alarm(20)  # never outlive the test, whatever happens
            outcome = registry.call("echo__echo", {"text": "from the child"})
            registry.close()
            os.write(write_end, repr(outcome.result).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        answer = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert answer == repr({"result": "from the child"})
    assert registry.call("echo__echo", {"text": "parent"}).result == {"result": "parent"}


@pytest.mark.parametrize("ping_after_idle", [0.0, 3600.0])
def test_a_crashed_stdio_server_is_restarted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             ping_after_idle: float):
    """Idle long enough, the ping finds the dead session first; else the closed transport
    does: either way the next call runs on a restarted server, none fails."""
    monkeypatch.setattr(mcp_tools, "PING_AFTER_IDLE", ping_after_idle)
    log = tmp_path / "lists.log"
    echo = McpServerConfig(name="crashy", transport="stdio", command=sys.executable, args=[SERVER],
                           env={"MCP_ECHO_LIST_LOG": str(log)}, timeout=TIMEOUT)
    with McpRegistry([echo]) as reg:
        assert reg.call("crashy__echo", {"text": "a"}).status == ToolCallStatus.SUCCESS
        os.kill(int(log.read_text().split()[1]), signal.SIGKILL)
        time.sleep(0.2)
        assert reg.call("crashy__echo", {"text": "b"}).result == {"result": "b"}
        assert reg.call("crashy__echo", {"text": "c"}).result == {"result": "c"}


def test_close_then_use_reopens():
    echo = McpServerConfig(name="e2", transport="stdio", command=sys.executable, args=[SERVER],
                           timeout=TIMEOUT)
    reg = McpRegistry([echo])
    try:
        assert reg.call("e2__echo", {"text": "a"}).result == {"result": "a"}
        reg.close()
        assert reg.call("e2__echo", {"text": "b"}).result == {"result": "b"}
    finally:
        reg.close()


# --- streamable HTTP -------------------------------------------------------------------------

def test_streamable_http_server_tools_and_calls(http_server: tuple[str, Path]):
    url, log = http_server
    config = McpServerConfig(name="web", transport="http", url=url, timeout=TIMEOUT, tools_ttl=0)
    with McpRegistry([config]) as reg:
        names = {s.name for s in reg.tools()}
        assert names == {"web__echo", "web__add", "web__fail", "web__sleep"}
        assert reg.call("web__echo", {"text": "over http"}).result == {"result": "over http"}
        assert reg.call("web__add", {"a": 3, "b": 4}).result == {"result": 7}
        failed = reg.call("web__fail", {})
        assert failed.status == ToolCallStatus.ERROR and "this tool always fails" in failed.error
        before = _lists(log)
        reg.tools()
        assert _lists(log) == before + 1  # tools_ttl=0: every tools() lists again


def test_an_unreachable_http_server_offers_nothing():
    config = McpServerConfig(name="gone", transport="http", url="http://127.0.0.1:9/mcp", timeout=2)
    with McpRegistry([config]) as reg:
        assert reg.tools() == []
        assert reg.call("gone__echo", {}).status == ToolCallStatus.ERROR


# --- names and configuration -----------------------------------------------------------------

@pytest.mark.parametrize("tool", ["read.file", "ns/tool:v2", "x" * 80, "ünïcode"])
def test_prefixed_names_are_valid_openai_function_names(tool: str):
    name = prefixed_name("srv", tool)
    assert OPENAI_NAME.match(name) and name.startswith("srv__")
    assert prefixed_name("srv", tool) == name


def test_no_file_means_no_servers():
    reg = McpRegistry.from_file(None)
    assert reg.tools() == [] and reg.call("a__b", {}).status == ToolCallStatus.ERROR


def test_the_variable_sets_the_file():
    assert Config.from_env({}).mcp_servers_file is None
    assert Config.from_env({"VANCETOPE_MCP_SERVERS": "/etc/mcp.yaml"}).mcp_servers_file == Path("/etc/mcp.yaml")


def test_yaml_and_json_files_load(tmp_path: Path):
    yml = tmp_path / "servers.yaml"
    yml.write_text(
        "- {name: files, transport: stdio, command: npx, args: [-y, srv], env: {TOKEN: '${T}'}}\n"
        "- {name: web-search, transport: http, url: 'https://x.example/mcp',\n"
        "   headers: {Authorization: 'Bearer ${T}'}, timeout: 5, connect_timeout: 9, tools_ttl: 60}\n")
    files, web = load_mcp_servers(yml, environ={"T": "s3cret"})
    assert (files.command, files.args, files.env) == ("npx", ["-y", "srv"], {"TOKEN": "s3cret"})
    assert (web.url, web.headers, web.timeout, web.connect_timeout, web.tools_ttl) == (
        "https://x.example/mcp", {"Authorization": "Bearer s3cret"}, 5, 9, 60)
    js = tmp_path / "servers.json"
    js.write_text('[{"name": "a", "transport": "stdio", "command": "a-server"}]')
    assert [c.name for c in load_mcp_servers(js)] == ["a"]


@pytest.mark.parametrize(("content", "expected"), [
    ("{name: a}", "must hold a list"),
    ("- [unclosed", "cannot read"),
    ("- {name: Bad, transport: stdio, command: x}", r"\[0\] \('Bad'\) name"),
    ("- {name: a__b, transport: stdio, command: x}", "name"),
    ("- {name: a, transport: stdio}", r"\[0\] \('a'\) entry: .*command"),
    ("- {name: a, transport: http}", "url"),
    ("- {name: a, transport: http, url: 'ftp://x'}", "url"),
    ("- {name: a, transport: stdio, command: x, url: 'http://x'}", "url"),
    ("- {name: a, transport: smoke, command: x}", "transport"),
    ("- {name: a, transport: stdio, command: x, timeout: 0}", "timeout"),
    ("- {name: a, transport: stdio, command: x, connect_timeout: 0}", "connect_timeout"),
    ("- {name: a, transport: stdio, command: x, colour: red}", "colour"),
    ("- {name: a, transport: stdio, command: x, requires_engine_roles: [Bad_Role]}",
     "requires_engine_roles"),
    ("- {name: a, transport: stdio, command: x, tool_roles: {t: [no spaces]}}", r"tool_roles\.t"),
    ("- {name: a, transport: stdio, command: x, env: {K: '${UNSET_VAR}'}}", r"env.*UNSET_VAR"),
    ("- {name: a, transport: stdio, command: x}\n- {name: a, transport: stdio, command: y}",
     "used twice"),
])
def test_bad_files_name_the_file_and_the_field(tmp_path: Path, content: str, expected: str):
    path = tmp_path / "mcp.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=expected) as caught:
        load_mcp_servers(path, environ={})
    assert str(path) in str(caught.value)


def test_a_missing_file_is_a_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read"):
        McpRegistry.from_file(tmp_path / "absent.yaml")


def test_a_server_config_names_the_engine_roles_of_its_tools():
    config = McpServerConfig(name="files", transport="stdio", command="x",
                             requires_engine_roles=["file-reader"],
                             tool_roles={"write_file": ["file-writer"]})
    assert config.roles_of("read_file") == {"file-reader"}
    assert config.roles_of("write_file") == {"file-reader", "file-writer"}
