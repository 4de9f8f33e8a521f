"""ThinkEngine (think-engines.txt §2-§3, arthur-engine.txt §2.1) and the registry."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ValidationError

from vancetope_brain.errors import ConfigError, StoreError, UnknownEngine
from vancetope_brain.models import ThinkProcess
from vancetope_brain.models.base import Wire
from vancetope_brain.models.steer import ProcessEventType
from vancetope_brain.settings import ENGINE_MODEL_SUFFIX, KEYS, setting_key

if TYPE_CHECKING:
    from vancetope_brain.engines.context import ThinkEngineContext


@dataclass(frozen=True)
class ParentReport:
    """What a child tells its parent on a status transition (think-engines §7a)."""

    human_summary: str
    payload: dict[str, Any] | None = None


class ThinkEngine:
    """The algorithm of a think process. Stateless: one instance serves every process.

    Lifecycle methods run serialized on the process's lane. Each receives the
    process document (read-only: change state through ``context``) and a
    context built for this call. ``steer`` gets no message argument: the
    engine drains *all* pending messages with ``context.drain_pending()``.
    A method that returns without setting a status leaves the process IDLE.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    description: ClassVar[str]
    version: ClassVar[str] = "1.0.0"
    allowed_tools: ClassVar[frozenset[str]] = frozenset()
    view_model: ClassVar[type[Wire] | None] = None
    """The shape of ``view``, published as ``docs/schemas/view.<name>.json``."""

    def start(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        """First call, from INIT."""

    def steer(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        """New messages are pending: drain and handle all of them in this turn."""
        raise NotImplementedError

    def resume(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        """Back from PAUSED or SUSPENDED: by default handle whatever is pending."""
        if context.has_pending():
            self.steer(process, context)

    def pause(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        """User pause; the runtime sets PAUSED afterwards."""

    def suspend(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        """System halt; the runtime sets SUSPENDED afterwards."""

    def stop(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        """Final stop; the runtime sets CLOSED/STOPPED afterwards."""

    def summarize_for_parent(self, process: ThinkProcess,
                             event_type: ProcessEventType) -> ParentReport:
        """The content of the ProcessEvent a parent receives; a generic status line by default."""
        return ParentReport(f"Process {process.name} ({self.name}) is {event_type.value}.")

    def view(self, process: ThinkProcess) -> Wire | None:
        """What clients draw of the process's state (a ``view_model``), None while there
        is nothing to draw. Clients read this, never ``engineState``, which is the engine's
        own."""
        return None

    @classmethod
    def major_version(cls) -> int:
        return int(cls.version.split(".", 1)[0])

    @classmethod
    def default_settings(cls) -> list[dict[str, Any]]:
        """The settings in the engine's namespace (think-engines §2 ``defaultSettings``,
        §4 "the engine's own keys are in its namespace"): each key's name, type, default
        and description, ``<name>.model`` first."""
        own = [key for name, key in sorted(KEYS.items()) if name.startswith(f"{cls.name}.")
               and name != f"{cls.name}{ENGINE_MODEL_SUFFIX}"]
        return [setting_key(f"{cls.name}{ENGINE_MODEL_SUFFIX}").describe(),
                *(key.describe() for key in own)]

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """The registry entry as shown to clients."""
        return {"name": cls.name, "title": cls.title, "description": cls.description,
                "version": cls.version, "allowedTools": sorted(cls.allowed_tools),
                "defaultSettings": cls.default_settings()}


ENGINE_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
"""Registry names are lowercase-kebab (think-engines §2): ``ford``, ``arthur-sub``."""

DEFAULT_ENGINE = "marvin"
"""The engine of a process created without engine or recipe (think-engines §8 names
``deep-think``, which marvin implements, §7)."""

ALIASES: dict[str, str] = {"deep-think": "marvin"}
"""Other names an engine is known by; accepted wherever an engine name is."""


class EngineRegistry:
    """name → engine instance. Registering a name twice, or a name that is not
    lowercase-kebab, fails at import time. ``ALIASES`` resolve in ``get`` and ``find``."""

    def __init__(self) -> None:
        self._engines: dict[str, ThinkEngine] = {}

    def register(self, cls: type[ThinkEngine]) -> type[ThinkEngine]:
        if not isinstance(getattr(cls, "name", None), str) or \
                not ENGINE_NAME.fullmatch(cls.name):
            raise ConfigError(f"think engine {cls.__qualname__} is named "
                              f"{getattr(cls, 'name', None)!r}; engine names are "
                              f"lowercase-kebab (e.g. 'deep-think')")
        if cls.name in ALIASES:
            raise ConfigError(f"think engine {cls.__qualname__} is named {cls.name!r}, an "
                              f"alias of {ALIASES[cls.name]!r}")
        if cls.name in self._engines:
            raise ConfigError(f"two think engines are named {cls.name!r}: "
                              f"{type(self._engines[cls.name]).__qualname__} and {cls.__qualname__}")
        self._engines[cls.name] = cls()
        return cls

    def get(self, name: str) -> ThinkEngine:
        """The engine (by name or alias); raises ``UnknownEngine`` naming the registered
        engines and suggesting the closest (case aside: ``Arthur`` → ``arthur``)."""
        try:
            return self._engines[canonical(name)]
        except KeyError:
            names = sorted([*self._engines, *ALIASES])
            close = difflib.get_close_matches(name.lower(), names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            aliases = "".join(f", {alias} (= {engine})" for alias, engine in ALIASES.items()
                              if engine in self._engines)
            raise UnknownEngine(f"no think engine named {name!r}{hint} (engines: "
                                f"{', '.join(sorted(self._engines))}{aliases})") from None

    def find(self, name: str) -> ThinkEngine | None:
        return self._engines.get(canonical(name))

    def __iter__(self) -> Iterator[ThinkEngine]:
        return iter(sorted(self._engines.values(), key=lambda e: e.name))


def shown_process(process: ThinkProcess) -> dict[str, Any]:
    """A process as clients read it: the record plus ``engineView``, its engine's view (null
    for an engine without one, and for a state this server cannot read — a list of
    processes must not fail for one of them)."""
    engine = ENGINES.find(process.engine)
    try:
        view = engine.view(process) if engine is not None else None
    except (ValidationError, StoreError):
        view = None
    return {**process.dump(), "engineView": view.dump() if view is not None else None}


def canonical(name: str) -> str:
    """The registry name behind ``name`` (itself unless it is an alias)."""
    return ALIASES.get(name, name)


ENGINES = EngineRegistry()
register_engine = ENGINES.register

