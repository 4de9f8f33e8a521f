"""Every definition kind shares the port: names are unique per kind and level, and one kind
never sees another's documents."""

from __future__ import annotations

import pytest

from vancetope_brain.errors import Conflict, LimitExceeded, NotFound
from vancetope_brain.models.recipe import Recipe
from vancetope_brain.models.strategy import Strategy
from vancetope_brain.models.workflow_template import WorkflowTemplate
from vancetope_brain.recipes.kinds import KINDS
from vancetope_brain.store import RecipeStore


def _strategy(name: str = "analyze", description: str = "") -> Strategy:
    return Strategy.model_validate({"name": name, "description": description, "phases": [
        {"name": "draft", "recipe": "ford", "goal": "Draft {{ input }}",
         "checkpoint": {"type": "approval", "title": "Approve the draft?"}}]})


def test_kinds_are_registered_once_each() -> None:
    assert {"recipe", "strategy", "template"} <= set(KINDS)
    assert KINDS["strategy"].model is Strategy and KINDS["recipe"].model is Recipe
    assert KINDS["template"].model is WorkflowTemplate
    assert len({kind.model.COLLECTION for kind in KINDS.values()}) == len(KINDS)


def test_a_kind_sees_only_its_own_documents(recipes: RecipeStore) -> None:
    recipe, strategy = Recipe(name="analyze", engine="ford"), _strategy()
    recipes.create_definition("ten_a", "p1", recipe)
    recipes.create_definition("ten_a", "p1", strategy)  # same name, another kind
    assert recipes.get_definition(Strategy, "ten_a", "p1", "analyze") == strategy
    assert recipes.get_recipe("ten_a", "p1", "analyze") == recipe
    assert recipes.list_definitions(Strategy, "ten_a", "p1") == [strategy]
    assert recipes.list_recipes("ten_a", "p1") == [recipe]
    recipes.delete_definition(Strategy, "ten_a", "p1", "analyze")
    assert recipes.list_recipes("ten_a", "p1") == [recipe]
    with pytest.raises(NotFound, match="strategy analyze not found in project p1"):
        recipes.get_definition(Strategy, "ten_a", "p1", "analyze")


def test_strategy_writes_conflict_replace_and_stay_tenant_isolated(recipes: RecipeStore) -> None:
    recipes.create_definition("ten_a", None, _strategy())
    with pytest.raises(Conflict, match="strategy analyze already exists in tenant ten_a"):
        recipes.create_definition("ten_a", None, _strategy(description="again"))
    recipes.update_definition("ten_a", None, _strategy(description="v2"))
    assert recipes.get_definition(Strategy, "ten_a", None, "analyze").description == "v2"
    with pytest.raises(NotFound):
        recipes.get_definition(Strategy, "ten_b", None, "analyze")
    with pytest.raises(NotFound):
        recipes.update_definition("ten_b", None, _strategy(description="hijack"))
    with pytest.raises(NotFound, match="strategy analyze not found in tenant ten_b"):
        recipes.delete_definition(Strategy, "ten_b", None, "analyze")
    loaded = recipes.get_definition(Strategy, "ten_a", None, "analyze")
    assert loaded.schema_version == Strategy.SCHEMA_VERSION == 1


def test_a_template_is_stored_apart_from_a_strategy_of_the_same_name(
        recipes: RecipeStore) -> None:
    template = WorkflowTemplate.model_validate({
        "name": "analyze", "steps": [{"goal": "Look at {{ goal }}"}], "aggregate": "Sum up"})
    recipes.create_definition("ten_a", None, template)
    recipes.create_definition("ten_a", None, _strategy())
    assert recipes.get_definition(WorkflowTemplate, "ten_a", None, "analyze") == template
    assert recipes.list_definitions(WorkflowTemplate, "ten_a", None) == [template]
    recipes.delete_definition(WorkflowTemplate, "ten_a", None, "analyze")
    assert recipes.list_definitions(Strategy, "ten_a", None) == [_strategy()]
    with pytest.raises(NotFound, match="template analyze not found in tenant ten_a"):
        recipes.get_definition(WorkflowTemplate, "ten_a", None, "analyze")


def test_a_tenant_holds_at_most_limit_definitions_of_a_kind(recipes: RecipeStore) -> None:
    recipes.create_definition("ten_a", None, Recipe(name="one", engine="ford"), limit=3)
    recipes.create_definition("ten_a", "p1", Recipe(name="one", engine="ford"), limit=3)
    recipes.create_definition("ten_a", "p2", Recipe(name="two", engine="ford"), limit=3)  # at it
    with pytest.raises(LimitExceeded, match="tenant ten_a already has 3 recipe definitions"):
        recipes.create_definition("ten_a", None, Recipe(name="four", engine="ford"), limit=3)
    assert [r.name for r in recipes.list_recipes("ten_a", None)] == ["one"]  # nothing written
    recipes.create_definition("ten_a", None, _strategy(), limit=3)  # another kind counts apart
    recipes.create_definition("ten_b", None, Recipe(name="four", engine="ford"), limit=3)
    recipes.delete_recipe("ten_a", "p2", "two")
    recipes.create_definition("ten_a", None, Recipe(name="four", engine="ford"), limit=3)
