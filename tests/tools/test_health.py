"""The tool-health checker with real MCP servers (the echo server over stdio and HTTP, and the
published ``mcp-server-time``) and a real SQLite store: failures classified without an
LLM, DOWN servers not listed and refused at once, the probe bringing them back."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from vancetope_brain.errors import ConfigError
from vancetope_brain.models import ThinkProcess, utcnow
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.models.tool_health import (
    HealthCause,
    HealthSource,
    HealthState,
    ToolHealth,
)
from vancetope_brain.store import Backend, ToolHealthStore, open_store
from vancetope_brain.tools import ToolDispatcher
from vancetope_brain.tools.health import (
    TIMEOUTS_TO_DOWN,
    AmbiguousToolError,
    Failure,
    HealthPolicy,
    ToolHealthService,
    classify,
    classify_text,
)
from vancetope_brain.tools.mcp import McpRegistry, McpServerConfig

SERVER = str(Path(__file__).with_name("mcp_echo_server.py"))
TIMEOUT = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpEcho:
    """The echo server over HTTP on a fixed port, stopped and started at will."""

    def __init__(self, port: int, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.env = {**os.environ, **(env or {})}
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, SERVER, "--http", "--port", str(self.port)],
                                     stdout=subprocess.PIPE, text=True, env=self.env)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().startswith("PORT ")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            self.proc = None


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Backend]:
    backend = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    yield backend
    backend.close()


@pytest.fixture
def seen() -> list[AmbiguousToolError]:
    return []


@pytest.fixture
def service(store: Backend, seen: list[AmbiguousToolError]) -> ToolHealthService:
    return ToolHealthService(store.port(ToolHealthStore), HealthPolicy(backoff=0.1),
                             on_ambiguous=seen.append)


PROCESS = ThinkProcess(id="proc_1", tenant_id="acme", session_id="ses_1", user_id="ada",
                       project_id="p1", name="main", engine="arthur", engine_version="1")


def turn(service: ToolHealthService, registry: McpRegistry) -> ToolDispatcher:
    """What one turn of PROCESS sees: a dispatcher over the checked MCP source."""
    return ToolDispatcher(frozenset({"*"}), sources=[service.source(registry, PROCESS)])


def record(service: ToolHealthService, server: str, tool: str | None = None) -> ToolHealth | None:
    return service.store.get_tool_health("acme", "p1", server, tool)


def probe_now(service: ToolHealthService, registry: McpRegistry) -> int:
    return service.probe_due(registry, utcnow() + timedelta(hours=1))


# ── classification ──────────────────────────────────────────────────────────

@pytest.mark.parametrize(("text", "cause"), [
    ("HTTP 401 Unauthorized", HealthCause.AUTH),
    ("Invalid API key provided", HealthCause.AUTH),
    ("429 Too Many Requests", HealthCause.RATE_LIMITED),
    ("upstream said: 503 Service Unavailable", HealthCause.SERVER_ERROR),
    ("1 validation error for addArguments", HealthCause.BAD_PARAMS),
    ("Invalid timezone: 'Mars/Olympus'", HealthCause.BAD_PARAMS),
    ("this tool always fails", HealthCause.AMBIGUOUS),
])
def test_error_texts_are_classified(text: str, cause: HealthCause) -> None:
    assert classify_text(text) is cause


def test_exceptions_are_classified_through_groups_and_causes() -> None:
    from mcp import MCPError, types

    assert classify(TimeoutError()) is HealthCause.TIMEOUT
    assert classify(ConnectionRefusedError()) is HealthCause.UNREACHABLE
    assert classify(ExceptionGroup("x", [FileNotFoundError("no such command")])) \
        is HealthCause.UNREACHABLE
    assert classify(MCPError(types.INVALID_PARAMS, "bad")) is HealthCause.BAD_PARAMS
    assert classify(MCPError(types.METHOD_NOT_FOUND, "no")) is HealthCause.PROTOCOL_ERROR
    assert classify(MCPError(types.INTERNAL_ERROR, "boom")) is HealthCause.SERVER_ERROR
    assert classify(MCPError(-32050, "something odd")) is HealthCause.AMBIGUOUS
    try:
        try:
            raise ConnectionResetError("reset")
        except ConnectionResetError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as wrapped:
        assert classify(wrapped) is HealthCause.UNREACHABLE
    assert classify(RuntimeError("who knows")) is HealthCause.AMBIGUOUS


def test_the_mode_variable_is_checked() -> None:
    from vancetope_brain.config import Config

    assert Config.from_env({}).show_down_tools is False
    assert Config.from_env({"VANCETOPE_DOWN_TOOLS": "show"}).show_down_tools is True
    with pytest.raises(ConfigError, match="VANCETOPE_DOWN_TOOLS"):
        Config.from_env({"VANCETOPE_DOWN_TOOLS": "maybe"})


# ── an unreachable server ───────────────────────────────────────────────────

def test_an_unreachable_server_is_down_at_once_refused_named_and_probed_back_up(
        service: ToolHealthService, caplog: pytest.LogCaptureFixture) -> None:
    echo = HttpEcho(free_port())
    config = McpServerConfig(name="web", transport="http", url=echo.url, timeout=TIMEOUT)

    def changes(state: str, cause: str) -> float:
        value = REGISTRY.get_sample_value("vancetope_tool_health_changes_total", {
            "server": "web", "state": state, "cause": cause, "source": "checker"})
        return value or 0.0

    went_down, came_up = changes("DOWN", "unreachable"), changes("UP", "")
    with McpRegistry([config]) as registry:
        first = turn(service, registry)
        assert first.manifests() == []  # connect refused: no tools, no wait
        down = record(service, "web")
        assert down is not None and (down.state, down.cause, down.source, down.failures) == (
            HealthState.DOWN, HealthCause.UNREACHABLE, HealthSource.CHECKER, 1)
        assert down.reason.startswith("connect: ") and down.next_probe_at is not None
        assert any("tool health: server 'web'" in r.message and "UP -> DOWN" in r.message
                   and r.levelname == "WARNING" for r in caplog.records)
        assert any("'web', tool -: connect failed after" in r.message for r in caplog.records)
        assert changes("DOWN", "unreachable") == went_down + 1  # operators see it as a metric

        later = turn(service, registry)
        refused = later.invoke("web__echo", {"text": "x"})  # by the record: no connect
        assert refused.status is ToolCallStatus.ERROR and refused.error is not None
        assert "MCP server 'web' is DOWN (unreachable" in refused.error
        assert "client" not in refused.error

        assert probe_now(service, registry) == 1  # still down: the probe backs off
        again = record(service, "web")
        assert again is not None and again.state is HealthState.DOWN and again.failures == 2
        assert again.since == down.since and again.next_probe_at > down.next_probe_at

        echo.start()
        try:
            assert probe_now(service, registry) == 1
            up = record(service, "web")
            assert up is not None and (up.state, up.failures, up.next_probe_at) == (
                HealthState.UP, 0, None)
            assert changes("DOWN", "unreachable") == went_down + 1  # still down: no change
            assert changes("UP", "") == came_up + 1
            back = turn(service, registry)
            assert "web__echo" in {m.name for m in back.manifests()}
            assert back.invoke("web__echo", {"text": "back"}).result == {"result": "back"}
        finally:
            echo.stop()


def test_a_call_that_finds_its_server_gone_marks_it_down(service: ToolHealthService) -> None:
    echo = HttpEcho(free_port())
    echo.start()
    config = McpServerConfig(name="web", transport="http", url=echo.url, timeout=TIMEOUT)
    try:
        with McpRegistry([config]) as registry:
            tools = turn(service, registry)
            assert tools.invoke("web__echo", {"text": "a"}).status is ToolCallStatus.SUCCESS
            echo.stop()
            failed = turn(service, registry).invoke("web__echo", {"text": "b"})  # list cached
            assert failed.status is ToolCallStatus.ERROR and "'web'" in (failed.error or "")
            down = record(service, "web")
            assert down is not None and (down.state, down.cause) == (
                HealthState.DOWN, HealthCause.UNREACHABLE)
            assert down.reason.startswith(("call: ", "connect: "))
    finally:
        echo.stop()


def test_refused_credentials_are_auth_and_never_logged(
        service: ToolHealthService, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="httpx2")  # its line per request names the URL
    token = "tok-" + os.urandom(8).hex()
    echo = HttpEcho(free_port(), {"MCP_ECHO_TOKEN": token})
    echo.start()
    try:
        wrong = McpServerConfig(name="web", transport="http", url=echo.url + "?k=" + token,
                                headers={"Authorization": "Bearer wrong-" + token},
                                timeout=TIMEOUT)
        with McpRegistry([wrong]) as registry:
            assert turn(service, registry).manifests() == []
        down = record(service, "web")
        assert down is not None and (down.state, down.cause) == (
            HealthState.DOWN, HealthCause.AUTH)
        assert "HTTP 401" in down.reason and token not in down.reason
        assert token not in caplog.text
        assert any(r.name == "httpx2" and "/mcp?…" in r.getMessage() for r in caplog.records)
        right = McpServerConfig(name="web", transport="http", url=echo.url,
                                headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)
        with McpRegistry([right]) as registry:
            assert probe_now(service, registry) == 1
            assert record(service, "web").state is HealthState.UP  # type: ignore[union-attr]
    finally:
        echo.stop()


# ── a hanging server ────────────────────────────────────────────────────────

def test_a_hanging_server_costs_one_bounded_wait_until_probed_healthy(
        service: ToolHealthService, tmp_path: Path) -> None:
    mode, log = tmp_path / "mode", tmp_path / "lists.log"
    mode.write_text("hang")
    config = McpServerConfig(name="stuck", transport="stdio", command=sys.executable,
                             args=[SERVER], timeout=TIMEOUT, tools_ttl=0,
                             env={"MCP_ECHO_MODE_FILE": str(mode),
                                  "MCP_ECHO_LIST_LOG": str(log)})
    time_config = McpServerConfig(name="time", transport="stdio", command=sys.executable,
                                  args=["-m", "mcp_server_time"], timeout=30)
    with McpRegistry([config, time_config]) as registry:
        registry.survey(skip=["stuck"])  # the published server is up and listed beforehand
        waits = []
        for _ in range(5):
            started = time.monotonic()
            names = {m.name for m in turn(service, registry).manifests()}
            waits.append(time.monotonic() - started)
            assert "time__get_current_time" in names and not any(
                n.startswith("stuck__") for n in names)
        assert waits[0] >= TIMEOUT and all(w < TIMEOUT for w in waits[1:]), waits
        down = record(service, "stuck")
        assert down is not None and (down.state, down.cause) == (
            HealthState.DOWN, HealthCause.TIMEOUT)
        assert down.reason.startswith("list: TimeoutError")
        refused = turn(service, registry).invoke("stuck__echo", {"text": "x"})
        assert "MCP server 'stuck' is DOWN (timeout" in (refused.error or "")

        mode.write_text("ok")
        assert probe_now(service, registry) == 1
        assert record(service, "stuck").state is HealthState.UP  # type: ignore[union-attr]
        back = turn(service, registry)
        assert back.invoke("stuck__echo", {"text": "healed"}).result == {"result": "healed"}
        now = back.invoke("time__get_current_time", {"timezone": "UTC"})
        assert now.status is ToolCallStatus.SUCCESS and now.result["timezone"] == "UTC"


def test_a_call_past_its_timeout_degrades_its_server_and_only_timeouts_in_a_row_take_it_down(
        service: ToolHealthService) -> None:
    config = McpServerConfig(name="slow", transport="stdio", command=sys.executable,
                             args=[SERVER], timeout=1.0)
    past_timeout = {"seconds": 5.0}

    def offered(tools: ToolDispatcher) -> set[str]:
        return {m.name for m in tools.manifests()}

    with McpRegistry([config]) as registry:
        first = turn(service, registry)
        assert "slow__sleep" in offered(first)
        assert first.invoke("slow__sleep", past_timeout).status is ToolCallStatus.TIMEOUT
        degraded = record(service, "slow")
        assert degraded is not None and (degraded.state, degraded.cause, degraded.failures) == (
            HealthState.DEGRADED, HealthCause.TIMEOUT, 1)

        later = turn(service, registry)  # every tool of the server still offered, and answering
        assert {"slow__echo", "slow__add", "slow__sleep"} <= offered(later)
        assert later.invoke("slow__echo", {"text": "here"}).result == {"result": "here"}
        assert record(service, "slow").state is HealthState.UP  # type: ignore[union-attr]

        for n in range(1, TIMEOUTS_TO_DOWN + 1):  # timeouts in a row, one per turn
            tools = turn(service, registry)
            assert "slow__sleep" in offered(tools)
            assert tools.invoke("slow__sleep", past_timeout).status is ToolCallStatus.TIMEOUT
            now = record(service, "slow")
            assert now is not None and (now.state, now.failures) == (
                HealthState.DEGRADED if n < TIMEOUTS_TO_DOWN else HealthState.DOWN, n)

        gone = turn(service, registry)
        assert not any(name.startswith("slow__") for name in offered(gone))
        refused = gone.invoke("slow__echo", {"text": "x"})
        assert "MCP server 'slow' is DOWN (timeout" in (refused.error or "")


class Lockstep(McpRegistry):
    """One worker process's registry whose ``probe`` returns only once every prober has
    probed: housekeeping runs that overlap (a probe outlasting the beat interval) and so
    read the same due record."""

    def __init__(self, configs: Sequence[McpServerConfig], barrier: threading.Barrier) -> None:
        super().__init__(configs)
        self._barrier = barrier

    def probe(self, server: str) -> tuple[Failure | None, frozenset[str]]:
        found = super().probe(server)
        self._barrier.wait(timeout=60)
        return found


def test_a_recovery_that_overlapping_probes_find_is_logged_and_counted_once(
        service: ToolHealthService, caplog: pytest.LogCaptureFixture) -> None:
    config = McpServerConfig(name="clock", transport="stdio", command=sys.executable,
                             args=["-m", "mcp_server_time"], timeout=30)
    service.write(ToolHealth(tenant_id="acme", project_id="p1", server="clock",
                             state=HealthState.DOWN, cause=HealthCause.UNREACHABLE,
                             reason="connect: refused", next_probe_at=utcnow(), failures=1))

    def came_up() -> float:
        return REGISTRY.get_sample_value("vancetope_tool_health_changes_total", {
            "server": "clock", "state": "UP", "cause": "", "source": "checker"}) or 0.0

    before = came_up()
    barrier = threading.Barrier(2)
    with Lockstep([config], barrier) as one, Lockstep([config], barrier) as other, \
            ThreadPoolExecutor(2) as beats:
        runs = [beats.submit(probe_now, service, registry) for registry in (one, other)]
        assert [run.result(timeout=120) for run in runs] == [1, 1]  # both saw it DOWN

    assert record(service, "clock").state is HealthState.UP  # type: ignore[union-attr]
    assert came_up() == before + 1
    assert [r.getMessage() for r in caplog.records if "DOWN -> UP" in r.getMessage()] == [
        "tool health: server 'clock' (tenant acme, project p1) DOWN -> UP"]


# ── what changes nothing, what goes to the hook ─────────────────────────────

@pytest.fixture(scope="module")
def echo_and_time() -> Iterator[McpRegistry]:
    echo = McpServerConfig(name="echo", transport="stdio", command=sys.executable,
                           args=[SERVER], timeout=TIMEOUT)
    clock = McpServerConfig(name="time", transport="stdio", command=sys.executable,
                            args=["-m", "mcp_server_time"], timeout=30)
    with McpRegistry([echo, clock]) as registry:
        yield registry


def test_bad_parameters_are_the_callers_error_and_change_nothing(
        service: ToolHealthService, echo_and_time: McpRegistry,
        seen: list[AmbiguousToolError]) -> None:
    tools = turn(service, echo_and_time)
    assert tools.invoke("echo__add", {"a": "x", "b": 1}).status is ToolCallStatus.ERROR
    bad_zone = tools.invoke("time__get_current_time", {"timezone": "Mars/Olympus"})
    assert bad_zone.status is ToolCallStatus.ERROR and "Mars/Olympus" in (bad_zone.error or "")
    assert service.store.list_tool_health("acme") == [] and seen == []


def test_an_ambiguous_failure_goes_to_the_hook_with_its_user_and_writes_nothing(
        service: ToolHealthService, echo_and_time: McpRegistry,
        seen: list[AmbiguousToolError]) -> None:
    outcome = turn(service, echo_and_time).invoke("echo__fail", {})
    assert outcome.status is ToolCallStatus.ERROR
    assert [(e.tenant_id, e.project_id, e.user_id, e.process_id, e.server, e.tool, e.step)
            for e in seen] == [("acme", "p1", "ada", "proc_1", "echo", "echo__fail", "call")]
    assert "this tool always fails" in seen[0].error
    assert service.store.list_tool_health("acme") == []


def test_a_failing_hook_does_not_fail_the_call(
        store: Backend, echo_and_time: McpRegistry) -> None:
    def broken(event: AmbiguousToolError) -> None:
        raise RuntimeError("queue is down")

    service = ToolHealthService(store.port(ToolHealthStore), on_ambiguous=broken)
    assert turn(service, echo_and_time).invoke("echo__fail", {}).status is ToolCallStatus.ERROR


# ── verdicts, status display, recovery ──────────────────────────────────────

def _verdict(tool: str | None, state: HealthState = HealthState.DOWN) -> ToolHealth:
    return ToolHealth(tenant_id="acme", project_id="p1", server="echo", tool=tool, state=state,
                      cause=HealthCause.PROBE_VERDICT, reason="probed: answers garbage",
                      source=HealthSource.AGRAJAG,
                      next_probe_at=utcnow() + timedelta(minutes=5))


def test_a_down_tool_verdict_hides_only_that_tool_and_refuses_its_calls(
        service: ToolHealthService, echo_and_time: McpRegistry) -> None:
    service.write(_verdict("echo__add"))
    tools = turn(service, echo_and_time)
    names = {m.name for m in tools.manifests()}
    assert "echo__add" not in names and {"echo__echo", "time__get_current_time"} <= names
    refused = tools.invoke("echo__add", {"a": 1, "b": 2})
    assert "tool 'echo__add' of MCP server 'echo' is DOWN (probe-verdict" in (refused.error or "")
    assert tools.invoke("echo__echo", {"text": "ok"}).status is ToolCallStatus.SUCCESS
    other = ThinkProcess(**{**PROCESS.model_dump(), "project_id": "p2"})
    elsewhere = ToolDispatcher(frozenset({"*"}), sources=[service.source(echo_and_time, other)])
    assert "echo__add" in {m.name for m in elsewhere.manifests()}  # per project


def test_show_mode_offers_down_tools_with_their_status(
        store: Backend, echo_and_time: McpRegistry) -> None:
    service = ToolHealthService(store.port(ToolHealthStore), HealthPolicy(show_down=True))
    service.write(_verdict(None))  # the whole server
    turn(service, echo_and_time)  # nothing listed from a DOWN server
    specs = {s.name: s for s in turn(service, echo_and_time).specs()}
    assert specs["echo__echo"].description.startswith("[UNAVAILABLE: DOWN, probe-verdict")
    refused = turn(service, echo_and_time).invoke("echo__echo", {"text": "x"})
    assert "MCP server 'echo' is DOWN" in (refused.error or "")


def test_a_degraded_tool_is_up_again_after_a_successful_call(
        service: ToolHealthService, echo_and_time: McpRegistry) -> None:
    service.write(_verdict("echo__echo", HealthState.DEGRADED))
    tools = turn(service, echo_and_time)
    assert "echo__echo" in {m.name for m in tools.manifests()}  # DEGRADED is still offered
    assert tools.invoke("echo__echo", {"text": "fine"}).status is ToolCallStatus.SUCCESS
    assert record(service, "echo", "echo__echo").state is HealthState.UP  # type: ignore[union-attr]


def test_the_probe_only_looks_at_due_records(
        service: ToolHealthService, echo_and_time: McpRegistry) -> None:
    service.write(_verdict(None))
    assert service.probe_due(echo_and_time) == 0  # due in five minutes
    assert probe_now(service, echo_and_time) == 1
    assert record(service, "echo").state is HealthState.UP  # type: ignore[union-attr]


def test_no_stdio_command_is_unreachable(service: ToolHealthService) -> None:
    config = McpServerConfig(name="gone", transport="stdio", command="/nonexistent/mcp-server")
    with McpRegistry([config]) as registry:
        assert turn(service, registry).manifests() == []
    down = record(service, "gone")
    assert down is not None and down.cause is HealthCause.UNREACHABLE
    assert os.path.basename("/nonexistent/mcp-server") in down.reason


def test_an_unknown_tool_of_a_healthy_server_is_named_as_such(
        service: ToolHealthService, echo_and_time: McpRegistry) -> None:
    missing = turn(service, echo_and_time).invoke("echo__nope", {})
    assert missing.error == "tool 'echo__nope' is not available: MCP server 'echo' lists no " \
                            "tool 'echo__nope'"


def test_turns_that_list_a_hung_server_at_once_share_one_wait(tmp_path: Path) -> None:
    mode = tmp_path / "mode"
    mode.write_text("hang")
    config = McpServerConfig(name="stuck", transport="stdio", command=sys.executable,
                             args=[SERVER], timeout=TIMEOUT, tools_ttl=0,
                             env={"MCP_ECHO_MODE_FILE": str(mode)})
    with McpRegistry([config]) as registry:
        registry.probe("stuck")  # connected (the handshake answers), listing hangs
        failures: list[object] = []

        def one_turn() -> None:
            failures.extend(s.failure for s in registry.survey())

        threads = [threading.Thread(target=one_turn) for _ in range(4)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
    assert len(failures) == 4 and all(f is not None for f in failures)
    assert TIMEOUT <= elapsed < 2 * TIMEOUT, elapsed  # not four waits one after another
