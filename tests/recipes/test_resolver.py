"""The recipe cascade project → tenant → bundled, the engine-name convention, the snapshot a
process gets at spawn, and the effective tool pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vancetope_brain.errors import InvalidInput, NotFound, UnknownRecipe
from vancetope_brain.models.recipe import AppliedRecipe, Recipe, RecipeCategory, RecipeSource
from vancetope_brain.models.render import render_prompts, sample_context
from vancetope_brain.recipes import RecipeAdmin, RecipeResolver, effective_tools
from vancetope_brain.store import Backend, IdentityStore, RecipeStore

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def resolver(acme_store: Backend) -> RecipeResolver:
    return RecipeResolver(acme_store.port(RecipeStore))


def _analyze(description: str, **fields: object) -> Recipe:
    return Recipe(name="analyze", engine="ford", description=description, **fields)  # type: ignore[arg-type]


def test_a_project_recipe_overrides_a_tenant_recipe_overrides_a_bundled_one(
    acme_store: Backend, resolver: RecipeResolver
) -> None:
    def resolved() -> AppliedRecipe:
        return resolver.resolve("acme", "p1", recipe="analyze")

    assert (resolved().source, resolved().description.startswith("Analyzes")) == (
        RecipeSource.BUNDLED, True)
    admin = RecipeAdmin(acme_store.port(RecipeStore), acme_store.port(IdentityStore))
    admin.put("acme", None, _analyze("tenant's", params={"depth": "quick", "tone": "dry"}))
    assert (resolved().source, resolved().description) == (RecipeSource.TENANT, "tenant's")
    assert resolved().params == {"depth": "quick", "tone": "dry"}  # whole recipe, no merging
    admin.put("acme", "p1", _analyze("project's"))
    assert (resolved().source, resolved().description, resolved().params) == (
        RecipeSource.PROJECT, "project's", {})
    # Other projects and other tenants do not see it.
    assert resolver.resolve("acme", "default", recipe="analyze").source is RecipeSource.TENANT
    assert resolver.resolve("acme", None, recipe="analyze").source is RecipeSource.TENANT
    assert resolver.resolve("globex", "p1", recipe="analyze").source is RecipeSource.BUNDLED
    entry = resolver.get("acme", "p1", "analyze")
    assert entry.shadows == (RecipeSource.TENANT, RecipeSource.BUNDLED)
    admin.delete("acme", "p1", "analyze")
    assert resolved().source is RecipeSource.TENANT


def test_the_snapshot_does_not_change_when_the_recipe_is_edited(
    acme_store: Backend, resolver: RecipeResolver
) -> None:
    """What a process stores at spawn (``applied.dump()``) survives an edit of the recipe; the
    lead's spawn test shows the same through a running process."""
    admin = RecipeAdmin(acme_store.port(RecipeStore), acme_store.port(IdentityStore))
    admin.put("acme", "p1", _analyze("v1", prompt_override="v1: {{ process.goal }}",
                                     allowed_tools_add=["web_fetch"]))
    stored = resolver.resolve("acme", "p1", recipe="analyze").dump()
    admin.put("acme", "p1", _analyze("v2", prompt_override="v2"))
    snapshot = AppliedRecipe.model_validate(json.loads(json.dumps(stored)))
    assert (snapshot.description, snapshot.allowed_tools_add) == ("v1", ["web_fetch"])
    rendered = render_prompts(snapshot, sample_context()).override
    assert rendered == "v1: Summarize the attached papers."
    assert resolver.resolve("acme", "p1", recipe="analyze").description == "v2"


def test_caller_params_overlay_the_recipe_defaults(resolver: RecipeResolver) -> None:
    applied = resolver.resolve("acme", "p1", recipe="analyze", caller_params={"depth": "quick"})
    assert applied.params == {"depth": "quick", "maxFindings": 7}
    assert resolver.resolve("acme", "p1", recipe="analyze").params["depth"] == "thorough"


def test_the_engine_comes_from_the_recipe(acme_store: Backend,
                                          resolver: RecipeResolver) -> None:
    RecipeAdmin(acme_store.port(RecipeStore), acme_store.port(IdentityStore)).put("acme", None, Recipe(name="deep", engine="marvin"))
    assert resolver.resolve("acme", "p1", recipe="deep").engine == "marvin"
    assert resolver.resolve("acme", "p1", recipe="deep", engine="marvin").engine == "marvin"
    with pytest.raises(InvalidInput, match="recipe 'deep' runs engine 'marvin', not 'ford'"):
        resolver.resolve("acme", "p1", recipe="deep", engine="ford")


def test_without_a_recipe_name_the_recipe_named_like_the_engine_applies(
    acme_store: Backend, resolver: RecipeResolver
) -> None:
    arthur = resolver.resolve("acme", "p1", engine="arthur")
    assert (arthur.name, arthur.engine, arthur.source) == ("arthur", "arthur",
                                                           RecipeSource.BUNDLED)
    assert arthur.category is RecipeCategory.CHAT and arthur.prompt_override
    RecipeAdmin(acme_store.port(RecipeStore), acme_store.port(IdentityStore)).put("acme", "p1", Recipe(name="ford", engine="ford", description="mine"))
    assert resolver.resolve("acme", "p1", engine="ford").description == "mine"
    bare = resolver.resolve("acme", "p1", engine="echo", caller_params={"x": 1})
    assert bare == AppliedRecipe(name="echo", engine="echo", source=RecipeSource.ENGINE,
                                 params={"x": 1})
    with pytest.raises(InvalidInput, match="name a recipe or an engine"):
        resolver.resolve("acme", "p1")


def test_an_unknown_recipe_suggests_the_closest_name(resolver: RecipeResolver) -> None:
    with pytest.raises(UnknownRecipe, match="no recipe named 'analyse'; did you mean 'analyze'"):
        resolver.resolve("acme", "p1", recipe="analyse")
    with pytest.raises(UnknownRecipe, match="known recipes: agrajag, analyze, arthur, arthur-sub, ford, ford-chat"):
        resolver.get("acme", "p1", "xyzzy")


def test_list_is_the_effective_catalogue(acme_store: Backend, resolver: RecipeResolver) -> None:
    admin = RecipeAdmin(acme_store.port(RecipeStore), acme_store.port(IdentityStore))
    admin.put("acme", None, _analyze("tenant's"))
    admin.put("acme", None, Recipe(name="triage", engine="ford", category=RecipeCategory.SERVICE))
    admin.put("acme", "p1", Recipe(name="triage", engine="ford", description="p1's"))
    entries = {e.recipe.name: e for e in resolver.list("acme", "p1")}
    assert {"analyze", "arthur", "ford", "summarize", "triage"} <= set(entries)
    assert list(entries) == sorted(entries)
    assert (entries["analyze"].source, entries["analyze"].shadows) == (
        RecipeSource.TENANT, (RecipeSource.BUNDLED,))
    assert (entries["triage"].source, entries["triage"].recipe.description) == (
        RecipeSource.PROJECT, "p1's")
    workers = [e.recipe.name for e in resolver.list("acme", "p1",
                                                    category=RecipeCategory.WORKER)]
    assert "arthur" not in workers and "triage" in workers
    assert [e.recipe.name for e in resolver.list("acme", None,
                                                 category=RecipeCategory.SERVICE)] == [
        "agrajag", "triage"]
    described = resolver.describe("acme", "p1", "analyze")
    assert (described["source"], described["shadows"], described["description"]) == (
        "tenant", ["bundled"], "tenant's")
    assert described["allowedToolsAdd"] == [] and described["schemaVersion"] == 1


def test_admin_writes_check_the_project_and_replace_or_create(acme_store: Backend) -> None:
    admin = RecipeAdmin(acme_store.port(RecipeStore), acme_store.port(IdentityStore))
    with pytest.raises(NotFound, match="project nope not found"):
        admin.put("acme", "nope", _analyze("x"))
    assert admin.put("acme", "p1", _analyze("first")) is True
    assert admin.put("acme", "p1", _analyze("second")) is False
    assert [r.description for r in admin.stored("acme", "p1")] == ["second"]
    with pytest.raises(NotFound):
        admin.update("acme", None, _analyze("x"))


@pytest.mark.parametrize(("default", "add", "remove", "expected"), [
    ({"a", "b"}, [], [], {"a", "b"}),
    ({"a", "b"}, ["c"], ["a"], {"b", "c"}),
    (set(), ["inbox_post"], [], {"inbox_post"}),
    ({"process_*"}, [], ["process_stop"], {"process_*"}),  # patterns are not carved
])
def test_effective_tools_is_default_plus_add_minus_remove(
    default: set[str], add: list[str], remove: list[str], expected: set[str]
) -> None:
    applied = AppliedRecipe(name="r", engine="e", source=RecipeSource.BUNDLED,
                            allowed_tools_add=add, allowed_tools_remove=remove)
    assert effective_tools(frozenset(default), applied) == frozenset(expected)


def test_checked_in_v1_records_keep_loading() -> None:
    recipe = Recipe.load(json.loads((FIXTURES / "recipe.v1.json").read_text()))
    assert (recipe.name, recipe.params["maxPapers"], recipe.roles) == (
        "literature-scan", 12, ["audit-reader"])
    assert Recipe.load(recipe.dump()) == recipe
    applied = AppliedRecipe.model_validate(
        json.loads((FIXTURES / "applied_recipe.v1.json").read_text()))
    assert (applied.source, applied.params["maxPapers"]) == (RecipeSource.PROJECT, 5)
    assert render_prompts(applied, sample_context(applied.params)).override == \
        "Scan at most 5 papers for: Summarize the attached papers."
