"""MongoDB ``SessionSearch``: a bounded scan of the user's newest chat lines, matched here.

No index of its own: ``$text`` is missing from mongomock and tokenizes and folds otherwise
than SQLite's FTS5 (which the contract holds both to), and a term array on each chat line
would change the lanes adapter's documents. A search reads the user's sessions that are not
CLOSED (index ``by_user_status`` of ``sessions``) and matches their titles; then the newest
``MAX_SCANNED`` ``user`` and ``assistant`` lines of those sessions' chat processes
(``chat_messages``, found by its index ``seq`` on tenant and process, sorted by time in the
server; no sources nor meta read), newest first, each matched by the port's tokeniser. A line older than those is not found on MongoDB
(documented in ``docs/architecture.md``). Always in step: it reads the chat and the sessions
as they are.
"""

from __future__ import annotations

from pymongo import DESCENDING

from vancetope_brain.models import ChatMessage, Session, SessionStatus
from vancetope_brain.models.conversation import ConversationHit
from vancetope_brain.store.documents import search_terms
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, translated
from vancetope_brain.store.session_search import (
    SEARCHED_ROLES,
    SessionSearch,
    capped,
    holds_all,
    line_hit,
    searched,
    title_hits,
)

MAX_SCANNED = 20_000
"""Chat lines (the newest) one search reads at most on MongoDB."""


class MongoSessionSearch(MongoAdapter, SessionSearch):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._sessions = db.database["sessions"]
        self._chat = db.database["chat_messages"]

    @translated
    def search_sessions(self, tenant_id: str, user_id: str, query: str, *,
                        limit: int = 20) -> list[ConversationHit]:
        wanted, limit = search_terms(query), capped(limit)
        if not wanted or limit == 0:
            return []
        by_chat = searched(from_bson(Session, raw) for raw in self._sessions.find(
            {"tenantId": tenant_id, "userId": user_id,
             "status": {"$ne": SessionStatus.CLOSED.value}}))
        hits = title_hits(by_chat.values(), wanted)[:limit]
        if len(hits) == limit or not by_chat:
            return hits
        scan = self._chat.find(
            {"tenantId": tenant_id, "processId": {"$in": list(by_chat)},
             "role": {"$in": [role.value for role in SEARCHED_ROLES]}},
            {"sources": 0, "meta": 0},
        ).sort([("createdAt", DESCENDING), ("seq", DESCENDING)]).limit(MAX_SCANNED)
        for raw in scan:
            if holds_all(raw["content"], wanted):
                line = from_bson(ChatMessage, raw)
                hits.append(line_hit(by_chat[line.process_id], line, wanted))
                if len(hits) == limit:
                    break
        return hits
