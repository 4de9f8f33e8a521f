"""MongoDB memory: the scope counter that holds the cap without transactions. A crash between
taking a slot and inserting the entry leaves the counter one too high; at the cap it is
recounted from the entries, so the slot comes back (SQLite writes both in one transaction)."""

from __future__ import annotations

from collections.abc import Iterator

import mongomock
import pytest

from tests.store_contract.memory._entries import entry
from vancetope_brain.errors import Conflict, MemoryFull
from vancetope_brain.store import MemoryStore
from vancetope_brain.store.mongo import MongoBackend


@pytest.fixture
def mongo() -> Iterator[MongoBackend]:
    backend = MongoBackend.from_client(mongomock.MongoClient(tz_aware=True), "vancetope_test")
    yield backend
    backend.close()


def _counter(backend: MongoBackend) -> dict[str, int]:
    raw = backend.database["memory_scopes"].find_one(
        {"_id": {"tenantId": "ten_a", "scope": "project", "scopeId": "default"}})
    assert raw is not None
    return {"entries": raw["entries"], "terms": raw["terms"]}


def test_a_slot_lost_in_a_crash_comes_back_at_the_cap(mongo: MongoBackend) -> None:
    memory = mongo.port(MemoryStore)
    memory.record(entry("one two three"), limit=2)
    # The crash: a slot taken, no entry inserted.
    mongo.database["memory_scopes"].update_one({}, {"$inc": {"entries": 1, "terms": 7}})
    assert _counter(mongo) == {"entries": 2, "terms": 10}
    healed = entry("four five", minute=1)
    assert memory.record(healed, limit=2) == (healed, True)
    assert _counter(mongo) == {"entries": 2, "terms": 5}
    with pytest.raises(MemoryFull):
        memory.record(entry("six", minute=2), limit=2)
    assert _counter(mongo) == {"entries": 2, "terms": 5}


def test_a_failed_insert_gives_its_slot_back(mongo: MongoBackend) -> None:
    memory = mongo.port(MemoryStore)
    note = entry("one two")
    memory.record(note)
    with pytest.raises(Conflict, match="exists"):
        memory.record(note)
    assert _counter(mongo) == {"entries": 1, "terms": 2}
    memory.delete_memory("ten_a", note.id)
    assert _counter(mongo) == {"entries": 0, "terms": 0}
