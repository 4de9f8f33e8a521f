"""MCP tools: configured MCP servers reached through the official ``mcp`` SDK (v2).

Tools are offered to the model as ``<server>__<tool>`` (two underscores; a server
name never contains two in a row nor ends with one, so the first ``__`` splits).
A prefixed name that is no valid OpenAI function name (``^[a-zA-Z0-9_-]{1,64}$``)
has its other characters replaced by ``_`` and, when too long, is cut and ends in
a short hash of the tool name; the registry maps it back.

Connection strategy: one long-lived session per server per OS process, owned by
a private event loop thread and shared by every worker thread (MCP multiplexes
requests by id). A fresh session per call costs ~850 ms for a Python stdio
server (process start and imports) and ~45 ms over HTTP; a shared session costs
~5 ms per call for either. A session that breaks is dropped and reopened on the
next use, and one whose transport has closed (a killed stdio server) is reopened
before it is used; a timed-out call keeps it (the SDK cancels the request on the server).

Every failure is classified (``health.classify``) and logged with the server, the
tool, the step (connect / list / call) and how long it took; ``survey`` and
``attempt`` return it to the caller (``health.CheckedMcp``, which records it). A
failed listing is not cached: what keeps turns from waiting on a broken server is its
DOWN record in ``tool_health``, which ``survey(skip=…)`` honours.
After ``fork`` (Celery prefork) the child starts its own loop and sessions and
never touches the parent's.

A stdio server's environment is ``HOME LOGNAME PATH SHELL TERM USER`` of the
worker (the SDK's safe default) plus the configured ``env``; nothing else is
inherited, so secrets reach a server only when named, e.g. ``TOKEN: ${TOKEN}``
(``${NAME}`` in ``env`` and ``headers`` values is read from the environment at
load; unset is a ``ConfigError``). Its stderr goes to the worker's stderr.

Engine roles (think-engines §7b): ``requires_engine_roles`` of a server applies to each of
its tools, ``tool_roles`` (the server's tool name → roles) adds roles for single tools; an
engine whose recipe lacks one of a tool's roles neither sees nor can call it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import yaml
from anyio.abc import TaskGroup, TaskStatus
from anyio.from_thread import BlockingPortal
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from vancetope_brain.errors import ConfigError
from vancetope_brain.llm import ToolSpec
from vancetope_brain.models.recipe import Role
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.models.tool_health import HealthCause
from vancetope_brain.observability.logs import scrub
from vancetope_brain.tools import dispatcher  # the module, not its names: it may import this one
from vancetope_brain.tools.health import (
    Failure,
    Step,
    classify,
    classify_text,
    status_cause,
)

if TYPE_CHECKING:
    from mcp import ClientSession, types

log = logging.getLogger(__name__)

SEPARATOR = "__"
"""Between the server name and the tool name in the name the model sees."""

PING_AFTER_IDLE = 10.0
"""Seconds after which a session is pinged before use; one that fails is replaced."""

_INHERITED: list[_Loop] = []

_FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpServerConfig(BaseModel):
    """One MCP server: how to reach it, how long to wait, how long to trust its tool list."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(max_length=32, pattern=r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")
    """The tool-name prefix: lowercase letters, digits, single ``-`` or ``_`` between them."""
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=30.0, gt=0)
    """Seconds one request (a call, a tool list, a ping) may take."""
    connect_timeout: float = Field(default=30.0, gt=0)
    """Seconds connecting (spawn and handshake) may take; a Python stdio server needs 1-2 s of
    CPU for its imports, several seconds of wall time on a loaded worker."""
    tools_ttl: float = Field(default=300.0, ge=0)
    """Seconds the server's tool list is cached."""
    requires_engine_roles: list[Role] = Field(default_factory=list, max_length=20)
    """Engine roles an engine needs to see any tool of this server."""
    tool_roles: dict[str, list[Role]] = Field(default_factory=dict, max_length=500)
    """More roles for single tools, by the server's own tool name (not the prefixed one)."""

    def roles_of(self, tool: str) -> frozenset[str]:
        """The engine roles the server's tool ``tool`` requires."""
        return frozenset(self.requires_engine_roles) | frozenset(self.tool_roles.get(tool, ()))

    @field_validator("env", "headers")
    @classmethod
    def _expand(cls, values: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        environ = (info.context or {}).get("environ", os.environ)

        def value_of(match: re.Match[str]) -> str:
            if match[1] not in environ:
                raise ValueError(f"${{{match[1]}}} is not set in the environment")
            return environ[match[1]]

        return {k: _PLACEHOLDER.sub(value_of, v) for k, v in values.items()}

    @model_validator(mode="after")
    def _fits_transport(self) -> McpServerConfig:
        if self.transport == "stdio":
            if not self.command:
                raise ValueError("command: required for transport 'stdio'")
            if self.url is not None or self.headers:
                raise ValueError("url/headers: only for transport 'http'")
        else:
            if not self.url:
                raise ValueError("url: required for transport 'http'")
            if self.command is not None or self.args or self.env or self.cwd is not None:
                raise ValueError("command/args/env/cwd: only for transport 'stdio'")
        return self


_CONFIG_LIST = TypeAdapter(list[McpServerConfig])


def load_mcp_servers(path: Path, environ: Mapping[str, str] | None = None) -> list[McpServerConfig]:
    """Read a YAML or JSON file holding a list of server configs.

    Raises ``ConfigError`` naming the file and, for a bad entry, its index and field.
    """
    where = f"MCP servers file {path} (VANCETOPE_MCP_SERVERS)"
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise ConfigError(f"{where}: cannot read it: {e}") from e
    if not isinstance(data, list):
        raise ConfigError(f"{where}: must hold a list of servers, not {type(data).__name__}")
    try:
        configs = _CONFIG_LIST.validate_python(
            data, context={"environ": os.environ if environ is None else environ})
    except ValidationError as e:
        first = e.errors()[0]
        index, *fields = first["loc"]
        entry = data[index] if isinstance(index, int) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        field_name = ".".join(map(str, fields)) or "entry"
        raise ConfigError(f"{where}: server [{index}] ({name!r}) {field_name}: {first['msg']}") from e
    _check_unique(configs, where)
    return configs


def _check_unique(configs: Iterable[McpServerConfig], where: str) -> None:
    seen: set[str] = set()
    for config in configs:
        if config.name in seen:
            raise ConfigError(f"{where}: server name {config.name!r} is used twice")
        seen.add(config.name)


class McpRegistry:
    """The tools of the configured MCP servers, with one call shape: ``call(name, params)``.

    Thread-safe; ``tools`` and ``call`` never raise for server or tool failures.
    ``close`` ends every session (a later use opens them again).
    """

    def __init__(self, configs: Sequence[McpServerConfig]) -> None:
        _check_unique(configs, "McpRegistry")
        self._configs = {c.name: c for c in configs}
        self._guard = threading.Lock()
        self._loop: _Loop | None = None

    @classmethod
    def from_file(cls, path: Path | None) -> McpRegistry:
        """The registry of ``Config.mcp_servers_file``; no file means no servers."""
        return cls(load_mcp_servers(path) if path is not None else [])

    @property
    def servers(self) -> list[str]:
        return list(self._configs)

    def owns(self, name: str) -> bool:
        """True when ``name`` carries the prefix of a configured server (it may still not exist)."""
        server, sep, _ = name.partition(SEPARATOR)
        return bool(sep) and server in self._configs

    def tools(self) -> list[ToolSpec]:
        """Every reachable server's tools, prefixed; lists older than a server's TTL are refreshed."""
        return [m.spec for m in self.manifests()]

    def manifests(self) -> list[dispatcher.ToolManifest]:
        """``tools()`` as dispatcher manifests (see ``_manifests``)."""
        return [m for survey in self.survey() for m in survey.manifests]

    def survey(self, skip: Iterable[str] = ()) -> list[Survey]:
        """Each configured server but those in ``skip``, listed (from cache within its TTL)
        side by side: its manifests, or why it has none. Waits at most for the slowest
        server's bounds (``connect_timeout`` + ``timeout``)."""
        wanted = [name for name in self._configs if name not in set(skip)]
        if not wanted:
            return []
        try:
            loop = self._running()
            return loop.portal.call(loop.list_all, wanted)
        except Exception:
            log.exception("listing MCP tools failed")
            return []

    def known_manifests(self, server: str) -> list[dispatcher.ToolManifest]:
        """The manifests of the last listing this process got from ``server`` (none if never)."""
        loop = self._loop
        if loop is None or loop.pid != os.getpid() or server not in loop.servers:
            return []
        cached = loop.servers[server].cached
        return [] if cached is None else _manifests(cached)

    def probe(self, server: str) -> tuple[Failure | None, frozenset[str]]:
        """Connect to ``server`` if need be and list its tools now, whatever the cache: the
        failure (None when it answered) and the names it lists."""
        try:
            loop = self._running()
            listing, failure = loop.portal.call(loop.servers[server].probe, loop.tg)
        except Exception as e:
            log.exception("probing MCP server %r failed", server)
            return Failure(server, None, "list", classify(e), _describe(e), 0.0), frozenset()
        return failure, frozenset(listing.names) if listing is not None else frozenset()

    def call(self, name: str, params: Mapping[str, Any]) -> dispatcher.ToolOutcome:
        """Call the tool the model knows as ``name``; SUCCESS, ERROR or TIMEOUT, never an exception."""
        return self.attempt(name, params)[0]

    def attempt(self, name: str, params: Mapping[str, Any]
                ) -> tuple[dispatcher.ToolOutcome, Failure | None]:
        """``call``, and the classified failure when the server or the tool failed (None when
        it succeeded, or the name is unknown)."""
        if not self.owns(name):
            return _error(f"{name!r} is not a tool of a configured MCP server"), None
        server = name.partition(SEPARATOR)[0]
        try:
            loop = self._running()
            return loop.portal.call(loop.servers[server].call, name, dict(params), loop.tg)
        except Exception as e:
            log.exception("MCP call %s failed", name)
            return (_error(f"MCP server {server!r}, tool {name!r}: {_describe(e)}"),
                    Failure(server, name, "call", classify(e), _describe(e), 0.0))

    def close(self) -> None:
        with self._guard:
            loop, self._loop = self._loop, None
        if loop is not None and loop.pid == os.getpid():
            loop.close()

    def __enter__(self) -> McpRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _running(self) -> _Loop:
        loop = self._loop
        if loop is not None and loop.pid == os.getpid():
            return loop
        with self._guard:
            if self._loop is not None and self._loop.pid != os.getpid():
                # Forked: the loop's thread is gone. Keep its objects from being collected,
                # whose finalizers would act on the parent's sessions, and start afresh.
                _INHERITED.append(self._loop)
                self._loop = None
            if self._loop is None:
                self._loop = _Loop(self._configs.values())
            return self._loop


class _Loop:
    """The registry's event loop thread and everything that lives in it."""

    def __init__(self, configs: Iterable[McpServerConfig]) -> None:
        # The SDK is imported here, in the caller's thread, so the loop thread never waits on
        # an import lock a caller in the middle of an import might hold (and start-up stays fast
        # where no MCP server is configured).
        import httpx2  # noqa: F401
        import mcp.client.streamable_http  # noqa: F401

        self.pid = os.getpid()
        ready: Future[BlockingPortal] = Future()
        self._thread = threading.Thread(target=_run_portal, args=(ready,),
                                        name="vancetope-mcp", daemon=True)
        self._thread.start()
        self.portal = ready.result()
        # Built in the loop thread: anyio primitives belong to the loop that uses them.
        self.servers = self.portal.call(lambda: {c.name: _Server(c) for c in configs})
        self._supervisor, (self.tg, self._stopping) = self.portal.start_task(_supervise)

    async def list_all(self, names: list[str]) -> list[Survey]:
        found: dict[str, Survey] = {}

        async def one(server: _Server) -> None:
            cached = server.cached
            listing, failure = await server.listing(self.tg)
            found[server.config.name] = Survey(
                server.config.name, _manifests(listing) if listing is not None else [], failure,
                answered=listing is not None and listing is not cached)

        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(one, self.servers[name])
        return [found[name] for name in names]

    def close(self) -> None:
        try:
            self.portal.call(self._aclose)
        finally:
            self.portal.call(self.portal.stop)
            self._thread.join()

    async def _aclose(self) -> None:
        for server in self.servers.values():
            server.drop()
        with anyio.move_on_after(10):
            for server in self.servers.values():
                for done in list(server.runners):
                    await done.wait()
        self._stopping.set()


def _run_portal(ready: Future[BlockingPortal]) -> None:
    """The loop thread. Not ``start_blocking_portal``: its generator, collected in a forked
    child, would wait forever on the parent's loop thread."""

    async def serve() -> None:
        async with BlockingPortal() as portal:
            ready.set_result(portal)
            await portal.sleep_until_stopped()

    try:
        anyio.run(serve)
    except BaseException as e:
        if not ready.done():
            ready.set_exception(e)
        raise


async def _supervise(*, task_status: TaskStatus[tuple[TaskGroup, anyio.Event]]) -> None:
    """Hosts the session tasks until the loop closes."""
    stopping = anyio.Event()
    async with anyio.create_task_group() as tg:
        task_status.started((tg, stopping))
        await stopping.wait()
        tg.cancel_scope.cancel()


@dataclass(frozen=True)
class Survey:
    """One server's part of a listing: its manifests, or the failure that left it without;
    ``answered``: the server listed them during this survey (not from the cache)."""

    server: str
    manifests: list[dispatcher.ToolManifest]
    failure: Failure | None = None
    answered: bool = False


@dataclass
class _Listing:
    specs: list[ToolSpec]
    names: dict[str, str]  # prefixed name -> the server's tool name
    expires: float
    read_only: frozenset[str] = frozenset()  # prefixed names the server marks readOnlyHint
    idempotent: frozenset[str] = frozenset()  # … and idempotentHint
    roles: dict[str, frozenset[str]] = field(default_factory=dict)  # prefixed name -> roles


@dataclass
class _Server:
    """One configured server, as seen from the loop thread (so no thread locks here)."""

    config: McpServerConfig
    cached: _Listing | None = None
    runners: set[anyio.Event] = field(default_factory=set)  # one per session task, set when done
    _session: ClientSession | None = None
    _closing: anyio.Event | None = None
    _used: float = 0.0
    _error_status: tuple[int, float] | None = None  # the last HTTP error status, and when
    _list_failed: tuple[float, Failure] | None = None  # when the last listing failed, and how
    _connect_lock: anyio.Lock = field(default_factory=anyio.Lock)
    _list_lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def listing(self, tg: TaskGroup) -> tuple[_Listing | None, Failure | None]:
        """The tool list, from cache within the TTL; or the failure (logged, not cached —
        but callers that queued behind the failed attempt share it rather than each waiting
        for one of their own)."""
        asked = time.monotonic()
        async with self._list_lock:
            if self.cached is not None and time.monotonic() < self.cached.expires:
                return self.cached, None
            if self._list_failed is not None and self._list_failed[0] >= asked:
                return None, self._list_failed[1]
            return await self._list(tg)

    async def probe(self, tg: TaskGroup) -> tuple[_Listing | None, Failure | None]:
        """List now, whatever the cache."""
        async with self._list_lock:
            return await self._list(tg)

    async def _list(self, tg: TaskGroup) -> tuple[_Listing | None, Failure | None]:
        cfg, started = self.config, time.monotonic()
        step: Step = "connect"
        try:
            session = await self._open(tg)
            step = "list"
            with anyio.fail_after(cfg.timeout):
                tools = await _list_tools(session)
        except Exception as e:
            self._after_failure(e)
            failure = self._failed(step, None, e, started)
            self._list_failed = (time.monotonic(), failure)
            return None, failure
        self.cached = _listing_of(cfg, tools, time.monotonic() + cfg.tools_ttl)
        self._list_failed = None
        return self.cached, None

    async def call(self, name: str, params: dict[str, Any], tg: TaskGroup
                   ) -> tuple[dispatcher.ToolOutcome, Failure | None]:
        where = f"MCP server {self.config.name!r}, tool {name!r}"
        known = self.cached
        if known is None or (name not in known.names and time.monotonic() >= known.expires):
            known, failure = await self.listing(tg)
            if failure is not None:
                return _error(f"{where}: server unavailable: {failure.step}: "
                              f"{failure.summary}"), failure
        assert known is not None
        if name not in known.names:
            return _error(f"{where}: no such tool on this server"), None
        started = time.monotonic()
        step: Step = "connect"
        try:
            session = await self._open(tg)
            step = "call"
            with anyio.fail_after(self.config.timeout):
                result = await session.call_tool(known.names[name], params)
        except TimeoutError as e:
            failure = self._failed(step, name, e, started)
            if step == "connect":
                return _timeout(f"{where}: connecting timed out after "
                                f"{self.config.connect_timeout:g} s"), failure
            return _timeout(f"{where}: timed out after {self.config.timeout:g} s"), failure
        except Exception as e:
            self._after_failure(e)
            return _error(f"{where}: {_describe(e)}"), self._failed(step, name, e, started)
        outcome = _outcome(result, where)
        if not result.is_error:
            return outcome, None
        text = "\n".join(_text_of(block) for block in result.content) or "isError without text"
        seconds = time.monotonic() - started
        failure = Failure(self.config.name, name, "call", classify_text(text), scrub(text),
                          seconds, answered=True)
        log.info("MCP server %r, tool %s: call answered isError after %.2f s (%s)",
                 self.config.name, name, seconds, failure.cause)
        return outcome, failure

    def _saw_status(self, status: int) -> None:
        self._error_status = (status, time.monotonic())

    def _failed(self, step: Step, tool: str | None, e: Exception, started: float) -> Failure:
        seconds = time.monotonic() - started
        cause = classify(e)
        summary = scrub(_describe(e))
        if self._error_status is not None and self._error_status[1] >= started and cause in (
                HealthCause.SERVER_ERROR, HealthCause.PROTOCOL_ERROR, HealthCause.AMBIGUOUS):
            cause = status_cause(self._error_status[0])  # what the SDK's message hides
            summary = f"{summary} (HTTP {self._error_status[0]})"
        failure = Failure(self.config.name, tool, step, cause, summary, seconds)
        log.warning("MCP server %r, tool %s: %s failed after %.2f s (%s): %s", self.config.name,
                    tool or "-", step, seconds, failure.cause, failure.summary)
        return failure

    def drop(self) -> None:
        """Forget the session; its task closes it (a later use opens a new one)."""
        if self._closing is not None:
            self._closing.set()
        self._session = self._closing = None

    def _after_failure(self, e: Exception) -> None:
        """Keep the session after a timeout (the SDK cancels the request on the server) or an
        invalid-params answer; anything else may have broken it, so the next use reconnects."""
        from mcp import MCPError, types

        if not isinstance(e, TimeoutError) and not (
                isinstance(e, MCPError) and e.code == types.INVALID_PARAMS):
            self.drop()

    async def _open(self, tg: TaskGroup) -> ClientSession:
        async with self._connect_lock:
            if self._session is not None and _transport_closed(self._session):
                log.info("MCP server %r: its connection has closed, reconnecting",
                         self.config.name)
                self.drop()
            if self._session is not None and time.monotonic() - self._used > PING_AFTER_IDLE:
                # A stdio server may have died, an HTTP server may have expired the session.
                try:
                    with anyio.fail_after(self.config.timeout):
                        await self._session.send_ping()
                except Exception as e:
                    log.info("MCP server %r: idle session is gone (%s), reconnecting",
                             self.config.name, _describe(e))
                    self.drop()
            if self._session is None:
                with anyio.fail_after(self.config.connect_timeout):
                    self._session = await tg.start(self._hold)
            self._used = time.monotonic()
            return self._session

    async def _hold(self, *, task_status: TaskStatus[ClientSession]) -> None:
        """Opens the session and holds it open (anyio context managers close in the task
        that opened them) until ``drop``."""
        from mcp import ClientSession

        closing = self._closing = anyio.Event()
        done = anyio.Event()
        self.runners.add(done)
        started = False
        try:
            async with AsyncExitStack() as stack:
                read, write = await _transport(self.config, stack, self._saw_status)
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                task_status.started(session)
                started = True
                await closing.wait()
        except Exception as e:
            if not started:
                raise
            log.warning("MCP server %r: session ended with %s", self.config.name, _describe(e))
        finally:
            if self._closing is closing:
                self._session = self._closing = None
            self.runners.discard(done)
            done.set()


async def _transport(config: McpServerConfig, stack: AsyncExitStack,
                     on_error_status: Callable[[int], None]) -> tuple[Any, Any]:
    """The streams of a new connection; over HTTP, every error status is reported to
    ``on_error_status`` (the SDK turns a 401 or a 503 into the same "error response")."""
    if config.transport == "stdio":
        from mcp import StdioServerParameters, stdio_client

        assert config.command is not None
        params = StdioServerParameters(command=config.command, args=config.args,
                                       env=config.env or None, cwd=config.cwd)
        # Celery replaces sys.stderr by a proxy without a file descriptor; the server's stderr
        # goes to the worker process's own.
        errlog = sys.stderr
        if not _has_fileno(errlog) and sys.__stderr__ is not None:
            errlog = sys.__stderr__
        return await stack.enter_async_context(stdio_client(params, errlog=errlog))
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    assert config.url is not None
    async def status(response: Any) -> None:
        if response.status_code >= 400:
            on_error_status(response.status_code)

    http = await stack.enter_async_context(httpx2.AsyncClient(
        headers=config.headers, timeout=httpx2.Timeout(config.timeout, read=300.0),
        event_hooks={"response": [status]}))
    return await stack.enter_async_context(streamable_http_client(config.url, http_client=http))


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    from mcp import types

    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever cannot hang us
        page = await session.list_tools(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _listing_of(config: McpServerConfig, tools: Iterable[types.Tool],
                expires: float) -> _Listing:
    server = config.name
    specs: list[ToolSpec] = []
    names: dict[str, str] = {}
    read_only: set[str] = set()
    idempotent: set[str] = set()
    roles: dict[str, frozenset[str]] = {}
    for tool in tools:
        name = prefixed_name(server, tool.name)
        if name in names:
            log.warning("MCP server %r: tools %r and %r both map to %r; %r is left out",
                        server, names[name], tool.name, name, tool.name)
            continue
        names[name] = tool.name
        if required := config.roles_of(tool.name):
            roles[name] = required
        specs.append(ToolSpec(name, tool.description or tool.title or "", dict(tool.input_schema)))
        if tool.annotations is not None and tool.annotations.read_only_hint:
            read_only.add(name)
        if tool.annotations is not None and tool.annotations.idempotent_hint:
            idempotent.add(name)
    return _Listing(specs, names, expires, read_only=frozenset(read_only),
                    idempotent=frozenset(idempotent), roles=roles)


def _manifests(listing: _Listing) -> list[dispatcher.ToolManifest]:
    """Dispatcher manifests: transport ``mcp``, SAFE_PROBE for the tools the server marks
    ``readOnlyHint``, else MUTATING; idempotent for those and the ones it marks
    ``idempotentHint`` (hints from the server, not guarantees), else not; the engine roles of
    the server's config (``McpServerConfig.roles_of``)."""
    return [dispatcher.ToolManifest(spec, "mcp", dispatcher.Safety.SAFE_PROBE
                                    if spec.name in listing.read_only
                                    else dispatcher.Safety.MUTATING,
                                    requires_engine_roles=listing.roles.get(
                                        spec.name, frozenset()),
                                    idempotent=spec.name in listing.idempotent)
            for spec in listing.specs]


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def _transport_closed(session: ClientSession) -> bool:
    """Whether the session's transport has closed (a stdio server that exited, a dropped
    HTTP stream). The SDK's dispatcher sets ``_closed`` at EOF and then refuses every send
    with CONNECTION_CLOSED before writing it, so such a session is dropped unused rather
    than failing the next call (tests/tools/test_mcp.py kills a server to hold this)."""
    return bool(getattr(getattr(session, "_dispatcher", None), "_closed", False))


def prefixed_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``, a valid OpenAI function name."""
    name = f"{server}{SEPARATOR}{tool}"
    if _FUNCTION_NAME.match(name):
        return name
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", name)
    if len(name) > 64:
        name = f"{name[:55]}_{hashlib.sha1(tool.encode()).hexdigest()[:8]}"
    return name


def _outcome(result: types.CallToolResult, where: str) -> dispatcher.ToolOutcome:
    """SUCCESS carries the structured content when the tool gave some, else its text."""
    text = "\n".join(_text_of(block) for block in result.content)
    if result.is_error:
        return _error(f"{where}: {text or 'the tool reported an error'}")
    if result.structured_content is not None:
        return dispatcher.ToolOutcome(ToolCallStatus.SUCCESS, result.structured_content)
    return dispatcher.ToolOutcome(ToolCallStatus.SUCCESS, text)


def _text_of(block: Any) -> str:
    if block.type == "text":
        return str(block.text)
    resource = getattr(block, "resource", None)
    if resource is not None and getattr(resource, "text", None) is not None:
        return str(resource.text)
    label = getattr(block, "mime_type", None) or getattr(block, "uri", None)
    return f"[{block.type} {label}]" if label else f"[{block.type}]"


def _describe(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _error(message: str) -> dispatcher.ToolOutcome:
    return dispatcher.ToolOutcome(ToolCallStatus.ERROR, error=message)


def _timeout(message: str) -> dispatcher.ToolOutcome:
    return dispatcher.ToolOutcome(ToolCallStatus.TIMEOUT, error=message)
