"""Recipes: named, validated configurations of an engine (think-engines §2, §7a, §7b).

Rule: recipes are data. YAML is validated into ``Recipe`` at load (errors
name the file and the field), prompts are Jinja2 templates rendered in an
immutable sandbox with ``StrictUndefined``, and a process gets an
``AppliedRecipe`` snapshot at spawn. This package reads the store only
through the ``RecipeStore`` port and imports no engine: engine names are checked
against the registry, which the composition roots hand to ``RecipeAdmin`` (a write)
and the spawner (a spawn).
"""

from vancetope_brain.recipes.loader import BundledRecipes, bundled, dump_recipe, parse_recipe
from vancetope_brain.recipes.manage import RecipeAdmin
from vancetope_brain.recipes.model import AppliedRecipe, Recipe, RecipeCategory, RecipeSource
from vancetope_brain.recipes.render import (
    PromptContext,
    RenderedPrompts,
    render_prompts,
    sample_context,
)
from vancetope_brain.recipes.resolver import CatalogEntry, RecipeResolver, effective_tools

__all__ = [
    "AppliedRecipe", "BundledRecipes", "CatalogEntry", "PromptContext", "Recipe", "RecipeAdmin",
    "RecipeCategory", "RecipeResolver", "RecipeSource", "RenderedPrompts", "bundled",
    "dump_recipe", "effective_tools", "parse_recipe", "render_prompts", "sample_context",
]
