"""MongoDB ``LaneStore``: collections ``engine_messages``, ``chat_messages``,
``turn_records`` and ``process_timers``, and the lane fields of ``think_processes`` (owned by ``sessions.py``).

Atomic (one single-document operation each): ``acquire_epoch`` (a pipeline
update of the process: epoch + 1, turnAttempts + 1, status → RUNNING from
INIT/IDLE/BLOCKED; the listed messages' ``attempts`` are counted by an
``update_many`` right after it, so a worker that dies between the two leaves
that turn — which had run nothing — uncounted, and a worker fenced out between
them counts one attempt too many),
``request_control`` (a ``find_one_and_update`` whose filter holds
``status: {$in: allowed_from}``), the seq reservation of ``append_message``
(``$inc nextSeq``), and the claim of ``commit_turn``.

``append_message`` reserves a seq, then inserts. Seqs are strictly
increasing, but two concurrent appends may become visible out of seq order
for the moment between the two steps, and a crash or an idempotency race
leaves a gap.

``commit_turn`` runs: (1) the drain claim: one ``update_many`` that marks every
drained (and dead-lettered) message still undrained with ``drainClaim`` {epoch, turn
record id}, passing over those another turn of the same epoch marked; unless it matched
them all, None. So of two commits in one epoch that drain one message, one goes on, as
on SQL (each message's mark is atomic; two racing over several messages may each take
some and both get None, leaving them pending for the next turn). The same turn retried
(its record id) passes its own marks, and a turn of another epoch takes over the marks
of a turn that died; the drain (4) removes the mark; (2) the claim: one conditional update of the process
``{_id, tenantId, epoch}`` that sets status/closeReason/lastError/
engineState/engineFailures/updatedAt, resets turnAttempts and reserves chat seqs (``$inc nextChatSeq``), else
None — nothing is written before it; (2b) if ``commit.control_handled``
is set, a second conditional ``update_one`` of the process
``{_id, tenantId, epoch, pendingControl: handled}`` that clears
pendingControl/controlRequestedAt (not a pipeline update in the claim: that
would need every outcome value wrapped in ``$literal``), so a different
call requested after the turn read the process survives, and so does any
call once a newer epoch took over; (2c) clear the turn journal (``journal.clear``),
if the turn read it or the process closes; (3) insert the chat lines, ignoring
duplicate keys; (4) mark the messages drained (filter ``drainedAt: None``), each dead
letter with its mark, and uncount the messages left pending; (5) insert the turn
record, then (unless it was stored already) add the turn's token usage
(``usage.add_usage``). The turn's events go into the event outbox
(``event_outbox.enqueue_in``) right after (3); spawned processes (``insert_process``) and outbox messages
(``append_in``) follow, before (4); a retried commit
of the same turn skips the processes that exist and, for keyed messages,
the messages already appended. A crash after (2) leaves the new status with
the messages still pending (and, before (2b), the control call too): the
next turn re-processes them, and chat lines keyed by (sourceMessageId,
role) are not written twice (lines without a sourceMessageId can be). That
turn enqueues the events of the stored lines it skips too (ids ``chat:<line
id>``: an event still enqueued is not added again, one already published is
deduplicated when published again), so a crash between (3) and the events
loses no line's event. A turn that took over between (1) and (4) can see the same messages pending;
its own commit then fails at (1) or its lines are deduplicated at (3).
Skipped lines may leave gaps in chat seqs. Timers are upserted by id with the
outbox (a retry rewrites the same due time).

``fire_timer`` (``timers.py``, the ``TimerStore``) appends the keyed message, then deletes the timer if its due
time is unchanged; a crash between the two fires it again, and the repeated
key makes that append a no-op.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic_core import to_jsonable_python
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import (
    ChatMessage,
    Committed,
    InboxMessage,
    ProcessStatus,
    ThinkProcess,
    TurnCommit,
    TurnRecord,
    TurnStart,
    lifecycle,
    utcnow,
)
from vancetope_brain.store.event_outbox import turn_events
from vancetope_brain.store.lanes import LaneStore, turn_start_read_by_read
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import STRING, from_bson, naive_utc, to_bson, translated
from vancetope_brain.store.mongo.event_outbox import enqueue_in
from vancetope_brain.store.mongo.journal import clear as clear_journal
from vancetope_brain.store.mongo.sessions import PROCESSES, insert_process, process_exists
from vancetope_brain.store.mongo.usage import add_usage

MESSAGES = "engine_messages"
_DUPLICATE_KEY = 11000


def _values(statuses: frozenset[ProcessStatus]) -> list[str]:
    """A set of statuses as the strings the documents hold, in a stable order."""
    return sorted(s.value for s in statuses)


def _by_key(database: Any, message: InboxMessage) -> dict[str, Any] | None:
    """The stored message with ``message``'s target and idempotency key, if it has one."""
    if message.idempotency_key is None:
        return None
    found: dict[str, Any] | None = database[MESSAGES].find_one({
        "tenantId": message.tenant_id, "targetProcessId": message.target_process_id,
        "idempotencyKey": message.idempotency_key,
    })
    return found


def append_in(database: Any, message: InboxMessage) -> tuple[InboxMessage, bool]:
    """``append_message`` on ``database`` (driver errors are the caller's to translate)."""
    first = _by_key(database, message)
    if first is not None:
        return from_bson(InboxMessage, first), False
    reserved = database[PROCESSES].find_one_and_update(
        {"_id": message.target_process_id, "tenantId": message.tenant_id},
        {"$inc": {"nextSeq": 1}},
        projection={"nextSeq": True},
        return_document=ReturnDocument.AFTER,
    )
    if reserved is None:
        raise NotFound(f"process {message.target_process_id} not found")
    stored = message.model_copy(
        update={"seq": reserved["nextSeq"], "drained_at": None, "drained_epoch": None,
                "attempts": 0, "dead_letter": None})
    try:
        database[MESSAGES].insert_one(to_bson(stored))
    except DuplicateKeyError:
        first = _by_key(database, message)  # a concurrent append with the same key won
        if first is None:
            raise
        return from_bson(InboxMessage, first), False
    return stored, True


class MongoLanes(MongoAdapter, LaneStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._processes = db.database[PROCESSES]
        self._messages = db.database[MESSAGES]
        self._chat = db.database["chat_messages"]
        self._turns = db.database["turn_records"]
        self._timers = db.database["process_timers"]
        self._timers.create_index([("dueAt", ASCENDING)], name="due")
        self._processes.create_index([("status", ASCENDING)], name="by_status")
        self._messages.create_index(
            [("tenantId", ASCENDING), ("targetProcessId", ASCENDING), ("seq", ASCENDING)],
            unique=True, name="seq")
        self._messages.create_index(
            [("tenantId", ASCENDING), ("targetProcessId", ASCENDING),
             ("idempotencyKey", ASCENDING)],
            unique=True, partialFilterExpression={"idempotencyKey": STRING}, name="idempotency")
        self._messages.create_index(
            [("tenantId", ASCENDING), ("targetProcessId", ASCENDING), ("drainedAt", ASCENDING),
             ("seq", ASCENDING)],
            name="pending")
        self._messages.create_index([("drainedAt", ASCENDING), ("createdAt", ASCENDING)],
                                    name="sweeper")
        self._messages.create_index(
            [("tenantId", ASCENDING), ("deadLetter.at", ASCENDING)],
            partialFilterExpression={"deadLetter": {"$type": "object"}}, name="dead_letters")
        self._processes.create_index(
            [("controlRequestedAt", ASCENDING)],
            partialFilterExpression={"pendingControl": STRING}, name="pending_control")
        self._chat.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("seq", ASCENDING)],
            unique=True, name="seq")
        self._chat.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("sourceMessageId", ASCENDING),
             ("role", ASCENDING)],
            unique=True, partialFilterExpression={"sourceMessageId": STRING}, name="source")
        self._turns.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("epoch", ASCENDING)],
            name="by_process")
        self._turns.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("lifecycle", ASCENDING),
             ("epoch", ASCENDING)],
            name="by_lifecycle")

    @translated
    def append_message(self, message: InboxMessage) -> tuple[InboxMessage, bool]:
        return append_in(self.db.database, message)

    @translated
    def pending_messages(self, tenant_id: str, process_id: str,
                         limit: int = 1000) -> list[InboxMessage]:
        if limit <= 0:  # Mongo reads limit(0) as "no limit"
            return []
        cursor = self._messages.find(
            {"tenantId": tenant_id, "targetProcessId": process_id, "drainedAt": None}
        ).sort("seq", ASCENDING).limit(limit)
        return [from_bson(InboxMessage, raw) for raw in cursor]

    def turn_start(self, tenant_id: str, process_id: str, *, messages: int,
                   events: int) -> TurnStart:
        return turn_start_read_by_read(self.db, tenant_id, process_id, messages=messages,
                                       events=events)

    @translated
    def stale_pending(self, older_than: datetime, limit: int = 100) -> list[tuple[str, str]]:
        if limit <= 0:
            return []
        cutoff = naive_utc(older_than)
        # Each source yields at most ``limit`` pairs with the time they have
        # waited since, oldest first; the oldest ``limit`` of both are the answer.
        since = self._stale_messages(cutoff, limit)
        controls = self._processes.find(
            {"pendingControl": STRING, "controlRequestedAt": {"$lt": cutoff},
             "status": {"$ne": ProcessStatus.CLOSED.value}},
            projection={"tenantId": True, "controlRequestedAt": True},
        ).sort("controlRequestedAt", ASCENDING).limit(limit)
        for raw in controls:
            pair = (raw["tenantId"], raw["_id"])
            at = naive_utc(raw["controlRequestedAt"])
            if pair not in since or at < since[pair]:
                since[pair] = at
        return sorted(since, key=since.__getitem__)[:limit]

    @translated
    def unsettled(self, limit: int = 100) -> list[tuple[str, str]]:
        if limit <= 0:
            return []
        rows = self._processes.find({"status": {"$in": _values(lifecycle.UNSETTLED)}},
                                    projection={"tenantId": True}).limit(limit)
        return [(raw["tenantId"], raw["_id"]) for raw in rows]

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
        """The pairs whose process exists in that tenant and is not CLOSED/PAUSED/SUSPENDED
        (or is CLOSED/FAILED, which answers what reaches it)."""
        rows = self._processes.find(
            {"_id": {"$in": [pid for _, pid in pairs]},
             "$or": [{"status": {"$nin": _values(lifecycle.HOLDS_MESSAGES)}},
                     {"status": ProcessStatus.CLOSED.value,
                      "closeReason": lifecycle.ANSWERS_WHEN_CLOSED.value}]},
            projection={"tenantId": True},
        )
        ok = {(raw["tenantId"], raw["_id"]) for raw in rows}
        return [pair for pair in pairs if pair in ok]

    @translated
    def acquire_epoch(self, tenant_id: str, process_id: str,
                      message_ids: Sequence[str] = ()) -> ThinkProcess:
        before = self._processes.find_one_and_update(
            {"_id": process_id, "tenantId": tenant_id},
            [{"$set": {
                "epoch": {"$add": ["$epoch", 1]},
                "turnAttempts": {"$add": [{"$ifNull": ["$turnAttempts", 0]}, 1]},
                "status": {"$cond": [{"$in": ["$status", _values(lifecycle.MARKED_RUNNING)]},
                                     ProcessStatus.RUNNING.value, "$status"]},
            }}],
            return_document=ReturnDocument.BEFORE,
        )
        if before is None:
            raise NotFound(f"process {process_id} not found")
        if message_ids:
            self._messages.update_many(
                {"_id": {"$in": list(dict.fromkeys(message_ids))}, "tenantId": tenant_id,
                 "targetProcessId": process_id, "drainedAt": None},
                {"$inc": {"attempts": 1}})
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
                    commit: TurnCommit) -> Committed | None:
        drained = list(dict.fromkeys(commit.drained_ids))
        mine = {"_id": {"$in": drained}, "tenantId": tenant_id, "targetProcessId": process_id,
                "drainedAt": None}
        listed = {**mine, "_id": {"$in": drained + list(commit.dead_letters)}}
        turn = {"epoch": epoch, "turn": commit.record.id}
        if (drained or commit.dead_letters) and self._messages.update_many(
                {**listed, "$or": [{"drainClaim.epoch": {"$ne": epoch}},
                                   {"drainClaim.turn": turn["turn"]}]},
                {"$set": {"drainClaim": turn}},
        ).matched_count != len(drained) + len(commit.dead_letters):
            self._require_process(tenant_id, process_id)
            return None
        lines, stored = self._unwritten(tenant_id, process_id, commit.chat)
        now = naive_utc(utcnow())
        outcome: dict[str, Any] = {
            "status": commit.status.value,
            "closeReason": commit.close_reason.value if commit.close_reason else None,
            "lastError": commit.last_error,
            "engineFailures": commit.engine_failures,
            "turnAttempts": 0,
            "updatedAt": now,
        }
        if commit.engine_state is not None:
            outcome["engineState"] = to_jsonable_python(commit.engine_state)
        claimed = self._processes.find_one_and_update(
            {"_id": process_id, "tenantId": tenant_id, "epoch": epoch},
            {"$set": outcome, "$inc": {"nextChatSeq": len(lines)}},
            projection={"nextChatSeq": True, "sessionId": True},
            return_document=ReturnDocument.AFTER,
        )
        if claimed is None:
            self._require_process(tenant_id, process_id)
            return None
        if commit.control_handled is not None:
            self._processes.update_one(
                {"_id": process_id, "tenantId": tenant_id, "epoch": epoch,
                 "pendingControl": commit.control_handled},
                {"$set": {"pendingControl": None, "controlRequestedAt": None}},
            )
        closed = commit.status is ProcessStatus.CLOSED
        if closed or commit.journal_opened:
            clear_journal(self.db.database, tenant_id, process_id, in_doubt=closed)
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
        events = turn_events(tenant_id, claimed["sessionId"], process_id, epoch,
                             stored + written, commit.events)
        enqueue_in(self.db.database, events)
        for child in commit.spawned:
            with contextlib.suppress(DuplicateKeyError):  # a retried commit of the same turn
                insert_process(self.db.database, child)
        for message in commit.outbox:
            append_in(self.db.database, message)  # keyed messages are not duplicated by a retry
        for timer in commit.timers:
            self._timers.replace_one({"_id": timer.id}, to_bson(timer), upsert=True)
        if drained:
            self._messages.update_many(mine, {"$set": {"drainedAt": now, "drainedEpoch": epoch},
                                              "$unset": {"drainClaim": ""}})
        if commit.uncounted_ids:
            self._messages.update_many(
                {"_id": {"$in": list(dict.fromkeys(commit.uncounted_ids))},
                 "tenantId": tenant_id, "targetProcessId": process_id, "drainedAt": None,
                 "attempts": {"$gt": 0}},
                {"$inc": {"attempts": -1}})
        for message_id, mark in commit.dead_letters.items():
            self._messages.update_one(
                {**mine, "_id": message_id},
                {"$set": {"drainedAt": now, "drainedEpoch": epoch,
                          "deadLetter": {**mark.dump(), "at": naive_utc(mark.at)}},
                 "$unset": {"drainClaim": ""}})
        record = commit.record.model_copy(
            update={"tenant_id": tenant_id, "process_id": process_id, "epoch": epoch})
        try:
            self._turns.insert_one(to_bson(record))
        except DuplicateKeyError:  # a retried commit of the same turn: its usage is added
            pass
        else:
            add_usage(self.db.database, commit.usage)
        return Committed(written, events)

    def _require_process(self, tenant_id: str, process_id: str) -> None:
        """Tell a fenced commit (None) from one of a missing process (``NotFound``)."""
        if not process_exists(self.db.database, tenant_id, process_id):
            raise NotFound(f"process {process_id} not found")

    def _unwritten(self, tenant_id: str, process_id: str, chat: Iterable[ChatMessage]
                   ) -> tuple[list[ChatMessage], list[ChatMessage]]:
        """The lines not already stored under their (sourceMessageId, role), in order, and
        the stored lines that match others of ``chat``, in ``seq`` order."""
        chat = list(chat)
        sources = [line.source_message_id for line in chat if line.source_message_id]
        wanted = {(line.source_message_id, line.role.value) for line in chat}
        stored: list[ChatMessage] = []
        if sources:
            existing = self._chat.find(
                {"tenantId": tenant_id, "processId": process_id,
                 "sourceMessageId": {"$in": sources}}).sort("seq", ASCENDING)
            stored = [line for line in (from_bson(ChatMessage, raw) for raw in existing)
                      if (line.source_message_id, line.role.value) in wanted]
        seen: set[tuple[str | None, str]] = {
            (line.source_message_id, line.role.value) for line in stored}
        lines = []
        for line in chat:
            key = (line.source_message_id, line.role.value)
            if line.source_message_id and key in seen:
                continue
            seen.add(key)
            lines.append(line)
        return lines, stored

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
    def turn_records(self, tenant_id: str, process_id: str, *, lifecycle: str | None = None,
                     last: int | None = None) -> list[TurnRecord]:
        query: dict[str, Any] = {"tenantId": tenant_id, "processId": process_id}
        if lifecycle is not None:
            query["lifecycle"] = lifecycle
        if last is None:
            cursor = self._turns.find(query).sort("epoch", ASCENDING)
            return [from_bson(TurnRecord, raw) for raw in cursor]
        cursor = self._turns.find(query).sort("epoch", DESCENDING)
        return [from_bson(TurnRecord, raw) for raw in reversed(list(cursor.limit(last)))]
