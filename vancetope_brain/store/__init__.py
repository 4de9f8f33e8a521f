"""Persistence: small ports, one per capability, and their adapters (SQLite, MongoDB).

Rule: the only package that touches a database. Callers use a port's methods,
never a connection, and take only the ports they use. Every method takes the
tenant except the named system queries (``list_tenants``, ``token_by_hash``,
``stale_pending``, ``redeliver_inbox_messages``, ``queued_deliveries``).
Every adapter passes its port's folder of ``tests/store_contract/`` unchanged.
"""

from vancetope_brain.store.backend import Backend, Port, open_store
from vancetope_brain.store.deliveries import DeliveryStore
from vancetope_brain.store.identity import IdentityStore
from vancetope_brain.store.lanes import LaneStore
from vancetope_brain.store.recipes import RecipeStore
from vancetope_brain.store.sessions import SessionStore
from vancetope_brain.store.settings import SettingStore
from vancetope_brain.store.user_inbox import UserInboxStore

__all__ = ["Backend", "DeliveryStore", "IdentityStore", "LaneStore", "Port", "RecipeStore",
           "SessionStore", "SettingStore", "UserInboxStore", "open_store"]
