"""Building the ThinkEngineContext of one lifecycle call from the runtime's parts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from vancetope_brain.engines.base import EngineRegistry
from vancetope_brain.engines.context import SpawnRequest, ThinkEngineContext
from vancetope_brain.engines.recipes_api import RecipesApi, tool_pool
from vancetope_brain.engines.spawning import ProcessFactory
from vancetope_brain.events import EventBus
from vancetope_brain.inbox.service import InboxService
from vancetope_brain.llm import ChatModel
from vancetope_brain.models import ThinkProcess
from vancetope_brain.settings import SettingsApi
from vancetope_brain.store import Store
from vancetope_brain.tools import ToolSource

ModelFor = Callable[[ThinkProcess], ChatModel]
ToolSourcesFor = Callable[[ThinkProcess], list[ToolSource]]


@dataclass
class ContextFactory:
    store: Store
    events: EventBus
    engines: EngineRegistry
    processes: ProcessFactory
    model_for: ModelFor
    tool_sources: ToolSourcesFor
    inbox: InboxService | None = None

    def __call__(self, process: ThinkProcess, lease_lost: threading.Event) -> ThinkEngineContext:
        engine = self.engines.find(process.engine)
        pool = tool_pool(process, engine.allowed_tools if engine else frozenset())
        recipes = RecipesApi(self.processes.resolver, process, pool)

        def spawn(parent: ThinkProcess, request: SpawnRequest) -> ThinkProcess:
            return self.processes.child(parent, recipe=request.recipe, engine=request.engine,
                                        name=request.name, goal=request.goal,
                                        params=request.params)

        return ThinkEngineContext(
            process=process, store=self.store, events=self.events,
            model=self.model_for(process), lease_lost=lease_lost,
            settings=SettingsApi.for_process(self.store, process), tool_pool=pool,
            roles=recipes.roles, tool_sources=self.tool_sources(process), spawner=spawn,
            recipes=recipes, inbox=self.inbox)
