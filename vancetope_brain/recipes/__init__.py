"""Recipes: the catalogue of named, validated configurations of an engine (think-engines §2,
§7a, §7b) — bundled, tenant and project definitions of every kind, resolved and administered.

Rule: recipes are data. The documents (``Recipe``, ``Strategy``, ``WorkflowTemplate``, the
``AppliedRecipe`` snapshot a process gets at spawn) and the bounded Jinja2 sandbox their
templates are checked and rendered in are value types in ``vancetope_brain.models``; this
package loads the bundled YAML (errors name the file and the field), resolves a name over
the levels and writes definitions through the ``RecipeStore`` port. It imports no engine:
engine names are checked against the registry, which the composition roots hand to
``RecipeAdmin`` (a write) and the spawner (a spawn).
"""

from vancetope_brain.recipes.loader import BundledRecipes, bundled, dump_recipe, parse_recipe
from vancetope_brain.recipes.manage import RecipeAdmin
from vancetope_brain.recipes.resolver import CatalogEntry, RecipeResolver, effective_tools

__all__ = [
    "BundledRecipes", "CatalogEntry", "RecipeAdmin", "RecipeResolver", "bundled", "dump_recipe",
    "effective_tools", "parse_recipe",
]
