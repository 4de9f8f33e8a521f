"""MongoDB ``DeadLetterStore``: the messages of ``engine_messages`` (owned by ``lanes.py``)
that carry a ``deadLetter`` mark, found by its partial index ``dead_letters``.

``requeue_dead_letter`` reads the process's status, then clears the mark in one
conditional ``find_one_and_update`` (filter: the mark is still there), so two requeues
put a message back once. A process closed between the read and the update keeps the
message pending, unread (a CLOSED process runs no turn).
"""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING, ReturnDocument

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import InboxMessage, ProcessStatus
from vancetope_brain.store.dead_letters import MAX_LISTED, DeadLetterStore
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, translated
from vancetope_brain.store.mongo.lanes import MESSAGES
from vancetope_brain.store.mongo.sessions import PROCESSES

_MARKED = {"$type": "object"}


class MongoDeadLetters(MongoAdapter, DeadLetterStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._messages = db.database[MESSAGES]
        self._processes = db.database[PROCESSES]

    @translated
    def dead_letters(self, tenant_id: str, process_id: str | None = None,
                     limit: int = 100) -> list[InboxMessage]:
        limit = min(limit, MAX_LISTED)
        if limit <= 0:  # Mongo reads limit(0) as "no limit"
            return []
        query: dict[str, Any] = {"tenantId": tenant_id, "deadLetter": _MARKED}
        if process_id is not None:
            query["targetProcessId"] = process_id
        cursor = self._messages.find(query).sort(
            [("deadLetter.at", ASCENDING), ("seq", ASCENDING)]).limit(limit)
        return [from_bson(InboxMessage, raw) for raw in cursor]

    @translated
    def requeue_dead_letter(self, tenant_id: str, message_id: str) -> InboxMessage:
        mine = {"_id": message_id, "tenantId": tenant_id, "deadLetter": _MARKED}
        found = self._messages.find_one(mine, projection={"targetProcessId": True})
        if found is None:
            raise NotFound(f"no dead letter {message_id} in tenant {tenant_id}")
        process = self._processes.find_one(
            {"_id": found["targetProcessId"], "tenantId": tenant_id}, projection={"status": True})
        if process is not None and process["status"] == ProcessStatus.CLOSED.value:
            raise Conflict(f"process {found['targetProcessId']} of dead letter {message_id} "
                           f"is CLOSED; nothing would read it")
        stored = self._messages.find_one_and_update(
            mine, {"$set": {"drainedAt": None, "drainedEpoch": None, "attempts": 0,
                            "deadLetter": None}},
            return_document=ReturnDocument.AFTER)
        if stored is None:  # requeued by someone else meanwhile
            raise NotFound(f"no dead letter {message_id} in tenant {tenant_id}")
        return from_bson(InboxMessage, stored)
