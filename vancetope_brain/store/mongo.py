"""The MongoDB adapter (pymongo; any pymongo-compatible client such as mongomock in tests)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic_core import to_jsonable_python
from pymongo import ASCENDING, DESCENDING, MongoClient, ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError

from vancetope_brain.errors import Conflict, NotFound, StoreError
from vancetope_brain.models import (
    ApiToken,
    ChatMessage,
    Fingerprint,
    InboxMessage,
    ProcessStatus,
    Project,
    Session,
    SessionStatus,
    SuspendCause,
    Tenant,
    ThinkProcess,
    TurnCommit,
    TurnRecord,
    User,
    utcnow,
)
from vancetope_brain.store._mongo_codec import from_bson, load_one, naive_utc, to_bson, translated
from vancetope_brain.store._mongo_config import MongoConfigMixin
from vancetope_brain.store._mongo_user_inbox import MongoUserInboxMixin
from vancetope_brain.store.base import Store

_STARTS_TURN = ["INIT", "IDLE", "BLOCKED"]
_NOT_SWEPT = ["CLOSED", "PAUSED", "SUSPENDED"]
_DUPLICATE_KEY = 11000
_STRING = {"$type": "string"}
# Equal creation times (millisecond resolution) fall back to the id, so the order is stable.
_OLDEST_FIRST = [("createdAt", ASCENDING), ("_id", ASCENDING)]


def _project_key(tenant_id: str, project_id: str) -> dict[str, str]:
    """A project's ``_id``: ids are unique per tenant only (every tenant has ``default``).

    An embedded document compares field by field in order, so it is built here only.
    """
    return {"tenantId": tenant_id, "id": project_id}


class MongoStore(MongoConfigMixin, MongoUserInboxMixin, Store):
    """The Store on MongoDB (4.2+: pipeline updates), without multi-document transactions.

    A record's ``_id`` is its id, except a project's: ``{tenantId, id}``, since
    project ids are unique only within their tenant.

    Atomic (one single-document operation each): ``acquire_epoch`` (a pipeline
    update of the process: epoch + 1, status → RUNNING from INIT/IDLE/BLOCKED),
    ``request_control`` (a ``find_one_and_update`` whose filter holds
    ``status: {$in: allowed_from}``), the seq reservation of ``append_message``
    (``$inc nextSeq``), and the claim of ``commit_turn``.

    ``append_message`` reserves a seq, then inserts. Seqs are strictly
    increasing, but two concurrent appends may become visible out of seq order
    for the moment between the two steps, and a crash or an idempotency race
    leaves a gap.

    ``commit_turn`` runs: (1) a find that every drained id is still undrained,
    else False; (2) the claim: one conditional update of the process
    ``{_id, tenantId, epoch}`` that sets status/closeReason/lastError/
    engineState/updatedAt and reserves chat seqs (``$inc nextChatSeq``), else
    False — nothing is written before it; (2b) if ``commit.control_handled``
    is set, a second conditional ``update_one`` of the process
    ``{_id, tenantId, epoch, pendingControl: handled}`` that clears
    pendingControl/controlRequestedAt (not a pipeline update in the claim: that
    would need every outcome value wrapped in ``$literal``), so a different
    call requested after the turn read the process survives, and so does any
    call once a newer epoch took over; (3) insert the chat lines, ignoring
    duplicate keys; (4) mark the messages drained (filter ``drainedAt: None``);
    (5) insert the turn record. A crash after (2) leaves the new status with
    the messages still pending (and, before (2b), the control call too): the
    next turn re-processes them, and chat lines keyed by (sourceMessageId,
    role) are not written twice (lines without a sourceMessageId can be). A turn that took over between (1) and (4) can see
    the same messages pending; its own commit then fails at (1) or its lines
    are deduplicated at (3). Skipped lines may leave gaps in chat seqs.

    Recipes and settings: ``_mongo_config``; the user Inbox and the delivery log
    (and what of ``save_inbox_item`` is atomic): ``_mongo_user_inbox``.
    """

    def __init__(self, url: str | None = None, *, client: Any = None,
                 db_name: str | None = None) -> None:
        """Connect to ``url`` (``mongodb://host/db``) or use ``client`` (not closed by us)."""
        if (url is None) == (client is None):
            raise ValueError("pass exactly one of url and client")
        self._owns_client = client is None
        try:
            if client is None:
                client = MongoClient(url, tz_aware=True, serverSelectionTimeoutMS=10_000)
            self._client = client
            db = client.get_default_database("vancetope") if db_name is None else client[db_name]
            self._tenants = db["tenants"]
            self._projects = db["projects"]
            self._users = db["users"]
            self._tokens = db["api_tokens"]
            self._sessions = db["sessions"]
            self._processes = db["think_processes"]
            self._messages = db["engine_messages"]
            self._chat = db["chat_messages"]
            self._turns = db["turn_records"]
            self._db = db
            self._create_indexes()
            self._init_config(db)  # recipes and settings: _mongo_config
            self._init_user_inbox(db)  # user Inbox and deliveries: _mongo_user_inbox
        except PyMongoError as e:
            raise StoreError(f"cannot open MongoDB store: {e}") from e

    @classmethod
    def from_client(cls, client: Any, db_name: str) -> MongoStore:
        """A store over an existing client (e.g. ``mongomock.MongoClient()``)."""
        return cls(client=client, db_name=db_name)

    def _create_indexes(self) -> None:
        """Idempotent: named indexes, tenantId first for every tenant query."""
        self._tokens.create_index("tokenHash", unique=True, name="token_hash")
        self._tokens.create_index(
            [("tenantId", ASCENDING), ("userId", ASCENDING), ("createdAt", ASCENDING)],
            name="by_user")
        self._users.create_index([("tenantId", ASCENDING), ("createdAt", ASCENDING)],
                                 name="by_tenant")
        self._projects.create_index([("tenantId", ASCENDING), ("createdAt", ASCENDING)],
                                    name="by_tenant")
        self._sessions.create_index(
            [("tenantId", ASCENDING), ("userId", ASCENDING), ("createdAt", DESCENDING)],
            name="by_user")
        self._processes.create_index(
            [("tenantId", ASCENDING), ("sessionId", ASCENDING), ("createdAt", ASCENDING)],
            name="by_session")
        self._messages.create_index(
            [("tenantId", ASCENDING), ("targetProcessId", ASCENDING), ("seq", ASCENDING)],
            unique=True, name="seq")
        self._messages.create_index(
            [("tenantId", ASCENDING), ("targetProcessId", ASCENDING),
             ("idempotencyKey", ASCENDING)],
            unique=True, partialFilterExpression={"idempotencyKey": _STRING}, name="idempotency")
        self._messages.create_index(
            [("tenantId", ASCENDING), ("targetProcessId", ASCENDING), ("drainedAt", ASCENDING),
             ("seq", ASCENDING)],
            name="pending")
        self._messages.create_index([("drainedAt", ASCENDING), ("createdAt", ASCENDING)],
                                    name="sweeper")
        self._processes.create_index(
            [("controlRequestedAt", ASCENDING)],
            partialFilterExpression={"pendingControl": _STRING}, name="pending_control")
        self._chat.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("seq", ASCENDING)],
            unique=True, name="seq")
        self._chat.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("sourceMessageId", ASCENDING),
             ("role", ASCENDING)],
            unique=True, partialFilterExpression={"sourceMessageId": _STRING}, name="source")
        self._turns.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("epoch", ASCENDING)],
            name="by_process")

    def _process_exists(self, tenant_id: str, process_id: str) -> bool:
        return self._processes.count_documents({"_id": process_id, "tenantId": tenant_id},
                                               limit=1) > 0

    # ── plumbing ──────────────────────────────────────────────────────────
    @translated
    def ping(self) -> None:
        self._db.command("ping")

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    # ── identity ──────────────────────────────────────────────────────────
    @translated
    def create_tenant(self, tenant: Tenant) -> None:
        self._tenants.insert_one(to_bson(tenant))

    @translated
    def list_tenants(self) -> list[Tenant]:
        cursor = self._tenants.find({}).sort(_OLDEST_FIRST)
        return [from_bson(Tenant, raw) for raw in cursor]

    @translated
    def create_project(self, project: Project) -> None:
        self._projects.insert_one(to_bson(project, _id=_project_key(project.tenant_id,
                                                                    project.id)))

    @translated
    def get_project(self, tenant_id: str, project_id: str) -> Project:
        raw = self._projects.find_one({"_id": _project_key(tenant_id, project_id)})
        return load_one(Project, raw, f"project {project_id} not found")

    @translated
    def list_projects(self, tenant_id: str) -> list[Project]:
        cursor = self._projects.find({"tenantId": tenant_id}).sort(_OLDEST_FIRST)
        return [from_bson(Project, raw) for raw in cursor]

    @translated
    def create_user(self, user: User) -> None:
        self._users.insert_one(to_bson(user))

    @translated
    def list_users(self, tenant_id: str) -> list[User]:
        cursor = self._users.find({"tenantId": tenant_id}).sort(_OLDEST_FIRST)
        return [from_bson(User, raw) for raw in cursor]

    @translated
    def get_user(self, tenant_id: str, user_id: str) -> User:
        raw = self._users.find_one({"_id": user_id, "tenantId": tenant_id})
        return load_one(User, raw, f"user {user_id} not found")

    @translated
    def create_token(self, token: ApiToken) -> None:
        self._tokens.insert_one(to_bson(token))

    @translated
    def list_tokens(self, tenant_id: str, user_id: str) -> list[ApiToken]:
        cursor = self._tokens.find({"tenantId": tenant_id, "userId": user_id}).sort(_OLDEST_FIRST)
        return [from_bson(ApiToken, raw) for raw in cursor]

    @translated
    def revoke_token(self, tenant_id: str, token_id: str) -> None:
        result = self._tokens.update_one({"_id": token_id, "tenantId": tenant_id},
                                         {"$set": {"revoked": True}})
        if result.matched_count == 0:
            raise NotFound(f"token {token_id} not found")

    @translated
    def token_by_hash(self, token_hash: str) -> ApiToken | None:
        raw = self._tokens.find_one({"tokenHash": token_hash, "revoked": False})
        return None if raw is None else from_bson(ApiToken, raw)

    # ── sessions ──────────────────────────────────────────────────────────
    @translated
    def create_session(self, session: Session) -> None:
        self._sessions.insert_one(to_bson(session))

    @translated
    def get_session(self, tenant_id: str, session_id: str) -> Session:
        raw = self._sessions.find_one({"_id": session_id, "tenantId": tenant_id})
        return load_one(Session, raw, f"session {session_id} not found")

    @translated
    def list_sessions(self, tenant_id: str, user_id: str) -> list[Session]:
        cursor = self._sessions.find({"tenantId": tenant_id, "userId": user_id})
        return [from_bson(Session, raw) for raw in cursor.sort("createdAt", DESCENDING)]

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
    def set_fingerprint(self, tenant_id: str, session_id: str,
                        fingerprint: Fingerprint) -> Session:
        self._sessions.update_one(
            {"_id": session_id, "tenantId": tenant_id, "fingerprint": None},
            {"$set": {"fingerprint": fingerprint.model_dump(mode="json", by_alias=True)}})
        return self.get_session(tenant_id, session_id)

    # ── processes ─────────────────────────────────────────────────────────
    @translated
    def set_context_drift(self, tenant_id: str, process_id: str, drift: bool) -> None:
        result = self._processes.update_one({"_id": process_id, "tenantId": tenant_id},
                                            {"$set": {"contextDrift": drift}})
        if result.matched_count == 0:
            raise NotFound(f"process {process_id} not found")

    @translated
    def create_process(self, process: ThinkProcess) -> None:
        # nextChatSeq is ours, not the model's: ThinkProcess.load ignores it.
        self._processes.insert_one(to_bson(process, nextChatSeq=0))

    @translated
    def get_process(self, tenant_id: str, process_id: str) -> ThinkProcess:
        raw = self._processes.find_one({"_id": process_id, "tenantId": tenant_id})
        return load_one(ThinkProcess, raw, f"process {process_id} not found")

    @translated
    def list_processes(self, tenant_id: str, session_id: str) -> list[ThinkProcess]:
        cursor = self._processes.find({"tenantId": tenant_id, "sessionId": session_id})
        return [from_bson(ThinkProcess, raw) for raw in cursor.sort("createdAt", ASCENDING)]

    @translated
    def acquire_epoch(self, tenant_id: str, process_id: str) -> ThinkProcess:
        before = self._processes.find_one_and_update(
            {"_id": process_id, "tenantId": tenant_id},
            [{"$set": {
                "epoch": {"$add": ["$epoch", 1]},
                "status": {"$cond": [{"$in": ["$status", _STARTS_TURN]}, "RUNNING", "$status"]},
            }}],
            return_document=ReturnDocument.BEFORE,
        )
        if before is None:
            raise NotFound(f"process {process_id} not found")
        before["epoch"] += 1
        return from_bson(ThinkProcess, before)

    @translated
    def request_control(self, tenant_id: str, process_id: str, call: str,
                        allowed_from: frozenset[ProcessStatus]) -> ThinkProcess:
        call = str(call)
        allowed = sorted({ProcessStatus(s).value for s in allowed_from})
        # A miss is re-read to tell NotFound from Conflict; should the status
        # have moved into ``allowed`` meanwhile, the update is simply retried.
        for _ in range(3):
            after = self._processes.find_one_and_update(
                {"_id": process_id, "tenantId": tenant_id, "status": {"$in": allowed}},
                {"$set": {"pendingControl": call, "controlRequestedAt": naive_utc(utcnow())}},
                return_document=ReturnDocument.AFTER,
            )
            if after is not None:
                return from_bson(ThinkProcess, after)
            current = self._processes.find_one({"_id": process_id, "tenantId": tenant_id},
                                               projection={"status": True})
            if current is None:
                raise NotFound(f"process {process_id} not found")
            if current["status"] not in allowed:
                break
        raise Conflict(f"cannot {call} process {process_id}: it is {current['status']} "
                       f"(allowed from {', '.join(allowed) or 'nothing'})")

    @translated
    def commit_turn(self, tenant_id: str, process_id: str, epoch: int,
                    commit: TurnCommit) -> list[ChatMessage] | None:
        drained = list(dict.fromkeys(commit.drained_ids))
        mine = {"_id": {"$in": drained}, "tenantId": tenant_id, "targetProcessId": process_id,
                "drainedAt": None}
        if drained and self._messages.count_documents(mine) != len(drained):
            if not self._process_exists(tenant_id, process_id):
                raise NotFound(f"process {process_id} not found")
            return None
        lines = self._unwritten(tenant_id, process_id, commit.chat)
        now = naive_utc(utcnow())
        outcome: dict[str, Any] = {
            "status": commit.status.value,
            "closeReason": commit.close_reason.value if commit.close_reason else None,
            "lastError": commit.last_error,
            "updatedAt": now,
        }
        if commit.engine_state is not None:
            outcome["engineState"] = to_jsonable_python(commit.engine_state)
        claimed = self._processes.find_one_and_update(
            {"_id": process_id, "tenantId": tenant_id, "epoch": epoch},
            {"$set": outcome, "$inc": {"nextChatSeq": len(lines)}},
            projection={"nextChatSeq": True},
            return_document=ReturnDocument.AFTER,
        )
        if claimed is None:
            if not self._process_exists(tenant_id, process_id):
                raise NotFound(f"process {process_id} not found")
            return None
        if commit.control_handled is not None:
            self._processes.update_one(
                {"_id": process_id, "tenantId": tenant_id, "epoch": epoch,
                 "pendingControl": commit.control_handled},
                {"$set": {"pendingControl": None, "controlRequestedAt": None}},
            )
        first = claimed["nextChatSeq"] - len(lines) + 1
        written = [line.model_copy(
            update={"seq": first + i, "tenant_id": tenant_id, "process_id": process_id})
            for i, line in enumerate(lines)]
        docs = [to_bson(line) for line in written]
        if docs:
            try:
                self._chat.insert_many(docs, ordered=False)
            except BulkWriteError as e:
                # A duplicate is a line an earlier attempt of this turn already wrote.
                if any(err.get("code") != _DUPLICATE_KEY for err in e.details["writeErrors"]):
                    raise
        for child in commit.spawned:
            with contextlib.suppress(Conflict):  # a retried commit of the same turn
                self.create_process(child)
        for message in commit.outbox:
            self.append_message(message)  # keyed messages are not duplicated by a retry
        if drained:
            self._messages.update_many(mine, {"$set": {"drainedAt": now, "drainedEpoch": epoch}})
        record = commit.record.model_copy(
            update={"tenant_id": tenant_id, "process_id": process_id, "epoch": epoch})
        with contextlib.suppress(DuplicateKeyError):  # a retried commit of the same turn
            self._turns.insert_one(to_bson(record))
        return written

    def _unwritten(self, tenant_id: str, process_id: str,
                   chat: Iterable[ChatMessage]) -> list[ChatMessage]:
        """The lines not already stored under their (sourceMessageId, role), in order."""
        chat = list(chat)
        sources = [line.source_message_id for line in chat if line.source_message_id]
        seen: set[tuple[str | None, str]] = set()
        if sources:
            existing = self._chat.find(
                {"tenantId": tenant_id, "processId": process_id,
                 "sourceMessageId": {"$in": sources}},
                projection={"sourceMessageId": True, "role": True},
            )
            seen = {(raw["sourceMessageId"], raw["role"]) for raw in existing}
        lines = []
        for line in chat:
            key = (line.source_message_id, line.role.value)
            if line.source_message_id and key in seen:
                continue
            seen.add(key)
            lines.append(line)
        return lines

    # ── inbox ─────────────────────────────────────────────────────────────
    def _by_key(self, message: InboxMessage) -> dict[str, Any] | None:
        if message.idempotency_key is None:
            return None
        found: dict[str, Any] | None = self._messages.find_one({
            "tenantId": message.tenant_id, "targetProcessId": message.target_process_id,
            "idempotencyKey": message.idempotency_key,
        })
        return found

    @translated
    def append_message(self, message: InboxMessage) -> tuple[InboxMessage, bool]:
        first = self._by_key(message)
        if first is not None:
            return from_bson(InboxMessage, first), False
        reserved = self._processes.find_one_and_update(
            {"_id": message.target_process_id, "tenantId": message.tenant_id},
            {"$inc": {"nextSeq": 1}},
            projection={"nextSeq": True},
            return_document=ReturnDocument.AFTER,
        )
        if reserved is None:
            raise NotFound(f"process {message.target_process_id} not found")
        stored = message.model_copy(
            update={"seq": reserved["nextSeq"], "drained_at": None, "drained_epoch": None})
        try:
            self._messages.insert_one(to_bson(stored))
        except DuplicateKeyError:
            first = self._by_key(message)  # a concurrent append with the same key won
            if first is None:
                raise
            return from_bson(InboxMessage, first), False
        return stored, True

    @translated
    def pending_messages(self, tenant_id: str, process_id: str, limit: int = 1000) -> list[InboxMessage]:
        if limit <= 0:  # Mongo reads limit(0) as "no limit"
            return []
        cursor = self._messages.find(
            {"tenantId": tenant_id, "targetProcessId": process_id, "drainedAt": None}
        ).sort("seq", ASCENDING).limit(limit)
        return [from_bson(InboxMessage, raw) for raw in cursor]

    @translated
    def stale_pending(self, older_than: datetime, limit: int = 100) -> list[tuple[str, str]]:
        if limit <= 0:
            return []
        cutoff = naive_utc(older_than)
        # Each source yields at most ``limit`` pairs with the time they have
        # waited since, oldest first; the oldest ``limit`` of both are the answer.
        since = self._stale_messages(cutoff, limit)
        controls = self._processes.find(
            {"pendingControl": _STRING, "controlRequestedAt": {"$lt": cutoff},
             "status": {"$ne": "CLOSED"}},
            projection={"tenantId": True, "controlRequestedAt": True},
        ).sort("controlRequestedAt", ASCENDING).limit(limit)
        for raw in controls:
            pair = (raw["tenantId"], raw["_id"])
            at = naive_utc(raw["controlRequestedAt"])
            if pair not in since or at < since[pair]:
                since[pair] = at
        return sorted(since, key=since.__getitem__)[:limit]

    def _stale_messages(self, cutoff: datetime, limit: int) -> dict[tuple[str, str], datetime]:
        """Up to ``limit`` wakeable pairs with an undrained message created before ``cutoff``,
        each with its oldest such message's time."""
        # Walk old pending messages oldest first and keep processes that may be
        # woken; the status check is batched to one query per chunk.
        cursor = self._messages.find(
            {"drainedAt": None, "createdAt": {"$lt": cutoff}},
            projection={"tenantId": True, "targetProcessId": True, "createdAt": True},
        ).sort("createdAt", ASCENDING)
        found: dict[tuple[str, str], datetime] = {}
        chunk: dict[tuple[str, str], datetime] = {}
        seen: set[tuple[str, str]] = set()
        for raw in cursor:
            pair = (raw["tenantId"], raw["targetProcessId"])
            if pair not in seen:
                seen.add(pair)
                chunk[pair] = naive_utc(raw["createdAt"])
            if len(chunk) >= 200:
                found.update((pair, chunk[pair]) for pair in self._wakeable(list(chunk)))
                chunk = {}
                if len(found) >= limit:
                    break
        if chunk and len(found) < limit:
            found.update((pair, chunk[pair]) for pair in self._wakeable(list(chunk)))
        return dict(list(found.items())[:limit])

    def _wakeable(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The pairs whose process exists in that tenant and is not CLOSED/PAUSED/SUSPENDED."""
        rows = self._processes.find(
            {"_id": {"$in": [pid for _, pid in pairs]}, "status": {"$nin": _NOT_SWEPT}},
            projection={"tenantId": True},
        )
        ok = {(raw["tenantId"], raw["_id"]) for raw in rows}
        return [pair for pair in pairs if pair in ok]

    # ── chat and audit ────────────────────────────────────────────────────
    @translated
    def chat_history(
        self, tenant_id: str, process_id: str, *, before_seq: int | None = None, limit: int = 100
    ) -> list[ChatMessage]:
        if limit <= 0:
            return []
        query: dict[str, Any] = {"tenantId": tenant_id, "processId": process_id}
        if before_seq is not None:
            query["seq"] = {"$lt": before_seq}
        cursor = self._chat.find(query).sort("seq", DESCENDING).limit(limit)
        return [from_bson(ChatMessage, raw) for raw in reversed(list(cursor))]

    @translated
    def turn_records(self, tenant_id: str, process_id: str) -> list[TurnRecord]:
        cursor = self._turns.find({"tenantId": tenant_id, "processId": process_id})
        return [from_bson(TurnRecord, raw) for raw in cursor.sort("epoch", ASCENDING)]
