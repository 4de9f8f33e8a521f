"""MongoDB ``JournalStore``: collection ``turn_journal``, ``_id`` = the entry's id
(``<process id>:<key>``), with ``seq`` (the order keys were first written) beside it.

Not atomic, unlike SQLite: ``record_steps`` reads the process's epoch, then upserts the
entries one by one. A turn that takes the lane over between the two (a worker frozen past
its lease) may read the journal before the stale turn's write lands, and the stale turn may
then start a tool call the new turn also makes — the window is one round trip, and the
stale turn's commit is fenced as ever. A crash between two upserts leaves the first ones
written (each is a whole entry). ``clear`` is how ``commit_turn`` empties the journal, right
after its claim.
"""

from __future__ import annotations

import json
from typing import Any

from pymongo import ASCENDING

from vancetope_brain.errors import NotFound
from vancetope_brain.models import JournalEntry, StepState
from vancetope_brain.store.journal import MAX_ENTRIES, JournalStore, entry_json, too_many
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, naive_utc, translated
from vancetope_brain.store.mongo.sessions import PROCESSES

JOURNAL = "turn_journal"


def clear(database: Any, tenant_id: str, process_id: str, *, in_doubt: bool) -> None:
    """Delete the process's journal; its IN_DOUBT entries only if ``in_doubt``."""
    query: dict[str, Any] = {"tenantId": tenant_id, "processId": process_id}
    if not in_doubt:
        query["state"] = {"$ne": StepState.IN_DOUBT.value}
    database[JOURNAL].delete_many(query)


class MongoJournal(MongoAdapter, JournalStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._journal = db.database[JOURNAL]
        self._processes = db.database[PROCESSES]
        self._journal.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("seq", ASCENDING)],
            name="by_process")

    @translated
    def journal(self, tenant_id: str, process_id: str) -> list[JournalEntry]:
        cursor = self._journal.find({"tenantId": tenant_id, "processId": process_id})
        return [from_bson(JournalEntry, raw) for raw in cursor.sort("seq", ASCENDING)]

    @translated
    def record_steps(self, tenant_id: str, process_id: str, epoch: int,
                     entries: list[JournalEntry]) -> bool:
        if any((e.tenant_id, e.process_id) != (tenant_id, process_id) for e in entries):
            raise ValueError(f"an entry of another process than {process_id}")
        docs = [json.loads(entry_json(e)) for e in entries]
        lane = self._processes.find_one({"_id": process_id, "tenantId": tenant_id},
                                        projection={"epoch": True})
        if lane is None:
            raise NotFound(f"process {process_id} not found")
        if lane["epoch"] != epoch:
            return False
        mine = {"tenantId": tenant_id, "processId": process_id}
        ids = {doc["id"] for doc in docs}
        if self._journal.count_documents({**mine, "_id": {"$nin": list(ids)}}) + len(ids) \
                > MAX_ENTRIES:
            raise too_many(process_id)
        last = self._journal.find_one(mine, projection={"seq": True}, sort=[("seq", -1)])
        first = last["seq"] + 1 if last else 0
        for position, (doc, entry) in enumerate(zip(docs, entries, strict=True), first):
            doc["at"] = naive_utc(entry.at)
            # The first write of a key takes the next position; a rewrite keeps its own.
            self._journal.update_one({"_id": entry.id},
                                     {"$set": doc, "$setOnInsert": {"seq": position}},
                                     upsert=True)
        return True
