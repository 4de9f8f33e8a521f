"""Reading recipes: YAML text → validated ``Recipe``, and the bundled catalogue (package data).

Every error is a ``RecipeError`` whose message starts with where the recipe
came from and the field path, e.g. ``recipes/analyze.yaml: allowedToolsAdd.0:
Input should be a valid string``.
"""

from __future__ import annotations

import functools
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import yaml
from pydantic import ValidationError

from vancetope_brain.errors import RecipeError
from vancetope_brain.recipes.model import KEBAB, Recipe

BUNDLED_PACKAGE = "recipes"
"""The top-level package holding bundled recipe YAML and manuals."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice (the last one would silently win)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _field_errors(where: str, error: ValidationError) -> RecipeError:
    lines = []
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"]) or "(recipe)"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "string_pattern_mismatch" and item["ctx"]["pattern"] == KEBAB:
            message = f"{item['input']!r} is not lowercase-kebab (e.g. 'deep-analysis')"
        elif item["type"] == "extra_forbidden":
            message = "unknown field"
        lines.append(f"{where}: {path}: {message}")
    return RecipeError("; ".join(lines))


def recipe_from_mapping(raw: Any, where: str) -> Recipe:
    """Validate parsed YAML (or a stored document) as a recipe; ``where`` prefixes errors."""
    if not isinstance(raw, dict):
        raise RecipeError(f"{where}: a recipe is a mapping of fields, not "
                          f"{type(raw).__name__}")
    version = raw.get("schemaVersion", 1)
    if isinstance(version, int) and version > Recipe.SCHEMA_VERSION:
        raise RecipeError(f"{where}: schemaVersion {version} is newer than this server's "
                          f"{Recipe.SCHEMA_VERSION}; upgrade the server")
    try:
        return Recipe.model_validate(Recipe.upgrade(dict(raw)))
    except ValidationError as e:
        raise _field_errors(where, e) from e


def parse_recipe(text: str, where: str) -> Recipe:
    """One recipe from YAML text."""
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise RecipeError(f"{where}: {at}{problem}") from e
    return recipe_from_mapping(raw, where)


def dump_recipe(recipe: Recipe) -> str:
    """The recipe as YAML (camelCase, empty fields left out), readable by ``parse_recipe``."""
    raw = recipe.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    raw = {"name": raw.pop("name"), "engine": raw.pop("engine"), **raw}
    return yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=100)


class BundledRecipes:
    """The recipes shipped in the ``recipes`` package: ``<name>.yaml`` each, loaded once.

    The file name must equal the recipe's name. ``manual`` reads a manual by
    its path relative to the package (``manualPaths``), refusing anything
    outside it.
    """

    def __init__(self, root: Traversable | None = None) -> None:
        self._root = root if root is not None else resources.files(BUNDLED_PACKAGE)

    @functools.cached_property
    def recipes(self) -> dict[str, Recipe]:
        found: dict[str, Recipe] = {}
        for entry in sorted(self._root.iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".yaml"):
                continue
            where = f"{BUNDLED_PACKAGE}/{entry.name}"
            recipe = parse_recipe(entry.read_text(encoding="utf-8"), where)
            if recipe.name != entry.name.removesuffix(".yaml"):
                raise RecipeError(f"{where}: name: {recipe.name!r} does not match the file name")
            found[recipe.name] = recipe
        return found

    def get(self, name: str) -> Recipe | None:
        return self.recipes.get(name)

    def manual(self, path: str) -> str:
        """A bundled manual's Markdown. Raises ``RecipeError`` for a path outside the package
        or a missing file."""
        parts = path.split("/")
        if path.startswith("/") or not path.endswith(".md") or any(p in ("", ".", "..")
                                                                    for p in parts):
            raise RecipeError(f"manual path {path!r} is not a relative .md path in "
                              f"{BUNDLED_PACKAGE}/")
        entry = self._root.joinpath(*parts)
        if not entry.is_file():
            raise RecipeError(f"no bundled manual {path!r}")
        return entry.read_text(encoding="utf-8")


@functools.cache
def bundled() -> BundledRecipes:
    """The process-wide bundled catalogue (read from package data on first use)."""
    return BundledRecipes()
