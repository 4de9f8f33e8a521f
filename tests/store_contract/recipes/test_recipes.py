"""Tenant and project recipes: create / update (replaces) / delete / get / list, per level,
isolated per tenant, stored as the validated dump with its schema version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models.recipe import Recipe
from vancetope_brain.store import RecipeStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage


def _recipe(name: str = "analyze", **fields: Any) -> Recipe:
    return Recipe(name=name, engine=fields.pop("engine", "ford"), **fields)


def test_create_get_and_list_per_level(recipes: RecipeStore) -> None:
    tenant_level = _recipe(description="tenant", params={"depth": "quick"},
                           allowed_tools_add=["web_*"], roles=["tool-prober"])
    project_level = _recipe(description="project", prompt_override="Goal: {{ process.goal }}")
    recipes.create_recipe("ten_a", None, tenant_level)
    recipes.create_recipe("ten_a", "p1", project_level)
    recipes.create_recipe("ten_a", "p1", _recipe("brief"))
    assert recipes.get_recipe("ten_a", None, "analyze") == tenant_level
    assert recipes.get_recipe("ten_a", "p1", "analyze") == project_level
    assert [r.name for r in recipes.list_recipes("ten_a", "p1")] == ["analyze", "brief"]
    assert recipes.list_recipes("ten_a", None) == [tenant_level]
    assert recipes.list_recipes("ten_a", "p2") == []
    with pytest.raises(NotFound, match="recipe brief not found in tenant ten_a"):
        recipes.get_recipe("ten_a", None, "brief")


def test_create_twice_at_one_level_conflicts(recipes: RecipeStore) -> None:
    recipes.create_recipe("ten_a", "p1", _recipe())
    with pytest.raises(Conflict, match="recipe analyze already exists in project p1"):
        recipes.create_recipe("ten_a", "p1", _recipe(description="again"))
    assert recipes.get_recipe("ten_a", "p1", "analyze").description == ""


def test_update_replaces_the_whole_recipe(recipes: RecipeStore) -> None:
    recipes.create_recipe("ten_a", None, _recipe(params={"a": 1}, allowed_tools_add=["x"]))
    replacement = _recipe(engine="marvin", params={"b": 2})
    recipes.update_recipe("ten_a", None, replacement)
    stored = recipes.get_recipe("ten_a", None, "analyze")
    assert stored == replacement and stored.allowed_tools_add == []
    with pytest.raises(NotFound):
        recipes.update_recipe("ten_a", "p1", replacement)  # exists at the tenant level only


def test_delete_removes_one_level_only(recipes: RecipeStore) -> None:
    recipes.create_recipe("ten_a", None, _recipe())
    recipes.create_recipe("ten_a", "p1", _recipe())
    recipes.delete_recipe("ten_a", "p1", "analyze")
    assert recipes.list_recipes("ten_a", "p1") == []
    assert recipes.get_recipe("ten_a", None, "analyze").name == "analyze"
    with pytest.raises(NotFound, match="recipe analyze not found in project p1"):
        recipes.delete_recipe("ten_a", "p1", "analyze")


def test_recipes_are_tenant_isolated(recipes: RecipeStore) -> None:
    recipes.create_recipe("ten_a", None, _recipe())
    recipes.create_recipe("ten_a", "default", _recipe("brief"))
    with pytest.raises(NotFound):
        recipes.get_recipe("ten_b", None, "analyze")
    with pytest.raises(NotFound):
        recipes.get_recipe("ten_b", "default", "brief")
    assert recipes.list_recipes("ten_b", None) == recipes.list_recipes("ten_b", "default") == []
    with pytest.raises(NotFound):
        recipes.update_recipe("ten_b", None, _recipe(description="hijack"))
    with pytest.raises(NotFound):
        recipes.delete_recipe("ten_b", "default", "brief")
    recipes.create_recipe("ten_b", None, _recipe(description="b's own"))  # same name, no clash
    assert recipes.get_recipe("ten_a", None, "analyze").description == ""
    assert recipes.get_recipe("ten_a", "default", "brief").name == "brief"


def test_stored_recipe_carries_its_schema_version_and_survives_reopening(
    recipes: RecipeStore, storage: Storage
) -> None:
    recipes.create_recipe("ten_a", "p1", _recipe())
    again = storage.open_backend().port(RecipeStore)
    loaded = again.get_recipe("ten_a", "p1", "analyze")
    assert loaded.schema_version == Recipe.SCHEMA_VERSION == 1
    assert loaded.dump()["schemaVersion"] == 1
