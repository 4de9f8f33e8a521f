"""Tenant and project recipes: create / update (replaces) / delete / get / list, per level,
isolated per tenant, stored as the validated dump with its schema version."""

from __future__ import annotations

from typing import Any

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.recipes import Recipe
from vancetope_brain.store import Store


def _recipe(name: str = "analyze", **fields: Any) -> Recipe:
    return Recipe(name=name, engine=fields.pop("engine", "ford"), **fields)


def test_create_get_and_list_per_level(store: Store) -> None:
    tenant_level = _recipe(description="tenant", params={"depth": "quick"},
                           allowed_tools_add=["web_*"], roles=["tool-prober"])
    project_level = _recipe(description="project", prompt_override="Goal: {{ process.goal }}")
    store.create_recipe("ten_a", None, tenant_level)
    store.create_recipe("ten_a", "p1", project_level)
    store.create_recipe("ten_a", "p1", _recipe("brief"))
    assert store.get_recipe("ten_a", None, "analyze") == tenant_level
    assert store.get_recipe("ten_a", "p1", "analyze") == project_level
    assert [r.name for r in store.list_recipes("ten_a", "p1")] == ["analyze", "brief"]
    assert store.list_recipes("ten_a", None) == [tenant_level]
    assert store.list_recipes("ten_a", "p2") == []
    with pytest.raises(NotFound, match="recipe brief not found in tenant ten_a"):
        store.get_recipe("ten_a", None, "brief")


def test_create_twice_at_one_level_conflicts(store: Store) -> None:
    store.create_recipe("ten_a", "p1", _recipe())
    with pytest.raises(Conflict, match="recipe analyze already exists in project p1"):
        store.create_recipe("ten_a", "p1", _recipe(description="again"))
    assert store.get_recipe("ten_a", "p1", "analyze").description == ""


def test_update_replaces_the_whole_recipe(store: Store) -> None:
    store.create_recipe("ten_a", None, _recipe(params={"a": 1}, allowed_tools_add=["x"]))
    replacement = _recipe(engine="marvin", params={"b": 2})
    store.update_recipe("ten_a", None, replacement)
    stored = store.get_recipe("ten_a", None, "analyze")
    assert stored == replacement and stored.allowed_tools_add == []
    with pytest.raises(NotFound):
        store.update_recipe("ten_a", "p1", replacement)  # exists at the tenant level only


def test_delete_removes_one_level_only(store: Store) -> None:
    store.create_recipe("ten_a", None, _recipe())
    store.create_recipe("ten_a", "p1", _recipe())
    store.delete_recipe("ten_a", "p1", "analyze")
    assert store.list_recipes("ten_a", "p1") == []
    assert store.get_recipe("ten_a", None, "analyze").name == "analyze"
    with pytest.raises(NotFound, match="recipe analyze not found in project p1"):
        store.delete_recipe("ten_a", "p1", "analyze")


def test_recipes_are_tenant_isolated(store: Store) -> None:
    store.create_recipe("ten_a", None, _recipe())
    store.create_recipe("ten_a", "default", _recipe("brief"))
    with pytest.raises(NotFound):
        store.get_recipe("ten_b", None, "analyze")
    with pytest.raises(NotFound):
        store.get_recipe("ten_b", "default", "brief")
    assert store.list_recipes("ten_b", None) == store.list_recipes("ten_b", "default") == []
    with pytest.raises(NotFound):
        store.update_recipe("ten_b", None, _recipe(description="hijack"))
    with pytest.raises(NotFound):
        store.delete_recipe("ten_b", "default", "brief")
    store.create_recipe("ten_b", None, _recipe(description="b's own"))  # same name, no clash
    assert store.get_recipe("ten_a", None, "analyze").description == ""
    assert store.get_recipe("ten_a", "default", "brief").name == "brief"


def test_stored_recipe_carries_its_schema_version_and_survives_reopening(
    store: Store, backend: Any
) -> None:
    store.create_recipe("ten_a", "p1", _recipe())
    again = backend.open_store()
    loaded = again.get_recipe("ten_a", "p1", "analyze")
    assert loaded.schema_version == Recipe.SCHEMA_VERSION == 1
    assert loaded.dump()["schemaVersion"] == 1
