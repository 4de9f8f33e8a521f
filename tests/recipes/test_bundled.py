"""Every bundled recipe loads and renders (STYLE 11, 15); bad recipes fail with the file and
the field; templates are strict and sandboxed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from vancetope_brain.errors import RecipeError
from vancetope_brain.models.recipe import AppliedRecipe, RecipeCategory, RecipeSource
from vancetope_brain.models.render import render, render_prompts, sample_context
from vancetope_brain.recipes import BundledRecipes, bundled, dump_recipe, parse_recipe

BUNDLED = bundled().recipes
RECIPES_DIR = Path(__file__).resolve().parents[2] / "recipes"


def test_the_bundled_catalogue_has_the_chat_and_worker_recipes() -> None:
    assert {"arthur", "ford", "analyze", "summarize"} <= set(BUNDLED)
    assert BUNDLED["arthur"].engine == "arthur"
    assert BUNDLED["arthur"].category is RecipeCategory.CHAT
    workers = {name for name, r in BUNDLED.items() if r.category is RecipeCategory.WORKER}
    assert {"ford", "analyze", "summarize"} <= workers
    assert sorted(BUNDLED) == sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_bundled_recipe_loads_and_renders(name: str) -> None:
    recipe = BUNDLED[name]
    assert recipe.description
    assert recipe.prompt_override or recipe.prompt_prefix
    applied = AppliedRecipe.of(recipe, RecipeSource.BUNDLED)
    rendered = render_prompts(applied, sample_context(applied.params))
    prompt = rendered.system_prompt("FALLBACK")
    assert prompt.strip() and "{{" not in prompt and "{%" not in prompt
    no_goal = dataclasses.replace(sample_context(applied.params, tools=()), goal="")
    assert render_prompts(applied, no_goal).system_prompt("FALLBACK").strip()
    for path in recipe.manual_paths:
        assert bundled().manual(path).startswith("# ")
    assert parse_recipe(dump_recipe(recipe), "round trip") == recipe


def test_the_arthur_prompt_shows_its_tools_and_the_project() -> None:
    applied = AppliedRecipe.of(BUNDLED["arthur"], RecipeSource.BUNDLED)
    prompt = render_prompts(applied, sample_context(tools=["recipe_list", "process_create"]))
    assert prompt.override is not None
    assert '"Literature Review"' in prompt.override
    assert "Tools you have: process_create, recipe_list." in prompt.override
    assert applied.manual_paths == ["manuals/arthur-delegation.md", "manuals/arthur-workers.md"]


def test_params_reach_the_template() -> None:
    applied = AppliedRecipe.of(BUNDLED["analyze"], RecipeSource.BUNDLED,
                               {"depth": "quick", "maxFindings": 3})
    prompt = render_prompts(applied, sample_context(applied.params)).override
    assert prompt is not None and "at most 3" in prompt and "quick first look" in prompt


def _bad(tmp_path: Path, name: str, text: str) -> BundledRecipes:
    (tmp_path / f"{name}.yaml").write_text(text)
    return BundledRecipes(tmp_path)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "message"), [
    ("name: analyze\nengine: ford\nallowedToolsAdd: [3]\n",
     "recipes/analyze.yaml: allowedToolsAdd.0: Input should be a valid string"),
    ("name: analyze\nengine: ford\nallowedToolAdd: [x]\n",
     "recipes/analyze.yaml: allowedToolAdd: unknown field"),
    ("name: analyze\n",
     "recipes/analyze.yaml: engine: Field required"),
    ("name: analyze\nengine: ford\ncategory: boss\n",
     "recipes/analyze.yaml: category: Input should be 'chat', 'worker' or 'service'"),
    ("name: analyze\nengine: ford\nallowedToolsAdd: [x]\nallowedToolsRemove: [x]\n",
     "recipes/analyze.yaml: (recipe): tools both added and removed: x"),
    ("name: analyze\nengine: ford\nmanualPaths: [../secret.md]\n",
     "recipes/analyze.yaml: manualPaths: '../secret.md' is not a relative path"),
    ("name: analyze\nengine: ford\npromptOverride: 'Hi {{ usr.name }}'\n",
     "recipes/analyze.yaml: promptOverride: template uses unknown variable(s) usr"),
    ("name: analyze\nengine: ford\npromptPrefix: 'Hi {% if %}'\n",
     "recipes/analyze.yaml: promptPrefix: template line 1:"),
    ("name: analyze\nengine: ford\nschemaVersion: 9\n",
     "recipes/analyze.yaml: schemaVersion 9 is newer than this server's 1"),
    ("name: analyze\nengine: ford\nengine: marvin\n",
     "recipes/analyze.yaml: line 3, column 1: key 'engine' appears twice"),
    ("name: analyze\n  engine: ford\n",
     "recipes/analyze.yaml: line 2, column 9: mapping values are not allowed here"),
    ("- name: analyze\n",
     "recipes/analyze.yaml: a recipe is a mapping of fields, not list"),
    ("name: summary\nengine: ford\n",
     "recipes/analyze.yaml: name: 'summary' does not match the file name"),
])
def test_an_invalid_recipe_names_the_file_and_the_field(tmp_path: Path, text: str,
                                                        message: str) -> None:
    with pytest.raises(RecipeError) as failed:
        _ = _bad(tmp_path, "analyze", text).recipes
    assert str(failed.value).startswith(message), str(failed.value)


def test_every_field_error_is_reported_at_once() -> None:
    with pytest.raises(RecipeError) as failed:
        parse_recipe("name: Bad Name\nengine: ford\nroles: [ok, 'Not Ok']\n", "my.yaml")
    assert str(failed.value).count("my.yaml: ") == 2
    assert "my.yaml: roles.1:" in str(failed.value)


def test_an_undefined_variable_at_render_names_the_recipe_and_the_variable() -> None:
    recipe = parse_recipe("name: brief\nengine: ford\n"
                          "promptOverride: 'Write {{ params.maxWords }} words.'\n", "brief.yaml")
    applied = AppliedRecipe.of(recipe, RecipeSource.TENANT)
    with pytest.raises(RecipeError, match=r"recipe 'brief': promptOverride: undefined variable: "
                                          r"'dict object' has no attribute 'maxWords'"):
        render_prompts(applied, sample_context())
    filled = render_prompts(applied, sample_context({"maxWords": 50}))
    assert filled.override == "Write 50 words."


@pytest.mark.parametrize("template", [
    "{{ ''.__class__.__mro__ }}",
    "{{ params.__class__ }}",
    "{{ tools.__len__() }}",
    "{{ params.update({'x': 1}) }}",
    "{{ process.pop('id') }}",
])
def test_the_sandbox_blocks_dunders_and_mutation(template: str) -> None:
    with pytest.raises(RecipeError, match="recipe 'evil': promptOverride: not allowed"):
        render("evil", "promptOverride", template, sample_context().variables("evil"))


def test_a_missing_manual_or_a_path_outside_the_package_is_refused() -> None:
    with pytest.raises(RecipeError, match="no bundled manual"):
        bundled().manual("manuals/nope.md")
    for path in ("../pyproject.toml", "/etc/passwd.md", "manuals/../../README.md"):
        with pytest.raises(RecipeError, match="not a relative .md path"):
            bundled().manual(path)
