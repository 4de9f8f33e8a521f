"""Definition frames: list, create, replace and delete a tenant's (or a project's) recipes,
and likewise every other definition kind (``strategy-list``, ``template-create``, …). Any
user of the tenant manages its definitions, as in v1 of the spec."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from pydantic import Field, create_model

from vancetope_brain.models.base import Wire
from vancetope_brain.models.recipe import Recipe
from vancetope_brain.recipes import RecipeAdmin
from vancetope_brain.recipes.kinds import KINDS, DefinitionKind
from vancetope_brain.recipes.loader import definition_from_mapping, recipe_from_mapping
from vancetope_gateway.handlers.declare import Context, Frame, Id, declare, frame


class RecipeList(Wire):
    """The effective recipe catalogue (project → tenant → bundled): per name the innermost
    recipe with its ``source`` and the outer levels it ``shadows``."""

    project_id: str | None = Field(default=None, min_length=1, max_length=64)


class RecipeWrite(Wire):
    """Create (``recipe-create``) or replace (``recipe-update``) a recipe of the caller's
    tenant, or of one of its projects with ``projectId``. ``recipe`` is the recipe document
    (the fields of a recipe YAML file); running processes keep the snapshot they got."""

    project_id: str | None = Field(default=None, min_length=1, max_length=64)
    recipe: dict[str, Any]


class RecipeDelete(Wire):
    """Delete the recipe stored at this level (tenant, or ``projectId``); outer ones show
    again."""

    project_id: str | None = Field(default=None, min_length=1, max_length=64)
    name: str = Id


class RecipesListed(Wire):
    """Reply to ``recipe-list``: each recipe document with ``source`` and ``shadows``."""

    recipes: list[dict[str, Any]]


class RecipeStored(Wire):
    """Reply to ``recipe-create`` / ``recipe-update``: the recipe as stored."""

    project_id: str | None = None
    recipe: dict[str, Any]


class RecipeDeleted(Wire):
    """Reply to ``recipe-delete``."""

    project_id: str | None = None
    name: str


@frame("recipe-list")
def recipe_list(conn: Context, data: RecipeList) -> RecipesListed:
    conn.gateway.recipe_admin.check_project(conn.who.tenant_id, data.project_id)
    return RecipesListed(recipes=[
        e.describe() for e in conn.gateway.recipes.list(conn.who.tenant_id, data.project_id)])


@frame("recipe-create")
def recipe_create(conn: Context, data: RecipeWrite) -> RecipeStored:
    return _recipe_write(conn, data, RecipeAdmin.create)


@frame("recipe-update")
def recipe_update(conn: Context, data: RecipeWrite) -> RecipeStored:
    return _recipe_write(conn, data, RecipeAdmin.update)


@frame("recipe-delete")
def recipe_delete(conn: Context, data: RecipeDelete) -> RecipeDeleted:
    conn.gateway.recipe_admin.delete(conn.who.tenant_id, data.project_id, data.name)
    return RecipeDeleted(project_id=data.project_id, name=data.name)


def _recipe_write(conn: Context, data: RecipeWrite,
                  write: Callable[[RecipeAdmin, str, str | None, Recipe], None]) -> RecipeStored:
    recipe = recipe_from_mapping(data.recipe, "recipe")
    write(conn.gateway.recipe_admin, conn.who.tenant_id, data.project_id, recipe)
    return RecipeStored(project_id=data.project_id, recipe=recipe.dump())


# ── the other definition kinds: their models and frames follow from the kind ──

def _model(model_name: str, doc: str, /, **fields: Any) -> type[Wire]:
    return cast(type[Wire], create_model(model_name, __base__=Wire, __doc__=doc, **fields))


def _declare_kind(name: str, kind: DefinitionKind[Any]) -> None:
    """The ``<kind>-list/-create/-update/-delete`` frames of a definition kind other than
    recipes (e.g. ``strategy-create`` with data ``{projectId?, strategy}``)."""
    title, plural = name.title(), kind.model.COLLECTION
    scope: Any = (str | None, Field(default=None, min_length=1, max_length=64))
    listing = _model(f"{title}List", f"The effective {name} catalogue (project → tenant → "
                     f"bundled): per name the innermost {name} with its ``source`` and the "
                     "outer levels it ``shadows``.", project_id=scope)
    write = _model(f"{title}Write", f"Create (``{name}-create``) or replace (``{name}-update``)"
                   f" a {name} of the caller's tenant, or of one of its projects with "
                   f"``projectId``. ``{name}`` is the document (the fields of a {name} YAML "
                   "file), validated before it is stored; running processes keep their "
                   "snapshot.", project_id=scope, **{name: (dict[str, Any], ...)})
    delete = _model(f"{title}Delete", f"Delete the {name} stored at this level (tenant, or "
                    "``projectId``); outer ones show again.", project_id=scope,
                    name=(str, Field(min_length=1, max_length=64)))
    listed = _model(f"{plural.title()}Listed", f"Reply to ``{name}-list``: each {name} "
                    "document with ``source`` and ``shadows``.",
                    **{plural: (list[dict[str, Any]], ...)})
    stored = _model(f"{title}Stored", f"Reply to ``{name}-create`` / ``{name}-update``: the "
                    f"{name} as stored.", project_id=(str | None, None),
                    **{name: (dict[str, Any], ...)})
    deleted = _model(f"{title}Deleted", f"Reply to ``{name}-delete``.",
                     project_id=(str | None, None), name=(str, ...))
    for verb, request, reply in (("list", listing, listed), ("create", write, stored),
                                 ("update", write, stored), ("delete", delete, deleted)):
        declare(Frame(f"{name}-{verb}", request, reply,
                      functools.partial(_definition_frame, kind, name, verb, reply)))


def _definition_frame(kind: DefinitionKind[Any], name: str, verb: str, reply: type[Wire],
                      conn: Context, data: Any) -> Wire:
    admin = conn.gateway.recipe_admin.of(kind.model)
    tenant, project = conn.who.tenant_id, data.project_id
    if verb == "list":
        admin.check_project(tenant, project)
        return reply.model_validate({kind.model.COLLECTION: [
            e.describe() for e in conn.gateway.recipes.of(kind.model).list(tenant, project)]})
    if verb == "delete":
        admin.delete(tenant, project, data.name)
        return reply.model_validate({"projectId": project, "name": data.name})
    definition = definition_from_mapping(kind.model, getattr(data, name), name)
    (admin.create if verb == "create" else admin.update)(tenant, project, definition)
    return reply.model_validate({"projectId": project, name: definition.dump()})


for _name, _kind in KINDS.items():
    if _name != "recipe":  # recipes have their own frames above
        _declare_kind(_name, _kind)
