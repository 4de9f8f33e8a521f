"""Building a process from a recipe or an engine name (think-engines §2, arthur-engine §3.5)."""

from __future__ import annotations

from typing import Any

from vancetope_brain.engines.base import EngineRegistry, canonical
from vancetope_brain.models import ThinkProcess, new_id
from vancetope_brain.recipes.resolver import RecipeResolver


class ProcessFactory:
    """Resolves the recipe (project → tenant → bundled, or the engine-name convention) and
    returns a new, unsaved process carrying the recipe's snapshot."""

    def __init__(self, resolver: RecipeResolver, engines: EngineRegistry) -> None:
        self.resolver = resolver
        self._engines = engines

    def build(self, *, tenant_id: str, project_id: str, session_id: str, user_id: str,
              recipe: str | None = None, engine: str | None = None, name: str = "",
              goal: str = "", params: dict[str, Any] | None = None,
              parent: ThinkProcess | None = None) -> ThinkProcess:
        # An alias names its engine's recipe too (``deep-think`` spawns like ``marvin``).
        applied = self.resolver.resolve(tenant_id, project_id, recipe=recipe,
                                        engine=None if engine is None else canonical(engine),
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
