"""Building the ThinkEngineContext of one lifecycle call from the runtime's parts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from vancetope_brain.engines.base import EngineRegistry, ThinkEngine
from vancetope_brain.engines.chat_cache import ChatCache
from vancetope_brain.engines.context import HealthWriter, SpawnRequest, ThinkEngineContext
from vancetope_brain.engines.memory_api import MemoryAccess
from vancetope_brain.engines.recipes_api import RecipesApi, tool_pool
from vancetope_brain.engines.spawning import ProcessFactory
from vancetope_brain.events import EventBus
from vancetope_brain.events.interrupts import Interrupts
from vancetope_brain.events.tokens import TokenCoalescer
from vancetope_brain.inbox.service import InboxService
from vancetope_brain.knowledge.retrieval import Retriever
from vancetope_brain.llm import ChatModel
from vancetope_brain.llm.profiles import ModelRouter
from vancetope_brain.models import InboxMessage, ThinkProcess
from vancetope_brain.settings import SettingsApi, SettingsService
from vancetope_brain.store import JournalStore, LaneStore, SessionStore
from vancetope_brain.tools import ToolSource

ModelFor = Callable[[ThinkProcess], ChatModel]
ToolSourcesFor = Callable[[ThinkProcess], list[ToolSource]]


@dataclass
class ContextFactory:
    lanes: LaneStore
    processes_store: SessionStore
    journal: JournalStore
    settings: SettingsService
    events: EventBus
    engines: EngineRegistry
    processes: ProcessFactory
    model_for: ModelFor
    tool_sources: ToolSourcesFor
    inbox: InboxService | None = None
    tool_health: HealthWriter | None = None
    tokens: TokenCoalescer | None = None
    """Coalesces the tokens of this process's turns (None: each is published at once)."""
    chat: ChatCache | None = None
    """The chat lines this worker process holds (None: every turn reads them)."""
    knowledge: Retriever | None = None
    """Searches the projects' documents (None: ``context.knowledge()`` finds nothing)."""
    memory: MemoryAccess | None = None
    """The memory entries (None: ``context.memory()`` finds nothing, records nothing)."""
    interrupts: Interrupts | None = None
    """Where a turn learns that its user stopped it (None: turns cannot be interrupted)."""
    secrets: frozenset[str] = frozenset()
    """What no inspector record shows (the LLM profiles' API keys: ``secrets_of``)."""

    def __call__(self, process: ThinkProcess, lease_lost: threading.Event,
                 engine: ThinkEngine | None, pending: list[InboxMessage]) -> ThinkEngineContext:
        """The context of one lifecycle call of ``process`` (run by ``engine``, found by the
        caller) whose inbox holds ``pending``, read by the caller for this turn."""
        pool = tool_pool(process, engine.allowed_tools if engine else frozenset())
        recipes = RecipesApi(self.processes.resolver, process, pool)

        def spawn(parent: ThinkProcess, request: SpawnRequest,
                  siblings: list[ThinkProcess]) -> ThinkProcess:
            return self.processes.child(parent, siblings=siblings, recipe=request.recipe,
                                        engine=request.engine,
                                        name=request.name, goal=request.goal,
                                        params=request.params)

        profile, model = self.model_for.route(process) \
            if isinstance(self.model_for, ModelRouter) else (None, self.model_for(process))
        context = ThinkEngineContext(
            process=process, lanes=self.lanes, processes=self.processes_store,
            events=self.events, journal=self.journal,
            model=model, lease_lost=lease_lost,
            settings=SettingsApi.for_process(self.settings, process), tool_pool=pool,
            roles=recipes.roles, tool_sources=self.tool_sources(process), spawner=spawn,
            recipes=recipes, inbox=self.inbox, tool_health=self.tool_health, pending=pending,
            tokens=self.tokens, knowledge=self.knowledge, memory=self.memory,
            interrupts=self.interrupts,
            read_chat=self.chat.reader(process.tenant_id, process.id) if self.chat else None)
        context.profile = profile
        return context
