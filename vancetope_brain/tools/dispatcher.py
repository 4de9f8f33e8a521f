"""The tool dispatcher: one call shape for three transports, results instead of exceptions.

A *source* offers tool manifests and executes calls: server-side tools
(registered with ``@server_tool``), the connected client's tools, MCP servers'
tools. The dispatcher shows an engine only the tools of its effective pool
(names or ``fnmatch`` patterns) whose ``requires_engine_roles`` the engine's
recipe carries; anything else cannot be called.

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
"""

from __future__ import annotations

import fnmatch
import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import redis

from vancetope_brain.errors import RuntimeFailure, Signal, ToolError
from vancetope_brain.llm import ToolSpec
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.observability import metrics, tracing

log = logging.getLogger(__name__)

ToolFn = Callable[..., Any]

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


class ToolJournal(Protocol):
    """Where a turn records its tool calls (``engines.journal.TurnJournal``): ``run`` makes
    the call; the journal decides whether it runs, or what the turn gets instead."""

    def call(self, manifest: ToolManifest, params: dict[str, Any],
             run: Callable[[], ToolOutcome]) -> ToolOutcome: ...


@dataclass(frozen=True)
class _Registered:
    manifest: ToolManifest
    fn: ToolFn


SERVER_TOOLS: dict[str, _Registered] = {}


def server_tool(spec: ToolSpec, *, safety: Safety = Safety.MUTATING, idempotent: bool = False,
                roles: Iterable[str] = ()) -> Callable[[ToolFn], ToolFn]:
    """Register a server-side tool; ``fn(context, **params)`` returns a JSON-able result.

    A ``ToolError`` raised by the function becomes an error result with its message.
    ``idempotent``: see ``ToolManifest`` (a SAFE_PROBE is, whatever this says).
    """
    def decorate(fn: ToolFn) -> ToolFn:
        if spec.name in SERVER_TOOLS:
            raise ValueError(f"tool {spec.name!r} registered twice")
        SERVER_TOOLS[spec.name] = _Registered(
            ToolManifest(spec, "server", safety, frozenset(roles), idempotent), fn)
        return fn
    return decorate


@dataclass
class ServerTools:
    """The registered server-side tools, called with the turn's context."""

    context: Any

    def manifests(self) -> list[ToolManifest]:
        return [r.manifest for r in SERVER_TOOLS.values()]

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
        """What the model is offered."""
        return [m.spec for m in self.manifests()]

    def invoke(self, name: str, params: dict[str, Any]) -> ToolOutcome:
        for source in self.sources:
            manifest = next((m for m in self._listed(source) if m.name == name), None)
            if manifest is None:
                continue
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
        return ToolOutcome.failed(
            f"tool {name!r} is not available: no server tool, connected client or MCP server "
            "offers it (a client-side tool needs the user's client to be connected)")

    def _visible(self, manifest: ToolManifest) -> bool:
        return manifest.requires_engine_roles <= self.roles and self._pooled(manifest.name)

    def _pooled(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.pool)

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


def _call(source: ToolSource, manifest: ToolManifest, params: dict[str, Any]) -> ToolOutcome:
    name = manifest.name
    with tracing.span(f"tool {name}", tool=name, transport=manifest.transport):
        try:
            outcome = source.call(name, params)
        except _NOT_THE_TOOLS:
            raise
        except Exception as e:  # a tool's failure is the model's business, not the turn's
            log.exception("tool %s failed", name)
            outcome = ToolOutcome.failed(f"{type(e).__name__}: {e}")
    metrics.tool_called(name, manifest.transport, outcome.status.value)
    return outcome
