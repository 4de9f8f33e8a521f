"""The engine registry: duplicates fail, unknown names suggest the closest one."""

from __future__ import annotations

import pytest

from vancetope_brain.engines import ENGINES, EngineRegistry, ThinkEngine
from vancetope_brain.errors import ConfigError, UnknownEngine


def _engine(name: str) -> type[ThinkEngine]:
    return type(f"E_{name}", (ThinkEngine,), {"name": name, "title": name, "description": name})


def test_duplicate_name_fails_at_registration():
    registry = EngineRegistry()
    registry.register(_engine("alpha"))
    with pytest.raises(ConfigError, match="two think engines are named 'alpha'"):
        registry.register(_engine("alpha"))


def test_unknown_name_suggests_the_closest():
    with pytest.raises(UnknownEngine, match="did you mean 'ford'"):
        ENGINES.get("frod")


def test_bundled_engines_are_registered_and_described():
    names = [e.name for e in ENGINES]
    assert "ford" in names
    ford = ENGINES.get("ford").describe()
    assert ford["version"].count(".") == 2 and ford["title"] and ford["description"]
