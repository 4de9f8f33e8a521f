"""Building a process from a recipe or an engine name (think-engines §2, arthur-engine §3.5)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vancetope_brain.engines.base import EngineRegistry, canonical
from vancetope_brain.errors import Conflict, LimitExceeded
from vancetope_brain.models import ProcessStatus, ThinkProcess, new_id
from vancetope_brain.models.recipe import RecipeCategory
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

    Every process is built here, whoever creates it (a client, a session's chat, an engine's
    spawn), so this is where a session's cap of open processes holds: ``build`` is given the
    session's processes so far (stored and spawned earlier in the same turn) and refuses
    one more than ``max_open_per_session`` that are not CLOSED. Creations racing each other
    (in different lanes of one session) may each pass it.

    A ``service`` recipe (think-engines §7b) is started only by the system
    (``vancetope_brain.services``, which passes ``service=True``); a client or an engine
    naming one is refused, as is the system naming anything else.
    """

    def __init__(self, resolver: RecipeResolver, engines: EngineRegistry, *,
                 max_open_per_session: int = 64) -> None:
        self.resolver = resolver
        self._engines = engines
        self.max_open_per_session = max_open_per_session

    def build(self, *, tenant_id: str, project_id: str, session_id: str, user_id: str,
              siblings: Iterable[ThinkProcess], recipe: str | None = None,
              engine: str | None = None, name: str = "", goal: str = "",
              params: dict[str, Any] | None = None,
              parent: ThinkProcess | None = None, service: bool = False,
              originating_user_id: str | None = None,
              originating_session_id: str | None = None,
              process_id: str | None = None) -> ThinkProcess:
        """A new process of the session (its id ``process_id``, else a new one), whose
        processes so far are ``siblings``; raises
        ``LimitExceeded`` when ``max_open_per_session`` of them are not CLOSED, and
        ``Conflict`` when ``service`` and the recipe's category disagree."""
        open_now = sum(1 for p in siblings if p.status is not ProcessStatus.CLOSED)
        if open_now >= self.max_open_per_session:
            raise LimitExceeded(f"session {session_id!r} has {open_now} open processes, the "
                                f"most it may have; stop one first")
        if engine is not None:
            # Checked first: a name that is no engine's is refused as such (naming the
            # engines), not later as a malformed recipe name.
            self._engines.get(engine)
            # An alias names its engine's recipe too (``deep-think`` spawns like ``marvin``).
            engine = canonical(engine)
        if recipe is None and engine is not None:
            recipe = self.resolver.variant(tenant_id, project_id, engine,
                                           SUB_VARIANT if parent else TOP_LEVEL_VARIANT)
        applied = self.resolver.resolve(tenant_id, project_id, recipe=recipe, engine=engine,
                                        caller_params=params)
        if (applied.category is RecipeCategory.SERVICE) != service:
            raise Conflict(
                f"recipe {applied.name!r} is a service recipe; only the system starts it "
                "(in a hidden system session)" if not service else
                f"recipe {applied.name!r} is no service recipe (category "
                f"{applied.category.value!r}); the system starts only 'service' recipes")
        found = self._engines.get(applied.engine)
        return ThinkProcess(
            id=process_id or new_id("proc"), tenant_id=tenant_id, session_id=session_id,
            user_id=user_id,
            project_id=project_id, parent_process_id=parent.id if parent else None,
            name=name or applied.name, goal=goal, engine=found.name,
            engine_version=found.version, recipe_name=applied.name,
            recipe=applied.model_dump(mode="json", by_alias=True),
            engine_params=dict(applied.params), originating_user_id=originating_user_id,
            originating_session_id=originating_session_id)

    def child(self, parent: ThinkProcess, *, siblings: Iterable[ThinkProcess],
              recipe: str | None, engine: str | None, name: str, goal: str,
              params: dict[str, Any] | None) -> ThinkProcess:
        return self.build(tenant_id=parent.tenant_id, project_id=parent.project_id,
                          session_id=parent.session_id, user_id=parent.user_id,
                          siblings=siblings, recipe=recipe,
                          engine=engine, name=name, goal=goal, params=params, parent=parent)
