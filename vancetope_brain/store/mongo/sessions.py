"""MongoDB ``SessionStore``: collections ``sessions`` and ``think_processes``.

A process is one document, lane fields included (the lanes adapter updates
them in place); ``nextChatSeq`` is the adapters', not the model's
(``ThinkProcess.load`` ignores it). ``insert_process`` and ``process_exists``
serve the lanes and user Inbox adapters too.

Atomicity: each call is one single-document operation (``set_details`` one per field).
``update_session_status`` is one ``find_one_and_update`` whose filter holds
``status: {$in: allowed_from}``; ``set_details(only_unset=True)``'s filter holds the field
unset (``fingerprint: None``, ``title: ""``), so the first bind's fingerprint wins.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, ReturnDocument

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import (
    Fingerprint,
    ProcessStatus,
    Session,
    SessionStatus,
    SuspendCause,
    ThinkProcess,
    utcnow,
)
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, load_one, naive_utc, to_bson, translated
from vancetope_brain.store.sessions import (
    SessionPage,
    SessionStore,
    cursor_position,
    page_cursor,
)
from vancetope_brain.store.sql import from_ms, to_ms

PROCESSES = "think_processes"
"""The collection of process documents."""
PROCESS_OWNED = ("chat_messages", "turn_records", "process_timers", "turn_journal",
                 "event_outbox", "turn_inspections")
"""The collections whose documents a process owns by ``processId`` (deleted with it)."""
_MESSAGES = "engine_messages"
"""Its inbox messages (by ``targetProcessId``); ``mongo.lanes.MESSAGES``."""


def insert_process(database: Any, process: ThinkProcess) -> None:
    """Insert a new process document (``DuplicateKeyError`` if its id exists)."""
    database[PROCESSES].insert_one(to_bson(process, nextChatSeq=0))


def process_exists(database: Any, tenant_id: str, process_id: str) -> bool:
    return database[PROCESSES].count_documents({"_id": process_id, "tenantId": tenant_id},
                                               limit=1) > 0


_NEWEST = [("createdAt", DESCENDING), ("_id", DESCENDING)]
"""The order of a page of sessions."""
_NEWEST_BY_USER = [("tenantId", ASCENDING), ("userId", ASCENDING), *_NEWEST]

_UNSET = {"title": ["", None], "fingerprint": [None]}
"""What ``set_details(only_unset=True)`` takes for a field not set yet."""


class MongoSessions(MongoAdapter, SessionStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._sessions = db.database["sessions"]
        self._processes = db.database[PROCESSES]
        self._sessions.create_index(
            [("tenantId", ASCENDING), ("userId", ASCENDING), ("createdAt", DESCENDING)],
            name="by_user")
        self._sessions.create_index(
            [("tenantId", ASCENDING), ("userId", ASCENDING), ("status", ASCENDING)],
            name="by_user_status")
        # A page of the user's sessions (of one status), newest first: ties on the id.
        self._sessions.create_index(_NEWEST_BY_USER, name="page")
        self._sessions.create_index(
            [("tenantId", ASCENDING), ("userId", ASCENDING), ("status", ASCENDING),
             *_NEWEST], name="page_by_status")
        self._processes.create_index(
            [("tenantId", ASCENDING), ("sessionId", ASCENDING), ("createdAt", ASCENDING)],
            name="by_session")

    @translated
    def create_session(self, session: Session) -> None:
        self._sessions.insert_one(to_bson(session))

    @translated
    def get_session(self, tenant_id: str, session_id: str) -> Session:
        raw = self._sessions.find_one({"_id": session_id, "tenantId": tenant_id})
        return load_one(Session, raw, f"session {session_id} not found")

    @translated
    def list_sessions(self, tenant_id: str, user_id: str, *,
                      status: SessionStatus | None = None, cursor: str | None = None,
                      limit: int) -> SessionPage:
        found: dict[str, Any] = {"tenantId": tenant_id, "userId": user_id}
        if status is not None:
            found["status"] = status.value
        if cursor is not None:
            created_ms, session_id = cursor_position(cursor)
            at = naive_utc(from_ms(created_ms))
            found["$or"] = [{"createdAt": {"$lt": at}},
                            {"createdAt": at, "_id": {"$lt": session_id}}]
        raws = list(self._sessions.find(found).sort(_NEWEST).limit(limit + 1))
        page = [from_bson(Session, raw) for raw in raws[:limit]]
        return SessionPage(sessions=page, next_cursor=page_cursor(
            to_ms(page[-1].created_at), page[-1].id) if len(raws) > limit else None)

    @translated
    def count_sessions(self, tenant_id: str, user_id: str, *,
                       cap: int) -> dict[SessionStatus, int]:
        return {status: self._sessions.count_documents(
            {"tenantId": tenant_id, "userId": user_id, "status": status.value}, limit=cap)
            for status in SessionStatus}

    @translated
    def set_chat_process(self, tenant_id: str, session_id: str, process_id: str) -> None:
        result = self._sessions.update_one(
            {"_id": session_id, "tenantId": tenant_id},
            {"$set": {"chatProcessId": process_id, "updatedAt": naive_utc(utcnow())}},
        )
        if result.matched_count == 0:
            raise NotFound(f"session {session_id} not found")

    @translated
    def update_session_status(self, tenant_id: str, session_id: str, status: SessionStatus, *,
                              allowed_from: frozenset[SessionStatus],
                              suspend_cause: SuspendCause | None = None) -> Session:
        raw = self._sessions.find_one_and_update(
            {"_id": session_id, "tenantId": tenant_id,
             "status": {"$in": [s.value for s in allowed_from]}},
            {"$set": {"status": status.value,
                      "suspendCause": suspend_cause.value if suspend_cause else None,
                      "updatedAt": naive_utc(utcnow())}},
            return_document=ReturnDocument.AFTER)
        if raw is None:
            current = self.get_session(tenant_id, session_id)  # raises NotFound
            raise Conflict(f"session {session_id} is {current.status.value}; cannot make it "
                           f"{status.value}")
        return from_bson(Session, raw)

    @translated
    def set_details(self, tenant_id: str, session_id: str, *, title: str | None = None,
                    fingerprint: Fingerprint | None = None,
                    only_unset: bool = False) -> Session:
        given: dict[str, Any] = {}
        if title is not None:
            given["title"] = title
        if fingerprint is not None:
            given["fingerprint"] = fingerprint.model_dump(mode="json", by_alias=True)
        for name, value in given.items():  # each field's condition in the write that sets it
            query: dict[str, Any] = {"_id": session_id, "tenantId": tenant_id}
            if only_unset:
                query[name] = {"$in": _UNSET[name]}  # None matches a missing field too
            self._sessions.update_one(query, {"$set": {name: value,
                                                       "updatedAt": naive_utc(utcnow())}})
        return self.get_session(tenant_id, session_id)

    @translated
    def create_process(self, process: ThinkProcess) -> None:
        insert_process(self.db.database, process)

    @translated
    def get_process(self, tenant_id: str, process_id: str) -> ThinkProcess:
        raw = self._processes.find_one({"_id": process_id, "tenantId": tenant_id})
        return load_one(ThinkProcess, raw, f"process {process_id} not found")

    @translated
    def list_processes(self, tenant_id: str, session_id: str, *,
                       open_only: bool = False) -> list[ThinkProcess]:
        query: dict[str, Any] = {"tenantId": tenant_id, "sessionId": session_id}
        if open_only:
            query["status"] = {"$ne": ProcessStatus.CLOSED.value}
        cursor = self._processes.find(query)
        return [from_bson(ThinkProcess, raw) for raw in cursor.sort("createdAt", ASCENDING)]

    @translated
    def purge_closed_processes(self, user_id: str, closed_before: datetime, *,
                               limit: int = 100) -> list[ThinkProcess]:
        cursor = self._processes.find({"userId": user_id, "status": ProcessStatus.CLOSED.value,
                                       "updatedAt": {"$lt": naive_utc(closed_before)}})
        gone = [from_bson(ThinkProcess, raw)
                for raw in cursor.sort("updatedAt", ASCENDING).limit(limit)]
        database = self.db.database
        for process in gone:
            mine = {"tenantId": process.tenant_id, "processId": process.id}
            database[_MESSAGES].delete_many({"tenantId": process.tenant_id,
                                            "targetProcessId": process.id})
            for collection in PROCESS_OWNED:
                database[collection].delete_many(mine)
            self._processes.delete_one({"_id": process.id, "tenantId": process.tenant_id})
        return gone

    @translated
    def set_context_drift(self, tenant_id: str, process_id: str, drift: bool) -> None:
        result = self._processes.update_one({"_id": process_id, "tenantId": tenant_id},
                                            {"$set": {"contextDrift": drift}})
        if result.matched_count == 0:
            raise NotFound(f"process {process_id} not found")
