"""The gateway's composition root: what the front door of one OS process needs.

Sessions, their lifecycle, the Inbox, identity, events, presence, knowledge documents, the
operators' door (audit log, dead letters, tool health, system sessions) and
the Celery producers (``enqueue`` of lane tasks, ``enqueue_index`` of ingestion jobs) — never the worker's runtime (lane runner, leases,
contexts, tools, LLM), which ``workers.parts`` builds.
"""

from __future__ import annotations

from dataclasses import dataclass

from vancetope_brain.config import Config
from vancetope_brain.engines import ENGINES
from vancetope_brain.identity import IdentityService
from vancetope_brain.lanes.waker import Enqueue
from vancetope_brain.recipes import RecipeAdmin
from vancetope_brain.runtime import Backend, Core
from vancetope_brain.services import AuditLog, DocumentService
from vancetope_brain.services.documents import EnqueueIndex
from vancetope_brain.store import DeadLetterStore, SessionStore, ToolHealthStore
from vancetope_brain.tools.client import ClientToolBridge
from vancetope_brain.tools.health import ToolHealthService


@dataclass(frozen=True)
class Gateway(Core):
    identity: IdentityService
    recipe_admin: RecipeAdmin
    client_tools: ClientToolBridge
    documents: DocumentService
    # The operators' door (/admin/, ``admin_api.py``): what the admin CLI's
    # ``Administration`` uses for the same actions.
    audit: AuditLog
    dead_letters: DeadLetterStore
    tool_health: ToolHealthService
    session_store: SessionStore


def build_gateway(config: Config, enqueue: Enqueue, *, enqueue_index: EnqueueIndex,
                  store: Backend | None = None) -> Gateway:
    """``enqueue_index`` puts a document's ingestion job on the workers' queue."""
    core = Core.parts(config, enqueue, store=store)
    return Gateway(**core, identity=IdentityService.on(core["store"]),
                   # Recipes written over the protocol are a tenant's users': no engine roles.
                   recipe_admin=RecipeAdmin.on(core["store"], config.max_definitions,
                                               engine=ENGINES.get),
                   client_tools=ClientToolBridge(core["redis"], core["events"]),
                   documents=DocumentService.on(core["store"], config.attachments_dir,
                                                core["events"], enqueue_index),
                   audit=AuditLog.on(core["store"]),
                   dead_letters=core["store"].port(DeadLetterStore),
                   tool_health=ToolHealthService(core["store"].port(ToolHealthStore)),
                   session_store=core["store"].port(SessionStore))
