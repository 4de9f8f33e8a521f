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


def test_a_wrong_case_name_suggests_the_engine_and_every_name_is_listed():
    with pytest.raises(UnknownEngine) as info:
        ENGINES.get("Arthur")
    assert str(info.value).startswith(
        "no think engine named 'Arthur'; did you mean 'arthur'? (engines: agrajag, arthur, "
        "ford, marvin, ")
    assert "vogon, zaphod" in str(info.value)  # (and the engines the tests register)
    assert str(info.value).endswith(", deep-think (= marvin))")


def test_every_bundled_recipe_names_a_registered_engine():
    from vancetope_brain.recipes import bundled

    assert {r.engine for r in bundled().recipes.values()} <= {e.name for e in ENGINES}


def test_bundled_engines_are_registered_and_described():
    names = [e.name for e in ENGINES]
    assert "ford" in names
    ford = ENGINES.get("ford").describe()
    assert ford["version"].count(".") == 2 and ford["title"] and ford["description"]


@pytest.mark.parametrize("name", ["Deep-Think", "deep_think", "deep--think", "-deep", "2think",
                                  "deep think", ""])
def test_a_name_that_is_not_lowercase_kebab_fails_at_registration(name):
    with pytest.raises(ConfigError, match="lowercase-kebab"):
        EngineRegistry().register(_engine(name))


def test_an_alias_cannot_be_registered_and_resolves_to_its_engine():
    registry = EngineRegistry()
    with pytest.raises(ConfigError, match="alias of 'marvin'"):
        registry.register(_engine("deep-think"))
    registry.register(_engine("marvin"))
    assert registry.get("deep-think") is registry.get("marvin") is registry.find("deep-think")


def test_describe_lists_the_engines_settings_as_default_settings():
    described = ENGINES.get("arthur").describe()["defaultSettings"]
    assert [s["name"] for s in described] == [
        "arthur.model", "arthur.includeProjectMemorySummary", "arthur.maxContextTokens"]
    assert described[2]["type"] == "int" and described[2]["default"] == 65536
    assert _engine("alpha").describe()["defaultSettings"] == [
        {"name": "alpha.model", "type": "str", "default": None,
         "description": "Model name for the alpha engine (beats llm.model; unset: llm.model)."}]
