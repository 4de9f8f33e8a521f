"""The Store port and its adapters (SQLite, MongoDB).

Rule: the only module that touches a database. Callers use ``Store``'s
methods, never a connection. Every method takes the tenant except the two
named system queries (``token_by_hash``, ``stale_pending``). Adapters pass
``tests/store_contract/`` unchanged.
"""

from vancetope_brain.store.base import Store, open_store

__all__ = ["Store", "open_store"]
