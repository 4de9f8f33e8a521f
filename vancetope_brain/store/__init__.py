"""Persistence: small ports, one per capability, and their adapters (SQLite, MongoDB).

Rule: the only package that touches a database. Callers use a port's methods,
never a connection, and take only the ports they use. Every method takes the
tenant except the named system queries (``list_tenants``, ``token_by_hash``,
``stale_pending``, ``stale_event_processes``, ``redeliver_inbox_messages``,
``queued_deliveries``, ``claim_deliveries``, ``due_tool_health``, ``list_audit`` of every
tenant, ``due_schedules``, ``unstarted_runs``).
Every adapter passes its port's folder of ``tests/store_contract/`` unchanged.

Layout: one module per port (its ABC, whose docstrings are the contract),
``backend.py`` (``Backend``, the adapter registry, ``open_store``), and one
package per backend (``sqlite/``, ``mongo/``) holding one adapter module per
port, named like the port's module, whose docstring says what is atomic and how.
"""

from vancetope_brain.store.audit import AuditStore
from vancetope_brain.store.backend import Backend, Port, open_store
from vancetope_brain.store.dead_letters import DeadLetterStore
from vancetope_brain.store.deliveries import DeliveryStore
from vancetope_brain.store.documents import DocumentStore
from vancetope_brain.store.event_outbox import EventOutboxStore
from vancetope_brain.store.identity import IdentityStore
from vancetope_brain.store.inspector import InspectorStore
from vancetope_brain.store.journal import JournalStore
from vancetope_brain.store.lanes import LaneStore
from vancetope_brain.store.memory import MemoryStore
from vancetope_brain.store.recipes import RecipeStore
from vancetope_brain.store.retention import RetentionStore
from vancetope_brain.store.schedules import ScheduleStore
from vancetope_brain.store.session_search import SessionSearch
from vancetope_brain.store.sessions import SessionStore
from vancetope_brain.store.settings import SettingStore
from vancetope_brain.store.timers import TimerStore
from vancetope_brain.store.tool_health import ToolHealthStore
from vancetope_brain.store.transfer import TransferStore
from vancetope_brain.store.usage import UsageStore
from vancetope_brain.store.user_inbox import UserInboxStore
from vancetope_brain.store.vectors import DocumentVectors
from vancetope_brain.store.webhooks import WebhookStore

__all__ = ["AuditStore", "Backend", "DeadLetterStore", "DeliveryStore", "DocumentStore", "DocumentVectors",
           "EventOutboxStore", "IdentityStore", "InspectorStore", "JournalStore", "LaneStore", "MemoryStore", "Port",
           "RecipeStore", "RetentionStore", "ScheduleStore", "SessionSearch", "SessionStore", "SettingStore",
           "TimerStore", "ToolHealthStore", "TransferStore", "UsageStore", "UserInboxStore", "WebhookStore",
           "open_store"]
