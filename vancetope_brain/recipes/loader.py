"""Reading definitions (recipes, strategies, …): YAML text → the kind's validated model, and
the bundled catalogue of each kind (package data).

Every error is a ``RecipeError`` whose message starts with where the document
came from and the field path, e.g. ``recipes/analyze.yaml: allowedToolsAdd.0:
Input should be a valid string``.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Generic, TypeVar

import yaml
from pydantic import ValidationError

from vancetope_brain.errors import LimitExceeded, RecipeError
from vancetope_brain.models.recipe import KEBAB, Definition, Recipe

D = TypeVar("D", bound=Definition)

BUNDLED_PACKAGE = "recipes"
"""The top-level package holding bundled recipe YAML and manuals."""

MAX_DEFINITION_BYTES = 256 * 1024
"""Largest definition document (recipe, strategy, template): its YAML text, and the record
stored for it (its JSON dump), in UTF-8 bytes."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice (the last one would silently win), and anchors
    and aliases: a few hundred bytes of nested aliases expand to gigabytes (a "billion
    laughs"), and a definition has no use for them."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            what = f"*{event.anchor}" if isinstance(event, yaml.AliasEvent) else \
                f"&{event.anchor}"
            raise yaml.composer.ComposerError(
                None, None, f"YAML anchors and aliases ({what}) are not allowed in definitions",
                event.start_mark)
        return super().compose_node(parent, index)  # type: ignore[no-untyped-call]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _field_errors(where: str, error: ValidationError, kind: str = Recipe.KIND) -> RecipeError:
    lines = []
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"]) or f"({kind})"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "string_pattern_mismatch" and item["ctx"]["pattern"] == KEBAB:
            message = f"{item['input']!r} is not lowercase-kebab (e.g. 'deep-analysis')"
        elif item["type"] == "extra_forbidden":
            message = "unknown field"
        if not item["loc"] and re.match(r"[\w.]+: ", message):  # names its field itself
            lines.append(f"{where}: {message}")
            continue
        lines.append(f"{where}: {path}: {message}")
    return RecipeError("; ".join(lines))


def definition_from_mapping(kind: type[D], raw: Any, where: str) -> D:
    """Validate parsed YAML (or a stored document) as a ``kind``; ``where`` prefixes errors."""
    if not isinstance(raw, dict):
        raise RecipeError(f"{where}: a {kind.KIND} is a mapping of fields, not "
                          f"{type(raw).__name__}")
    version = raw.get("schemaVersion", 1)
    if isinstance(version, int) and version > kind.SCHEMA_VERSION:
        raise RecipeError(f"{where}: schemaVersion {version} is newer than this server's "
                          f"{kind.SCHEMA_VERSION}; upgrade the server")
    try:
        return kind.model_validate(kind.upgrade(dict(raw)))
    except ValidationError as e:
        raise _field_errors(where, e, kind.KIND) from e


def recipe_from_mapping(raw: Any, where: str) -> Recipe:
    """Validate parsed YAML (or a stored document) as a recipe; ``where`` prefixes errors."""
    return definition_from_mapping(Recipe, raw, where)


def parse_definition(kind: type[D], text: str, where: str) -> D:
    """One ``kind`` document from YAML text. Raises ``LimitExceeded`` for a text over
    ``MAX_DEFINITION_BYTES``, ``RecipeError`` for anything else wrong with it."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_DEFINITION_BYTES:
        raise LimitExceeded(f"{where}: {size:,} bytes; a {kind.KIND} has at most "
                            f"{MAX_DEFINITION_BYTES:,}")
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise RecipeError(f"{where}: {at}{problem}") from e
    return definition_from_mapping(kind, raw, where)


def parse_recipe(text: str, where: str) -> Recipe:
    """One recipe from YAML text."""
    return parse_definition(Recipe, text, where)


def dump_definition(definition: Definition, first: tuple[str, ...] = ("name",)) -> str:
    """The document as YAML (camelCase, empty fields left out), readable by
    ``parse_definition``; the ``first`` keys lead."""
    raw = definition.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    raw = {**{key: raw.pop(key) for key in first if key in raw}, **raw}
    return yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=100)


def dump_recipe(recipe: Recipe) -> str:
    """The recipe as YAML (camelCase, empty fields left out), readable by ``parse_recipe``."""
    return dump_definition(recipe, ("name", "engine"))


class BundledDefinitions(Generic[D]):
    """The documents of one kind shipped in the ``recipes`` package: ``<name>.yaml`` each in
    ``directory`` (``""``: the package's top level), loaded once. The file name must equal the
    document's name."""

    def __init__(self, kind: type[D], directory: str = "",
                 root: Traversable | None = None) -> None:
        self.kind = kind
        self._directory = directory
        self._root = root if root is not None else resources.files(BUNDLED_PACKAGE)

    @functools.cached_property
    def definitions(self) -> dict[str, D]:
        folder = self._root.joinpath(self._directory) if self._directory else self._root
        if not folder.is_dir():
            return {}
        prefix = "/".join(p for p in (BUNDLED_PACKAGE, self._directory) if p)
        found: dict[str, D] = {}
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".yaml"):
                continue
            where = f"{prefix}/{entry.name}"
            definition = parse_definition(self.kind, entry.read_text(encoding="utf-8"), where)
            if definition.name != entry.name.removesuffix(".yaml"):
                raise RecipeError(f"{where}: name: {definition.name!r} does not match the "
                                  "file name")
            found[definition.name] = definition
        return found

    def get(self, name: str) -> D | None:
        return self.definitions.get(name)


class BundledRecipes(BundledDefinitions[Recipe]):
    """The bundled recipes (``recipes/<name>.yaml``). ``manual`` reads a manual by its path
    relative to the package (``manualPaths``), refusing anything outside it."""

    def __init__(self, root: Traversable | None = None) -> None:
        super().__init__(Recipe, "", root)

    @property
    def recipes(self) -> dict[str, Recipe]:
        return self.definitions

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
