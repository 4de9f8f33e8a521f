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
from vancetope_brain.runtime import Backend, Core, Operations
from vancetope_brain.services import DocumentService
from vancetope_brain.services.documents import EnqueueIndex
from vancetope_brain.services.inspector import InspectorService
from vancetope_brain.services.usage import UsageService
from vancetope_brain.tools.client import ClientToolBridge
from vancetope_brain.webhooks import WebhookService


@dataclass(frozen=True)
class Gateway(Core):
    identity: IdentityService
    recipe_admin: RecipeAdmin
    client_tools: ClientToolBridge
    documents: DocumentService
    operations: Operations
    """The operators' door's parts (``admin_api.py``)."""
    usage: UsageService
    inspections: InspectorService
    """The inspector's turn records (``turn-list`` / ``turn-get``, ``/admin/``)."""
    webhooks: WebhookService
    """Webhook subscriptions and their delivery logs (``webhook-*``); sending is the workers'."""


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
                   operations=Operations.on(core["store"]),
                   usage=UsageService.on(core["store"], core["settings"]),
                   inspections=InspectorService.on(core["store"]),
                   webhooks=WebhookService.on(core["store"], config))
