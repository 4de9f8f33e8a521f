"""What a save refuses (issue 12): a template that fails or overruns its render bounds with
sample values, YAML anchors and aliases (an alias bomb), a definition over
``MAX_DEFINITION_BYTES``, and more than the tenant's cap of definitions of a kind. Nothing of
a refused write is stored."""

from __future__ import annotations

import pytest

from tests.recipes.attacks import ATTACKS, BOMB
from vancetope_brain.errors import LimitExceeded, RecipeError
from vancetope_brain.models.recipe import Recipe
from vancetope_brain.models.strategy import Strategy
from vancetope_brain.models.workflow_template import WorkflowTemplate
from vancetope_brain.recipes import RecipeAdmin
from vancetope_brain.recipes.loader import MAX_DEFINITION_BYTES, parse_definition, parse_recipe
from vancetope_brain.store import Backend, IdentityStore, RecipeStore


def _admin(store: Backend, cap: int = 100) -> RecipeAdmin:
    return RecipeAdmin(store.port(RecipeStore), store.port(IdentityStore), cap)


def test_an_alias_bomb_is_refused_before_it_expands(acme_store: Backend) -> None:
    with pytest.raises(RecipeError, match=r"bomb.yaml: line 4, column 6: YAML anchors and "
                                          r"aliases \(&a\) are not allowed"):
        parse_recipe(BOMB, "bomb.yaml")
    with pytest.raises(RecipeError, match=r"aliases \(\*a\)"):
        parse_recipe("name: a\nengine: ford\nparams: {x: *a}\n", "alias.yaml")
    assert acme_store.port(RecipeStore).list_recipes("acme", None) == []


def test_a_definition_over_the_size_cap_is_refused_at_the_cap_accepted(
        acme_store: Backend) -> None:
    head = "name: big\nengine: ford\nparams: {text: '"
    at_cap = head + "x" * (MAX_DEFINITION_BYTES - len(head) - 3) + "'}\n"
    assert len(at_cap.encode()) == MAX_DEFINITION_BYTES
    recipe = parse_recipe(at_cap, "big.yaml")
    with pytest.raises(LimitExceeded, match=f"big.yaml: {MAX_DEFINITION_BYTES + 1:,} bytes; a "
                                            f"recipe has at most {MAX_DEFINITION_BYTES:,}"):
        parse_recipe(at_cap.replace("'}", "x'}"), "big.yaml")

    admin = _admin(acme_store)
    text = recipe.params["text"]
    as_json = len(Recipe(name="big", engine="ford", params={"text": text}).model_dump_json(
        by_alias=True, exclude_defaults=True))  # the document as a frame carries it
    exact = Recipe(name="big", engine="ford",
                   params={"text": text[:MAX_DEFINITION_BYTES - as_json]})
    assert len(exact.model_dump_json(by_alias=True, exclude_defaults=True)) == \
        MAX_DEFINITION_BYTES
    admin.put("acme", None, exact)
    over = Recipe(name="bigger", engine="ford", params={"text": exact.params["text"] + "x"})
    with pytest.raises(LimitExceeded, match="recipe bigger: .* bytes as JSON"):
        admin.create("acme", None, over)
    assert [r.name for r in admin.stored("acme", None)] == ["big"]


def test_one_definition_over_the_tenant_cap_is_refused(acme_store: Backend) -> None:
    admin = _admin(acme_store, cap=3)
    admin.create("acme", None, Recipe(name="one", engine="ford"))
    admin.create("acme", "p1", Recipe(name="one", engine="ford"))
    admin.put("acme", "p1", Recipe(name="two", engine="ford"))  # at the cap
    admin.put("acme", "p1", Recipe(name="two", engine="ford", description="edited"))  # replaces
    with pytest.raises(LimitExceeded) as refused:
        admin.create("acme", None, Recipe(name="three", engine="ford"))
    assert refused.value.code == "limit_exceeded"
    with pytest.raises(LimitExceeded):
        admin.put("acme", "p1", Recipe(name="three", engine="ford"))
    assert [r.name for r in admin.stored("acme", "p1")] == ["one", "two"]
    assert [r.name for r in admin.stored("acme", None)] == ["one"]
    strategies = admin.of(Strategy)  # another kind, its own count under the same cap
    assert strategies.max_per_tenant == 3
    strategies.create("acme", None, Strategy.model_validate({"name": "s", "phases": [
        {"name": "a", "recipe": "ford", "goal": "{{ input }}"}]}))
    admin.delete("acme", "p1", "two")
    admin.create("acme", None, Recipe(name="three", engine="ford"))


def test_every_kind_is_test_rendered_on_save_and_nothing_is_stored(acme_store: Backend) -> None:
    admin = _admin(acme_store)
    power = ATTACKS["power"][0]
    with pytest.raises(RecipeError, match="recipe 'slow': promptOverride: template exceeded "
                                          "its render budget: an integer of more than"):
        admin.create("acme", None, Recipe(name="slow", engine="ford", prompt_override=power))
    strategy = Strategy.model_validate({"name": "slow", "phases": [
        {"name": "a", "recipe": "ford", "goal": "{{ input }}",
         "checkpoint": {"type": "approval", "title": "ok?", "body": ATTACKS["repetition"][0]}}]})
    with pytest.raises(RecipeError, match="strategy 'slow': phases.0.checkpoint.body: template "
                                          "exceeded its render budget"):
        admin.of(Strategy).put("acme", "p1", strategy)
    template = parse_definition(WorkflowTemplate, "name: slow\naggregate: sum up\nsteps:\n"
                                "  - goal: '{% for a in range(99999) %}{% for b in range(99999) %}"
                                "{% endfor %}{% endfor %}'\n", "slow.yaml")
    with pytest.raises(RecipeError, match="template 'slow': steps.0.goal: template exceeded its "
                                          "render budget: more than 10,000 loop iterations"):
        admin.of(WorkflowTemplate).create("acme", None, template)
    recipes = acme_store.port(RecipeStore)
    assert [recipes.list_definitions(kind, "acme", level) for kind in (Recipe, Strategy,
            WorkflowTemplate) for level in (None, "p1")] == [[]] * 6
