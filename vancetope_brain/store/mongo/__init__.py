"""The MongoDB backend (pymongo; any pymongo-compatible client such as mongomock in tests).

Rule: only this package talks to the database. Each module below is the
adapter of one port (``lanes.py`` implements ``LaneStore``, and so on); it
takes its collections and creates its named indexes (``tenantId`` first for
every tenant query) when the backend opens. ``_codec.py`` is how documents are
stored. A record's ``_id`` is its id unless its adapter says otherwise.

MongoDB 4.2+ (pipeline updates), without multi-document transactions: every
write that must be atomic is one single-document operation, and each
adapter's docstring says which steps of a multi-step write are not, and how
a crash between them is recovered. Writes that span ports go through the
owning adapter's module-level function (``lanes.append_in``,
``sessions.insert_process``, ``journal.clear``) rather than repeating its queries.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from vancetope_brain.errors import StoreError
from vancetope_brain.store.backend import Adapter, Backend, Port, import_adapters
from vancetope_brain.store.mongo._codec import translated


class MongoAdapter(Adapter):
    """Base of the MongoDB adapters: each keeps its backend; a subclass's ``__init__``
    takes its collections from ``db.database`` and creates its indexes (idempotent)."""

    registry: ClassVar[dict[type[Port], type[Any]]] = {}

    def __init__(self, db: MongoBackend) -> None:
        self.db = db


class MongoBackend(Backend):
    """The ports on one MongoDB database."""

    adapters = MongoAdapter.registry

    def __init__(self, url: str | None = None, *, client: Any = None,
                 db_name: str | None = None) -> None:
        """Connect to ``url`` (``mongodb://host/db``) or use ``client`` (not closed by us)."""
        if (url is None) == (client is None):
            raise ValueError("pass exactly one of url and client")
        self._owns_client = client is None
        try:
            if client is None:
                client = MongoClient(url, tz_aware=True, serverSelectionTimeoutMS=10_000)
            self.client = client
            self.database = (client.get_default_database("vancetope") if db_name is None
                             else client[db_name])
            super().__init__()
        except PyMongoError as e:
            raise StoreError(f"cannot open MongoDB store: {e}") from e

    @classmethod
    def from_client(cls, client: Any, db_name: str) -> MongoBackend:
        """A backend over an existing client (e.g. ``mongomock.MongoClient()``)."""
        return cls(client=client, db_name=db_name)

    @translated
    def ping(self) -> None:
        self.database.command("ping")

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


import_adapters(__name__, __path__)
