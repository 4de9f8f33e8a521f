"""Building a process from a recipe or an engine name (think-engines §2, arthur-engine §3.5)."""

from __future__ import annotations

from typing import Any

from vancetope_brain.engines.base import EngineRegistry, canonical
from vancetope_brain.models import ThinkProcess, new_id
from vancetope_brain.recipes.resolver import RecipeResolver

TOP_LEVEL_VARIANT = "chat"
SUB_VARIANT = "sub"


class ProcessFactory:
    """Resolves the recipe (project → tenant → bundled, or the engine-name convention) and
    returns a new, unsaved process carrying the recipe's snapshot.

    The spawner, not the engine, knows the spawn context (think-engines §7a): a spawn that
    names only an engine gets the variant recipe ``<engine>-chat`` when nobody spawns it (a
    session's chat process, a client's ``process-create``) and ``<engine>-sub`` when a
    process spawns it, if such a recipe exists and runs that engine; else the recipe
    ``<engine>`` (else the engine's bare defaults).
    """

    def __init__(self, resolver: RecipeResolver, engines: EngineRegistry) -> None:
        self.resolver = resolver
        self._engines = engines

    def build(self, *, tenant_id: str, project_id: str, session_id: str, user_id: str,
              recipe: str | None = None, engine: str | None = None, name: str = "",
              goal: str = "", params: dict[str, Any] | None = None,
              parent: ThinkProcess | None = None) -> ThinkProcess:
        # An alias names its engine's recipe too (``deep-think`` spawns like ``marvin``).
        engine = None if engine is None else canonical(engine)
        if recipe is None and engine is not None:
            recipe = self.resolver.variant(tenant_id, project_id, engine,
                                           SUB_VARIANT if parent else TOP_LEVEL_VARIANT)
        applied = self.resolver.resolve(tenant_id, project_id, recipe=recipe, engine=engine,
                                        caller_params=params)
        found = self._engines.get(applied.engine)
        return ThinkProcess(
            id=new_id("proc"), tenant_id=tenant_id, session_id=session_id, user_id=user_id,
            project_id=project_id, parent_process_id=parent.id if parent else None,
            name=name or applied.name, goal=goal, engine=found.name,
            engine_version=found.version, recipe_name=applied.name,
            recipe=applied.model_dump(mode="json", by_alias=True),
            engine_params=dict(applied.params))

    def child(self, parent: ThinkProcess, *, recipe: str | None, engine: str | None, name: str,
              goal: str, params: dict[str, Any] | None) -> ThinkProcess:
        return self.build(tenant_id=parent.tenant_id, project_id=parent.project_id,
                          session_id=parent.session_id, user_id=parent.user_id, recipe=recipe,
                          engine=engine, name=name, goal=goal, params=params, parent=parent)
