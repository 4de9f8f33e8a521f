"""MongoDB ``MemoryStore``: collections ``memory_entries`` and ``memory_scopes``.

An entry is stored as its document plus ``terms`` (its distinct terms, a multikey index
``by_term`` with tenant and scope first: the lexical index; no ``$text``, whose tokenizer and
scores differ from SQLite's and which mongomock lacks) and ``length`` (its term count).
``memory_scopes`` holds one counter per scope, ``_id`` = ``{tenantId, scope, scopeId}``,
with ``entries`` and ``terms``: the cap's count and BM25's statistics.

Atomicity: the cap is a reservation, one conditional upsert of the scope's counter
(``entries < limit``; at the cap the upsert's insert meets the existing ``_id`` and fails),
so racing writers cannot pass it; then the entry is inserted, and the reservation given back
if that fails. A crash between the two leaves the counter one too high: when the counter
says full, it is recounted from the entries (a conditional set on the count it read), so a
lost slot comes back at the cap; writers racing exactly then may pass the cap by one each.
``delete`` removes the entry then decrements the counter (a crash between: the same
recount heals it). An idempotent record looks for its key first; two racing with one key
meet the unique index ``idempotency``, and the loser gives its slot back and returns the
winner's entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models.memory import (
    MAX_ENTRIES_PER_SCOPE,
    MemoryEntry,
    MemoryHit,
    MemoryKind,
    MemoryScope,
    ScopeRef,
    query_terms,
)
from vancetope_brain.store.memory import (
    MemoryStore,
    capped,
    checked_scopes,
    memory_full,
    rank,
)
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import STRING, from_bson, to_bson, translated

_NEWEST_FIRST = [("createdAt", DESCENDING), ("_id", DESCENDING)]
_OURS = ("terms", "length")


class MongoMemory(MongoAdapter, MemoryStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._entries = db.database["memory_entries"]
        self._scopes = db.database["memory_scopes"]
        scope = [("tenantId", ASCENDING), ("scope", ASCENDING), ("scopeId", ASCENDING)]
        self._entries.create_index([*scope, ("createdAt", DESCENDING), ("_id", DESCENDING)],
                                   name="by_scope")
        self._entries.create_index([*scope, ("terms", ASCENDING)], name="by_term")
        self._entries.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("idempotencyKey", ASCENDING)],
            name="idempotency", unique=True,
            partialFilterExpression={"idempotencyKey": STRING})

    @translated
    def record(self, entry: MemoryEntry, *,
               limit: int = MAX_ENTRIES_PER_SCOPE) -> tuple[MemoryEntry, bool]:
        first = self._first(entry)
        if first is not None:
            return first, False
        indexed = entry.indexed_terms()
        counter = _counter_id(entry.tenant_id, entry.scope_ref)
        self._reserve(entry, counter, len(indexed), limit)
        try:
            self._entries.insert_one(to_bson(entry, terms=sorted(set(indexed)),
                                             length=len(indexed)))
        except DuplicateKeyError as e:
            self._release(counter, len(indexed))
            first = self._first(entry)
            if first is None:
                raise Conflict(f"memory entry {entry.id} exists") from e
            return first, False
        except BaseException:
            self._release(counter, len(indexed))
            raise
        return entry, True

    @translated
    def get_memory(self, tenant_id: str, entry_id: str) -> MemoryEntry:
        raw = self._entries.find_one({"_id": entry_id, "tenantId": tenant_id})
        if raw is None:
            raise NotFound(f"memory entry {entry_id} not found")
        return _load(raw)

    @translated
    def list_memory(self, tenant_id: str, scopes: Sequence[ScopeRef], *, limit: int = 20,
                    kinds: Iterable[MemoryKind] | None = None) -> list[MemoryEntry]:
        asked, limit = checked_scopes(scopes), capped(limit)
        if not asked or limit == 0:
            return []
        query = _in_scopes(tenant_id, asked)
        if kinds is not None:
            query["kind"] = {"$in": sorted({MemoryKind(k).value for k in kinds})}
        return [_load(raw) for raw in
                self._entries.find(query).sort(_NEWEST_FIRST).limit(limit)]

    @translated
    def search_memory(self, tenant_id: str, scopes: Sequence[ScopeRef], query: str, *,
                      limit: int = 10) -> list[MemoryHit]:
        asked, wanted = checked_scopes(scopes), query_terms(query)
        if not asked or not wanted or capped(limit) == 0:
            return []
        entries = total = 0
        for counter in self._scopes.find(
                {"_id": {"$in": [_counter_id(tenant_id, scope) for scope in asked]}}):
            entries, total = entries + counter["entries"], total + counter["terms"]
        found = self._entries.find({**_in_scopes(tenant_id, asked), "terms": {"$in": wanted}})
        return rank([_load(raw) for raw in found], wanted, entries=entries, total_terms=total,
                    limit=limit)

    @translated
    def delete_memory(self, tenant_id: str, entry_id: str) -> None:
        raw = self._entries.find_one_and_delete({"_id": entry_id, "tenantId": tenant_id})
        if raw is None:
            raise NotFound(f"memory entry {entry_id} not found")
        self._release(_counter_id(tenant_id, ScopeRef(MemoryScope(raw["scope"]), raw["scopeId"])),
                      raw["length"])

    def _first(self, entry: MemoryEntry) -> MemoryEntry | None:
        """The entry its process recorded under its key before, if any."""
        if entry.idempotency_key is None:
            return None
        raw = self._entries.find_one({"tenantId": entry.tenant_id,
                                      "processId": entry.process_id,
                                      "idempotencyKey": entry.idempotency_key})
        return None if raw is None else _load(raw)

    def _reserve(self, entry: MemoryEntry, counter: dict[str, str], terms: int,
                 limit: int) -> None:
        """Take one slot of the scope's cap, or raise ``MemoryFull``."""
        for _ in range(2):
            if limit <= 0:
                break
            try:
                self._scopes.update_one({"_id": counter, "entries": {"$lt": limit}},
                                        {"$inc": {"entries": 1, "terms": terms}}, upsert=True)
                return
            except DuplicateKeyError:
                if not self._recount(counter, limit):
                    break
        raise memory_full(entry, limit)

    def _recount(self, counter: dict[str, str], limit: int) -> bool:
        """Set a full counter to what its scope holds; whether a slot came free."""
        seen = self._scopes.find_one({"_id": counter})
        held = list(self._entries.aggregate([
            {"$match": {"tenantId": counter["tenantId"], "scope": counter["scope"],
                        "scopeId": counter["scopeId"]}},
            {"$group": {"_id": None, "entries": {"$sum": 1}, "terms": {"$sum": "$length"}}}]))
        entries, terms = (held[0]["entries"], held[0]["terms"]) if held else (0, 0)
        if seen is None or entries >= min(seen["entries"], limit):
            return False
        return bool(self._scopes.update_one(
            {"_id": counter, "entries": seen["entries"]},
            {"$set": {"entries": entries, "terms": terms}}).modified_count)

    def _release(self, counter: dict[str, str], terms: int) -> None:
        self._scopes.update_one({"_id": counter}, {"$inc": {"entries": -1, "terms": -terms}})


def _counter_id(tenant_id: str, scope: ScopeRef) -> dict[str, str]:
    # An embedded _id compares field by field in order, so it is built here only.
    return {"tenantId": tenant_id, "scope": scope.level.value, "scopeId": scope.id}


def _in_scopes(tenant_id: str, scopes: Sequence[ScopeRef]) -> dict[str, Any]:
    return {"tenantId": tenant_id,
            "$or": [{"scope": scope.level.value, "scopeId": scope.id} for scope in scopes]}


def _load(raw: dict[str, Any]) -> MemoryEntry:
    for ours in _OURS:
        raw.pop(ours, None)
    return from_bson(MemoryEntry, raw)
