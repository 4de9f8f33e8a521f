"""The catalogued definition kinds: one registration each (model, bundled folder, the YAML
keys that lead a dump). Store, resolver, admin, protocol frames and admin CLI are generic over
them; adding a kind is one ``register_kind`` line here."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models.recipe import Definition, Recipe
from vancetope_brain.models.strategy import Strategy
from vancetope_brain.models.workflow_template import WorkflowTemplate
from vancetope_brain.recipes.loader import BundledDefinitions, bundled

D = TypeVar("D", bound=Definition)


@dataclass(frozen=True)
class DefinitionKind(Generic[D]):
    model: type[D]
    directory: str
    """Where the bundled ones live inside the ``recipes`` package (``""``: its top level)."""
    lead: tuple[str, ...] = ("name",)
    """The keys that come first in a YAML dump."""

    @property
    def name(self) -> str:
        return self.model.KIND


KINDS: dict[str, DefinitionKind[Any]] = {}


def register_kind(kind: DefinitionKind[Any]) -> None:
    if kind.name in KINDS:
        raise ValueError(f"definition kind {kind.name!r} is registered twice")
    KINDS[kind.name] = kind


def kind_of(model: type[D]) -> DefinitionKind[D]:
    return KINDS[model.KIND]


def kind_named(name: str) -> DefinitionKind[Any]:
    try:
        return KINDS[name]
    except KeyError:
        raise InvalidInput(f"no definition kind {name!r}; kinds: {', '.join(KINDS)}") from None


@functools.cache
def bundled_of(model: type[D]) -> BundledDefinitions[D]:
    """The process-wide bundled catalogue of a kind (read from package data on first use)."""
    if model is Recipe:
        return bundled()  # type: ignore[return-value]
    return BundledDefinitions(model, kind_of(model).directory)


register_kind(DefinitionKind(Recipe, "", ("name", "engine")))
register_kind(DefinitionKind(Strategy, "strategies"))
register_kind(DefinitionKind(WorkflowTemplate, "templates"))
