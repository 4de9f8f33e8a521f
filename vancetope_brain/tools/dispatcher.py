"""The tool dispatcher: one call shape for three transports, results instead of exceptions.

A *source* offers tool manifests and executes calls: server-side tools
(registered with ``@server_tool``), the connected client's tools, MCP servers'
tools. The dispatcher shows an engine only the tools of its effective pool
(names or ``fnmatch`` patterns) whose ``requires_engine_roles`` the engine's
recipe carries; anything else cannot be called. A tool source states a tool's roles in
its manifest: a server tool in ``@server_tool(roles=…)``, an MCP tool in its server's config
(``tools/mcp.py``), a client tool in its registration (``requiresEngineRoles``).

A *probe* (``ToolDispatcher.probe``, and every call while ``probing()``) may reach only
SAFE_PROBE tools: a MUTATING one is refused here, whatever the model or the prompt says
(think-engines §7b: agrajag's probe turn). ``probe`` looks past the pool (a service engine
probes the tool a user's turn failed on, which is in no pool of its own) but never past the
engine's roles.

What a tool raises becomes an ERROR result for the model (a ``ToolError``, a
refused request, bad parameters, its own timeout), except what is not the
tool's failure: signals (``Fenced``: the turn must write nothing), runtime
failures (store, LLM) and Redis errors propagate and end the turn as such.

Every tool declares whether it is *idempotent* (``ToolManifest.idempotent``): whether
calling it again after a crash, with the same arguments, repeats no effect — true of a
SAFE_PROBE, of a tool whose effect is committed with the turn (``process_create``: a turn
that never committed started nothing), and of a tool idempotent by nature. The turn
journal calls an idempotent tool again in a turn's next attempt; any other call is
journaled, and one a crash cut short is never repeated without the user (see
``engines/journal.py``).

A server tool may *prepare* its calls (``server_tool(prepare=…)``): turn the arguments the
model wrote into the call that is announced, journaled, run and written to the chat — e.g.
``inbox_post`` stores an inline file there and the call carries a short reference to it.
A preparation must be idempotent (the same arguments give the same call, and store nothing
twice), because a retried turn prepares its calls again.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

import redis

from vancetope_brain.errors import RuntimeFailure, Signal, ToolError, UserError
from vancetope_brain.llm import ToolSpec
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.observability import metrics, tracing

log = logging.getLogger(__name__)

ToolFn = Callable[..., Any]
Prepare = Callable[[Any, dict[str, Any]], dict[str, Any]]
"""``prepare(context, params)``: the call as it is recorded and run (see the module doc)."""

_NOT_THE_TOOLS = (Signal, RuntimeFailure, redis.RedisError)
"""What a tool source may raise that is the turn's failure, not the tool's."""


class Safety(StrEnum):
    """Whether a tool only looks (SAFE_PROBE) or may change something (MUTATING)."""

    SAFE_PROBE = "SAFE_PROBE"
    MUTATING = "MUTATING"


@dataclass(frozen=True)
class ToolManifest:
    """What a source says about one of its tools. ``idempotent``: a call repeated with the
    same arguments after a crash repeats no effect (a SAFE_PROBE always is)."""

    spec: ToolSpec
    transport: str
    safety: Safety = Safety.MUTATING
    requires_engine_roles: frozenset[str] = frozenset()
    idempotent: bool = False

    def __post_init__(self) -> None:
        if self.safety is Safety.SAFE_PROBE:  # it changes nothing, so repeating it is safe
            object.__setattr__(self, "idempotent", True)

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class ToolOutcome:
    status: ToolCallStatus
    result: Any = None
    error: str | None = None

    @classmethod
    def failed(cls, message: str) -> ToolOutcome:
        return cls(ToolCallStatus.ERROR, error=message)


class ToolSource(Protocol):
    def manifests(self) -> list[ToolManifest]: ...
    def call(self, name: str, params: dict[str, Any]) -> ToolOutcome: ...


@runtime_checkable
class KnowsUnavailable(Protocol):
    """A source that can say why one of its tools is not offered (``health.CheckedMcp``: its
    server is DOWN), so a call to it fails with that reason."""

    def unavailable(self, name: str) -> str | None: ...


class ToolSteps(Protocol):
    """Notes a turn's tool calls (``engines.inspector.TurnSteps``)."""

    def tool(self, started: float, name: str, params: dict[str, Any],
             outcome: ToolOutcome) -> None: ...


class ToolJournal(Protocol):
    """Where a turn records its tool calls (``engines.journal.TurnJournal``): ``run`` makes
    the call; the journal decides whether it runs, or what the turn gets instead."""

    def call(self, manifest: ToolManifest, params: dict[str, Any],
             run: Callable[[], ToolOutcome]) -> ToolOutcome: ...


@dataclass(frozen=True)
class _Registered:
    manifest: ToolManifest
    fn: ToolFn
    prepare: Prepare | None = None


SERVER_TOOLS: dict[str, _Registered] = {}


def user_errors_as_tool_errors(fn: ToolFn) -> ToolFn:
    """For a server tool that calls a service: a request the service refuses (a
    ``UserError``) is the model's to handle, so it becomes a ``ToolError``."""
    @functools.wraps(fn)
    def wrapped(context: Any, **params: Any) -> Any:
        try:
            return fn(context, **params)
        except UserError as e:
            raise ToolError(str(e)) from e
    return wrapped


def server_tool(spec: ToolSpec, *, safety: Safety = Safety.MUTATING, idempotent: bool = False,
                roles: Iterable[str] = (),
                prepare: Prepare | None = None) -> Callable[[ToolFn], ToolFn]:
    """Register a server-side tool; ``fn(context, **params)`` returns a JSON-able result.

    A ``ToolError`` raised by the function becomes an error result with its message.
    ``idempotent``: see ``ToolManifest`` (a SAFE_PROBE is, whatever this says);
    ``prepare``: see the module doc.
    """
    def decorate(fn: ToolFn) -> ToolFn:
        if spec.name in SERVER_TOOLS:
            raise ValueError(f"tool {spec.name!r} registered twice")
        SERVER_TOOLS[spec.name] = _Registered(
            ToolManifest(spec, "server", safety, frozenset(roles), idempotent), fn, prepare)
        return fn
    return decorate


@dataclass
class ServerTools:
    """The registered server-side tools, called with the turn's context."""

    context: Any

    def manifests(self) -> list[ToolManifest]:
        return [r.manifest for r in SERVER_TOOLS.values()]

    def prepare(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        prepare = SERVER_TOOLS[name].prepare
        return params if prepare is None else prepare(self.context, params)

    def call(self, name: str, params: dict[str, Any]) -> ToolOutcome:
        try:
            return ToolOutcome(ToolCallStatus.SUCCESS, SERVER_TOOLS[name].fn(self.context, **params))
        except ToolError as e:
            return ToolOutcome.failed(str(e))
        except TypeError as e:
            return ToolOutcome.failed(f"bad parameters for {name}: {e}")


@dataclass
class ToolDispatcher:
    """Invokes tools of one engine's effective pool on behalf of one turn. Each source is
    asked for its tools once per turn (a tool registered meanwhile shows next turn); with a
    ``journal``, every call goes through it."""

    pool: frozenset[str]
    roles: frozenset[str] = frozenset()
    sources: list[ToolSource] = field(default_factory=list)
    journal: ToolJournal | None = None
    steps: ToolSteps | None = None
    """Where each call made through ``invoke`` or ``probe`` is noted for the turn's
    inspector record (``engines.inspector.TurnSteps``)."""
    probe_only: bool = False
    """While set (``probing``), a MUTATING tool is neither offered nor callable."""
    _lists: dict[int, list[ToolManifest]] = field(default_factory=dict, init=False, repr=False)

    def manifests(self) -> list[ToolManifest]:
        """What this engine may see and call, by name; earlier sources win a name clash."""
        seen: dict[str, ToolManifest] = {}
        for source in self.sources:
            for manifest in self._listed(source):
                if manifest.name not in seen and self._visible(manifest):
                    seen[manifest.name] = manifest
        return [seen[name] for name in sorted(seen)]

    def specs(self) -> list[ToolSpec]:
        """What the model is offered (only SAFE_PROBE tools while ``probing``)."""
        return [m.spec for m in self.manifests()
                if not self.probe_only or m.safety is Safety.SAFE_PROBE]

    @contextmanager
    def probing(self) -> Iterator[None]:
        """A probe turn: inside, only SAFE_PROBE tools are offered and callable."""
        before, self.probe_only = self.probe_only, True
        try:
            yield
        finally:
            self.probe_only = before

    def probes(self, *, transports: frozenset[str] | None = None) -> list[ToolManifest]:
        """The SAFE_PROBE tools this engine's roles let it probe, in or out of its pool
        (of the given transports, else all)."""
        seen: dict[str, ToolManifest] = {}
        for source in self.sources:
            for m in self._listed(source):
                if m.safety is Safety.SAFE_PROBE and m.requires_engine_roles <= self.roles \
                        and (transports is None or m.transport in transports):
                    seen.setdefault(m.name, m)
        return [seen[name] for name in sorted(seen)]

    def probe(self, name: str, params: dict[str, Any], *,
              transports: frozenset[str] | None = None) -> ToolOutcome:
        started = time.monotonic()
        outcome = self._probe(name, params, transports)
        if self.steps is not None:
            self.steps.tool(started, name, params, outcome)
        return outcome

    def _probe(self, name: str, params: dict[str, Any],
               transports: frozenset[str] | None) -> ToolOutcome:
        """Call ``name`` as a probe: any tool this engine's roles let it see (of the given
        transports), in its pool or not, but only a SAFE_PROBE one; a MUTATING tool is
        refused without being called."""
        for source in self.sources:
            manifest = next((m for m in self._listed(source) if m.name == name
                             and (transports is None or m.transport in transports)), None)
            if manifest is None or not manifest.requires_engine_roles <= self.roles:
                continue
            if manifest.safety is not Safety.SAFE_PROBE:
                return _refused_mutating(name)
            run = functools.partial(_call, source, manifest, params)
            return run() if self.journal is None else self.journal.call(manifest, params, run)
        return ToolOutcome.failed(f"tool {name!r} cannot be probed: no tool source offers it "
                                  "to this engine")

    def prepare(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """The call of ``name`` as it is announced, journaled and run: what the tool that
        ``invoke`` would call makes of ``params`` (see the module doc); ``params`` as they
        are for any other tool."""
        for source in self.sources:
            manifest = next((m for m in self._listed(source) if m.name == name), None)
            if manifest is not None:
                if isinstance(source, ServerTools) and self._visible(manifest):
                    return source.prepare(name, params)
                break
        return params

    def invoke(self, name: str, params: dict[str, Any]) -> ToolOutcome:
        """Call ``name`` with ``params`` for the engine (through the journal, if any)."""
        started = time.monotonic()
        outcome = self._invoke(name, params)
        if self.steps is not None:
            self.steps.tool(started, name, params, outcome)
        return outcome

    def _invoke(self, name: str, params: dict[str, Any]) -> ToolOutcome:
        for source in self.sources:
            manifest = next((m for m in self._listed(source) if m.name == name), None)
            if manifest is None:
                continue
            if self.probe_only and manifest.safety is not Safety.SAFE_PROBE:
                return _refused_mutating(name)
            if not self._visible(manifest):
                missing = manifest.requires_engine_roles - self.roles
                if missing and self._pooled(name):  # in the pool, but not for this engine
                    return ToolOutcome.failed(
                        f"tool {name!r} needs the engine role(s) {', '.join(sorted(missing))}, "
                        "which this process's recipe does not grant")
                break
            run = functools.partial(_call, source, manifest, params)
            return run() if self.journal is None else self.journal.call(manifest, params, run)
        if not self._pooled(name):
            return ToolOutcome.failed(f"tool {name!r} is not in this process's tool pool")
        for source in self.sources:
            reason = source.unavailable(name) if isinstance(source, KnowsUnavailable) else None
            if reason is not None:
                return ToolOutcome.failed(f"tool {name!r} is not available: {reason}")
        return ToolOutcome.failed(
            f"tool {name!r} is not available: no server tool, connected client or MCP server "
            "offers it (a client-side tool needs the user's client to be connected)")

    def _visible(self, manifest: ToolManifest) -> bool:
        return manifest.requires_engine_roles <= self.roles and self._pooled(manifest.name)

    def _pooled(self, name: str) -> bool:
        return _pool_pattern(self.pool).match(name) is not None

    def _listed(self, source: ToolSource) -> list[ToolManifest]:
        listed = self._lists.get(id(source))
        if listed is None:
            try:
                listed = source.manifests()
            except _NOT_THE_TOOLS:
                raise
            except Exception:
                log.exception("a tool source failed to list its tools")
                listed = []
            self._lists[id(source)] = listed
        return listed


@functools.lru_cache(maxsize=1024)
def _pool_pattern(pool: frozenset[str]) -> re.Pattern[str]:
    """One regex for a pool's names and ``fnmatch`` patterns (``fnmatchcase`` per pattern and
    name was a fifth of a turn's tool listing)."""
    return re.compile("|".join(fnmatch.translate(p) for p in sorted(pool)) or "(?!)")


def _refused_mutating(name: str) -> ToolOutcome:
    return ToolOutcome.failed(f"tool {name!r} is MUTATING and was not called: a probe may call "
                              "only SAFE_PROBE tools (ones that change nothing)")


def _call(source: ToolSource, manifest: ToolManifest, params: dict[str, Any]) -> ToolOutcome:
    """Call one tool; an error is logged with the tool, its transport and the seconds it took
    (an MCP source logs its own, with the server and the step)."""
    name, started = manifest.name, time.monotonic()
    with tracing.span(f"tool {name}", tool=name, transport=manifest.transport):
        try:
            outcome = source.call(name, params)
        except _NOT_THE_TOOLS:
            raise
        except Exception as e:  # a tool's failure is the model's business, not the turn's
            log.exception("tool %s (%s): call failed after %.2f s", name, manifest.transport,
                          time.monotonic() - started)
            outcome = ToolOutcome.failed(f"{type(e).__name__}: {e}")
    if outcome.status is not ToolCallStatus.SUCCESS and manifest.transport != "mcp":
        log.info("tool %s (%s): call ended %s after %.2f s", name, manifest.transport,
                 outcome.status.value, time.monotonic() - started)
    metrics.tool_called(name, manifest.transport, outcome.status.value)
    return outcome
