"""MongoDB ``TransferStore``: every collection of the other adapters read out as the record
form of its kind (``store/transfer.py``: the SQL stores' rows) and written back from it.

Mapping. A kind's ``doc`` is the stored document without ``_id`` and the adapter's own
fields (``terms``, ``length``, ``tokens``, ``nextChatSeq``, ``probeAt``, ``drainClaim``,
the ``vector*`` fields, ``tenantId``/``projectId`` of a definition, …), its BSON datetimes
as the ISO text pydantic writes; the other columns are computed from the document as the
SQL adapters compute them (``to_ms`` of its times, ``tool`` ``''`` for a server's own
health record, …). Imported, ``doc`` is validated by its model and stored as it came, its
model's datetime fields made BSON datetimes (as ``to_bson`` stores them), with ``_id`` and
the fields the MongoDB adapters derive: a memory entry's ``terms`` and its scope's counter
in ``memory_scopes`` (recounted from the entries of every scope an import touches), a
chunk's ``terms``. Kinds without a collection of their own:

- ``lanes``: the lane fields of the process document (``status``, ``epoch``, ``nextSeq``,
  ``nextChatSeq``, ``pendingControl``, ``controlRequestedAt``, ``turnAttempts``). SQL keeps
  them in ``lanes`` and never updates their copies in ``processes.doc``; an imported
  process keeps those copies as its ``doc`` held them in ``_importedDoc``, so it exports
  the same ``doc`` again (a process made on MongoDB exports its current values there). A
  process stays marked ``_laneToImport`` from its import until its lane's, and exports no
  lane meanwhile; a lane imported before its process is parked (below).
- ``messages``: ``drained_at`` (``sql.iso`` text), ``drained_epoch``, ``attempts``, ``seq``
  and ``dead_ms`` are the message document's fields; its ``doc`` holds them as SQL's
  ``append_in`` wrote them (no drain, no attempt), ``deadLetter`` with its ``at`` as text.
- ``knowledge_chunks`` and ``knowledge_vectors``: a chunk's SQL integer id is its
  ``rowId`` (a sparse unique index ``transfer_row``); the chunks that have none (written on
  MongoDB) are numbered past the highest when an export of either kind starts, so both
  kinds name them alike. A vector is the ``vector``, ``vectorModel`` and ``vectorDim`` of
  its chunk's document; its import sets them on the chunk (parked if the chunk has not come
  yet).
  A document's ``tokens`` is counted only while it is READY (as SQL's ``_put`` leaves it).
- ``knowledge_vector_generations``: a collection of that name that only this adapter
  keeps (MongoDB caches no vectors; the generation is kept for an export back to SQL). A
  project with vectors and no imported generation exports generation 1 (what SQLite holds
  after one write; any value serves SQL's cache, which starts empty).
- Parked: a lane or vector imported before its process or chunk waits in
  ``transfer_parked`` (exported with its kind) until that comes; the import of the process
  or chunk sets it and drops it. So the kinds may be imported in any order, but a store is
  served only once every kind is in (a parked record is invisible to the other ports).
- ``recipes``: the collections ``recipes``, ``strategies`` and ``templates``, one per
  ``kind``, merged in key order.
- ``llm_usage``: the usage collection (``usage.py``), whose ``_id`` is the kind's key.

Order. Key-ordered kinds come in their key's order (string ``_id`` or key fields, compared
as MongoDB compares strings: by bytes). Insertion-ordered kinds come in the MongoDB
adapters' oldest-first order, ``createdAt`` then the key (a chat line: its process and
``seq``; a turn record: its process, epoch and ``endedAt``; a journal entry: its process and
``seq``), so an export from MongoDB may list them otherwise than one from SQL: the
engine's digest does not depend on the order. A cursor is the last record's sort values.

Exporting writes twice, both no more than a serving store would do: it numbers unnumbered
chunks (above), and before the first page of ``messages`` it delivers every message an
Inbox item still holds in its ``_outbox`` (``redeliver_inbox_messages``, what the
housekeeping does), so no answer is lost for sitting in an item's outbox.

Atomicity (no multi-document transactions): ``import_records`` reads which keys of the
batch are stored, then inserts the others in order (``insert_many(ordered=True)``) — a
record of a stored key is skipped untouched; a clash on another unique index (a token hash,
a document name) is ``Conflict``. Then come the derived writes: the memory counters of the
batch's scopes (recounted, so they are right whatever ran before), a lane's ``$set`` on its
process (conditional on ``_laneToImport``), a vector's on its chunk (conditional on having
none), the parked records of the batch's processes or chunks (set, then dropped). A crash
part way leaves a prefix of the batch inserted and its derived writes perhaps undone;
running the import again skips what is stored and finishes the rest (the recounts and the
parked records of every process or chunk of the batch, stored before or not). Not safe
against a serving store or two imports at once.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bson import Binary
from pydantic import ValidationError
from pydantic_core import to_jsonable_python
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import BulkWriteError

from vancetope_brain.errors import Conflict, InvalidInput
from vancetope_brain.models import (
    ApiToken,
    ChatMessage,
    Document,
    InboxMessage,
    JournalEntry,
    OutboxEvent,
    Project,
    Session,
    Tenant,
    ThinkProcess,
    Timer,
    TurnRecord,
    User,
)
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.models.inbox import InboxItem, NotificationDelivery
from vancetope_brain.models.inspector import TurnInspection
from vancetope_brain.models.knowledge import Chunk, DocumentStatus, KnowledgeDocument
from vancetope_brain.models.memory import MemoryEntry
from vancetope_brain.models.recipe import Definition, Recipe
from vancetope_brain.models.schedule import Schedule, ScheduleRun
from vancetope_brain.models.settings import StoredSetting
from vancetope_brain.models.strategy import Strategy
from vancetope_brain.models.tool_health import ToolHealth
from vancetope_brain.models.webhooks import WebhookDelivery, WebhookSubscription
from vancetope_brain.models.workflow_template import WorkflowTemplate
from vancetope_brain.store.documents import index_terms
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, naive_utc, translated
from vancetope_brain.store.mongo.lanes import MESSAGES
from vancetope_brain.store.mongo.sessions import PROCESSES
from vancetope_brain.store.mongo.usage import KEY_FIELDS, USAGE, usage_id
from vancetope_brain.store.sql import from_ms, iso, to_ms
from vancetope_brain.store.transfer import (
    KIND_BY_NAME,
    KINDS,
    Kind,
    TransferStore,
    cursor_values,
    kind_named,
)
from vancetope_brain.store.user_inbox import UserInboxStore

Order = tuple[tuple[str, bool], ...]
"""A collection's export order: (field, whether it holds a time), ascending."""
Raw = dict[str, Any]

_OLDEST: Order = (("createdAt", True), ("_id", False))
_BY_ID: Order = (("_id", False),)
_LANE_FIELDS = ("status", "epoch", "nextSeq", "pendingControl", "controlRequestedAt",
                "turnAttempts")
"""A process's fields SQL keeps in ``lanes``, whose copies in ``processes.doc`` stay as
they were written."""
_IMPORTED_DOC = "_importedDoc"
_LANE_TO_IMPORT = "_laneToImport"
_ROW = "rowId"
_VECTOR = ("vector", "vectorModel", "vectorDim")
_CHUNKS = "knowledge_chunks"
_GENERATIONS = "knowledge_vector_generations"
_PARKED = "transfer_parked"
"""Lanes and vectors imported before their process or chunk, until it comes."""
_KINDS_OF_DEFINITION: tuple[type[Definition], ...] = (Recipe, Strategy, WorkflowTemplate)
_DEFINITIONS = {kind.KIND: kind for kind in sorted(_KINDS_OF_DEFINITION,
                                                   key=lambda kind: kind.KIND)}
"""The definition kinds by ``kind``, in key order (each has a collection of its own)."""
_READY = DocumentStatus.READY.value
_DUPLICATE_KEY = 11000


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else to_ms(_aware(moment))


def _naive_ms(ms: int | None) -> datetime | None:
    moment = from_ms(ms)
    return None if moment is None else naive_utc(moment)


def _jsonable(value: Any) -> Any:
    """A stored value as JSON: BSON datetimes as the ISO text pydantic writes."""
    if isinstance(value, datetime):
        return to_jsonable_python(_aware(value))
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    return value


def _doc(raw: Raw, extras: Iterable[str] = ()) -> Raw:
    """The record's ``doc``: the stored document without ``_id`` and ``extras``."""
    left_out = {"_id", *extras}
    return {key: _jsonable(value) for key, value in raw.items() if key not in left_out}


def _bson(model: type[Document], doc: Raw, **extra: Any) -> Raw:
    """The stored form of a record's ``doc``, validated by ``model``: as it came, its
    model's datetime fields BSON datetimes (as ``to_bson``), ``_id`` its id, then ``extra``."""
    loaded = model.load(doc)
    raw = dict(doc)
    for name, info in model.model_fields.items():
        value, alias = getattr(loaded, name), info.alias or name
        if isinstance(value, datetime) and alias in raw:
            raw[alias] = naive_utc(value)
    if "id" in raw:
        raw["_id"] = raw["id"]
    raw.update(extra)
    return raw


def _checked(kind: Kind, records: list[Raw]) -> None:
    """``InvalidInput`` unless each record holds exactly the kind's columns, a ``json`` one
    an object and a ``bytes`` one base64 text (before anything is written)."""
    for record in records:
        if record.keys() != kind.columns.keys():
            raise InvalidInput(f"a record of {kind.name} has the columns {sorted(record)}, "
                               f"not {sorted(kind.columns)}")
        for column, typ in kind.columns.items():
            value = record[column]
            if typ == "json" and not isinstance(value, dict):
                raise InvalidInput(f"{kind.name}.{column} is not a JSON object")
            if typ == "bytes":
                try:
                    base64.b64decode(value, validate=True)
                except (binascii.Error, TypeError, ValueError) as e:
                    raise InvalidInput(f"{kind.name}.{column} is not base64 text: {e}") from None


def _get(raw: Raw, path: str) -> Any:
    for part in path.split("."):
        raw = raw[part]
    return raw


def _after(order: Order, values: list[Any], *, inclusive: bool = False) -> Raw:
    """The filter of the documents past ``values`` in ``order`` (or at them, ``inclusive``)."""
    values = [_naive_ms(v) if is_time else v for (_, is_time), v in zip(order, values,
                                                                        strict=True)]
    clauses = []
    for i, (name, _) in enumerate(order):
        last = inclusive and i == len(order) - 1
        clauses.append({**{n: v for (n, _), v in zip(order[:i], values[:i], strict=True)},
                        name: {"$gte" if last else "$gt": values[i]}})
    return {"$or": clauses}


def _position(order: Order, raw: Raw) -> list[Any]:
    """The sort values of ``raw`` in ``order``, times as milliseconds (a cursor's parts)."""
    return [_ms(_get(raw, name)) if is_time else _get(raw, name) for name, is_time in order]


def _page(collection: Any, query: Raw, order: Order, after: str | None,
          limit: int) -> tuple[list[Raw], str | None]:
    """Up to ``limit`` documents of ``query`` past the cursor in ``order``, and the next
    cursor (None when they were the last)."""
    if limit < 1:
        raise ValueError(f"a page holds at least one record, not {limit}")
    if after is not None:
        query = {"$and": [query, _after(order, cursor_values(after, len(order)))]}
    rows = list(collection.find(query).sort([(name, ASCENDING) for name, _ in order])
                .limit(limit + 1))
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, json.dumps(_position(order, rows[-1]))


def _merged(found: list[tuple[tuple[Any, ...], Raw]],
            limit: int) -> tuple[list[Raw], str | None]:
    """The first ``limit`` of several sources' (key, record) pairs in key order, the first
    source's record where two share a key, and the cursor (the last key; None when no more).
    Each source gave its first ``limit + 1`` past the cursor, so none is cut short."""
    if limit < 1:
        raise ValueError(f"a page holds at least one record, not {limit}")
    found = sorted(found, key=lambda pair: pair[0])  # stable: a source's order kept
    unique = [pair for i, pair in enumerate(found) if i == 0 or pair[0] != found[i - 1][0]]
    cursor = json.dumps(list(unique[limit - 1][0])) if len(unique) > limit else None
    return [record for _, record in unique[:limit]], cursor


def _hashable(key: Any) -> str:
    return json.dumps(key, sort_keys=True, default=str)


def _insert_new(collection: Any, docs: list[Raw]) -> list[Raw]:
    """Insert, in order, those of ``docs`` whose ``_id`` is not stored; returns them."""
    if not docs:
        return []
    stored = {_hashable(raw["_id"]) for raw in collection.find(
        {"_id": {"$in": [doc["_id"] for doc in docs]}}, {"_id": True})}
    new = [doc for doc in docs if _hashable(doc["_id"]) not in stored]
    if new:
        try:
            collection.insert_many(new, ordered=True)
        except BulkWriteError as e:
            if e.details["writeErrors"][0].get("code") == _DUPLICATE_KEY:  # another unique key
                raise Conflict(f"a record clashes with a stored one: {e}") from e
            raise
    return new


@dataclass(frozen=True)
class _Plain:
    """A kind held as one document per record in ``collection``.

    ``columns``: the record's columns but ``doc``, from the loaded model and the stored
    document; ``extras``: the stored fields that are not the model's; ``stored``: what the
    import adds to ``_bson``'s form of ``doc`` (``_id`` included where it is not the id)."""

    collection: str
    order: Order
    model: type[Document]
    columns: Callable[[Any, Raw], Raw]
    extras: tuple[str, ...] = ()
    stored: Callable[[Raw], Raw] = field(default=lambda record: {})


def _message_columns(message: InboxMessage, raw: Raw) -> Raw:
    dead = message.dead_letter
    return {"id": message.id, "tenant_id": message.tenant_id,
            "target_process_id": message.target_process_id, "seq": message.seq,
            "idempotency_key": message.idempotency_key, "created_ms": to_ms(message.created_at),
            "drained_at": None if message.drained_at is None else iso(message.drained_at),
            "drained_epoch": message.drained_epoch, "attempts": message.attempts,
            "dead_ms": None if dead is None else to_ms(_aware(dead.at))}


def _message_stored(record: Raw) -> Raw:
    drained = record["drained_at"]
    stored: Raw = {"seq": record["seq"], "drainedEpoch": record["drained_epoch"],
                   "attempts": record["attempts"],
                   "drainedAt": None if drained is None
                   else naive_utc(datetime.fromisoformat(drained))}
    mark = record["doc"].get("deadLetter")
    if isinstance(mark, dict):
        stored["deadLetter"] = {**mark, "at": naive_utc(datetime.fromisoformat(mark["at"]))}
    return stored


def _item_columns(item: InboxItem, raw: Raw) -> Raw:
    return {"id": item.id, "tenant_id": item.tenant_id, "assigned_to": item.assigned_to_user_id,
            "status": item.status.value, "criticality": item.criticality.value,
            "origin_process_id": item.origin_process_id,
            "origin_session_id": item.origin_session_id,
            "idempotency_key": item.idempotency_key, "created_ms": to_ms(item.created_at),
            "resolved_ms": None if item.resolved_at is None else to_ms(item.resolved_at),
            "revision": item.revision}


def _health_columns(health: ToolHealth, raw: Raw) -> Raw:
    return {"tenant_id": health.tenant_id, "project_id": health.project_id,
            "server": health.server, "tool": health.tool or "",
            "probe_ms": _ms(raw.get("probeAt"))}


def _health_stored(record: Raw) -> Raw:
    stored: Raw = {"_id": {"tenantId": record["tenant_id"], "projectId": record["project_id"],
                           "server": record["server"], "tool": record["tool"]}}
    if record["probe_ms"] is not None:
        stored["probeAt"] = _naive_ms(record["probe_ms"])
    return stored


def _memory_columns(entry: MemoryEntry, raw: Raw) -> Raw:
    return {"id": entry.id, "tenant_id": entry.tenant_id, "scope": entry.scope.value,
            "scope_id": entry.scope_id, "process_id": entry.process_id,
            "kind": entry.kind.value, "idempotency_key": entry.idempotency_key,
            "length": raw["length"]}


def _memory_stored(record: Raw) -> Raw:
    terms = MemoryEntry.load(record["doc"]).indexed_terms()
    return {"terms": sorted(set(terms)), "length": record["length"]}


def _document_columns(doc: KnowledgeDocument, raw: Raw) -> Raw:
    ready = doc.status is DocumentStatus.READY
    return {"tenant_id": doc.tenant_id, "id": doc.id, "project_id": doc.project_id,
            "name": doc.name, "version": doc.version, "status": doc.status.value,
            "size": doc.size, "chunks": doc.chunk_count,
            "tokens": raw.get("tokens", 0) if ready else 0}


_PLAIN: dict[str, _Plain] = {
    "tenants": _Plain("tenants", _OLDEST, Tenant, lambda t, raw: {"id": t.id}),
    "projects": _Plain(
        "projects", (("createdAt", True), ("tenantId", False), ("id", False)), Project,
        lambda p, raw: {"tenant_id": p.tenant_id, "id": p.id},
        stored=lambda r: {"_id": {"tenantId": r["tenant_id"], "id": r["id"]}}),
    "users": _Plain("users", _OLDEST, User,
                    lambda u, raw: {"id": u.id, "tenant_id": u.tenant_id}),
    "api_tokens": _Plain(
        "api_tokens", _OLDEST, ApiToken,
        lambda t, raw: {"id": t.id, "tenant_id": t.tenant_id, "user_id": t.user_id,
                        "token_hash": t.token_hash, "revoked": t.revoked},
        stored=lambda r: {"revoked": r["revoked"]}),
    "settings": _Plain(
        "settings", (("tenantId", False), ("level", False), ("scopeId", False), ("key", False)),
        StoredSetting,
        lambda s, raw: {"tenant_id": s.tenant_id, "level": s.level.value,
                        "scope_id": s.scope_id, "key": s.key},
        stored=lambda r: {"_id": {"tenantId": r["tenant_id"], "level": r["level"],
                                  "scopeId": r["scope_id"], "key": r["key"]}}),
    "sessions": _Plain(
        "sessions", _OLDEST, Session,
        lambda s, raw: {"id": s.id, "tenant_id": s.tenant_id, "user_id": s.user_id,
                        "created_ms": to_ms(s.created_at)}),
    "processes": _Plain(
        PROCESSES, _OLDEST, ThinkProcess,
        lambda p, raw: {"id": p.id, "tenant_id": p.tenant_id, "session_id": p.session_id,
                        "created_ms": to_ms(p.created_at)},
        extras=("nextChatSeq", _IMPORTED_DOC, _LANE_TO_IMPORT),
        stored=lambda r: {"nextChatSeq": 0, _LANE_TO_IMPORT: True, _IMPORTED_DOC: {
            name: r["doc"][name] for name in _LANE_FIELDS if name in r["doc"]}}),
    "messages": _Plain(MESSAGES, _BY_ID, InboxMessage, _message_columns,
                       extras=("drainClaim",), stored=_message_stored),
    "chat": _Plain(
        "chat_messages", (("tenantId", False), ("processId", False), ("seq", False)),
        ChatMessage,
        lambda c, raw: {"id": c.id, "tenant_id": c.tenant_id, "process_id": c.process_id,
                        "seq": c.seq, "role": c.role.value,
                        "source_message_id": c.source_message_id}),
    "turns": _Plain(
        "turn_records", (("tenantId", False), ("processId", False), ("epoch", False),
                         ("endedAt", True), ("_id", False)), TurnRecord,
        lambda t, raw: {"id": t.id, "tenant_id": t.tenant_id, "process_id": t.process_id,
                        "epoch": t.epoch}),
    "timers": _Plain(
        "process_timers", _BY_ID, Timer,
        lambda t, raw: {"id": t.id, "tenant_id": t.tenant_id, "process_id": t.process_id,
                        "due_ms": to_ms(t.due_at)}),
    "journal": _Plain(
        "turn_journal", (("tenantId", False), ("processId", False), ("seq", False)),
        JournalEntry,
        lambda e, raw: {"tenant_id": e.tenant_id, "process_id": e.process_id, "key": e.key,
                        "state": e.state.value},
        extras=("seq",)),
    "event_outbox": _Plain(
        "event_outbox", _BY_ID, OutboxEvent,
        lambda e, raw: {"id": e.id, "tenant_id": e.tenant_id, "process_id": e.process_id,
                        "epoch": e.epoch, "idx": e.index, "created_ms": to_ms(e.created_at)}),
    "inbox_items": _Plain("inbox_items", _BY_ID, InboxItem, _item_columns,
                          extras=("_outbox",)),
    "notification_deliveries": _Plain(
        "notification_deliveries", _OLDEST, NotificationDelivery,
        lambda d, raw: {"id": d.id, "tenant_id": d.tenant_id, "item_id": d.item_id,
                        "user_id": d.user_id, "channel": d.channel, "status": d.status.value,
                        "created_ms": to_ms(d.created_at)}),
    "webhook_subscriptions": _Plain(
        "webhook_subscriptions", _OLDEST, WebhookSubscription,
        lambda w, raw: {"id": w.id, "tenant_id": w.tenant_id, "project_id": w.project_id,
                        "created_ms": to_ms(w.created_at), "revision": w.revision}),
    "webhook_deliveries": _Plain(
        "webhook_deliveries", _OLDEST, WebhookDelivery,
        lambda d, raw: {"id": d.id, "tenant_id": d.tenant_id,
                        "subscription_id": d.subscription_id, "status": d.status.value,
                        "next_ms": to_ms(d.next_at), "claim": d.claim,
                        "created_ms": to_ms(d.created_at)}),
    "tool_health": _Plain(
        "tool_health", (("tenantId", False), ("projectId", False), ("server", False),
                        ("_id.tool", False)),
        ToolHealth, _health_columns, extras=("probeAt",), stored=_health_stored),
    "memory_entries": _Plain("memory_entries", _BY_ID, MemoryEntry, _memory_columns,
                             extras=("terms", "length"), stored=_memory_stored),
    "audit_log": _Plain(
        "audit_log", _BY_ID, AuditRecord,
        lambda a, raw: {"id": a.id, "tenant_id": a.tenant_id, "at_ms": to_ms(a.at)}),
    "turn_inspections": _Plain(
        "turn_inspections", _BY_ID, TurnInspection,
        lambda t, raw: {"id": t.id, "tenant_id": t.tenant_id, "session_id": t.session_id,
                        "process_id": t.process_id, "at_ms": to_ms(t.started_at),
                        "head": t.head().dump()}),
    "schedules": _Plain(
        "schedules", _OLDEST, Schedule,
        lambda s, raw: {"id": s.id, "tenant_id": s.tenant_id, "project_id": s.project_id,
                        "user_id": s.user_id, "next_ms": None if s.paused or s.next_run_at
                        is None else to_ms(s.next_run_at)}),
    "schedule_runs": _Plain(
        "schedule_runs", _BY_ID, ScheduleRun,
        lambda r, raw: {"id": r.id, "tenant_id": r.tenant_id, "schedule_id": r.schedule_id,
                        "tick_ms": to_ms(r.tick), "status": r.status.value,
                        "created_ms": to_ms(r.created_at)}),
    "knowledge_documents": _Plain(
        "knowledge_documents", (("tenantId", False), ("_id", False)), KnowledgeDocument,
        _document_columns, extras=("tokens",), stored=lambda r: {"tokens": r["tokens"]}),
}
"""The kinds held one document per record (the others: ``_SPECIAL`` below)."""


def _record(kind: str, values: Raw) -> Raw:
    """``values`` in the kind's column order (a missing column is a bug: ``KeyError``)."""
    return {name: values[name] for name in KIND_BY_NAME[kind].columns}


class MongoTransfer(MongoAdapter, TransferStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._database = db.database
        self._database[_CHUNKS].create_index(_ROW, unique=True, sparse=True,
                                             name="transfer_row")
        self._special: dict[str, tuple[Callable[[str | None, int], Any],
                                       Callable[[list[Raw]], int]]] = {
            "recipes": (self._export_definitions, self._import_definitions),
            "lanes": (self._export_lanes, self._import_lanes),
            "knowledge_chunks": (self._export_chunks, self._import_chunks),
            "knowledge_vectors": (self._export_vectors, self._import_vectors),
            _GENERATIONS: (self._export_generations, self._import_generations),
            USAGE: (self._export_usage, self._import_usage),
        }

    @translated
    def export_page(self, kind: str, after: str | None, limit: int
                    ) -> tuple[list[Raw], str | None]:
        kind_named(kind)
        if kind in self._special:
            records, cursor = self._special[kind][0](after, limit)
            return records, cursor
        plain = _PLAIN[kind]
        if kind == "messages" and after is None:
            self._deliver_outboxes()
        rows, cursor = _page(self._database[plain.collection], {}, plain.order, after, limit)
        return [self._plain_record(kind, plain, raw) for raw in rows], cursor

    @translated
    def import_records(self, kind: str, records: list[Raw]) -> int:
        _checked(kind_named(kind), records)
        try:
            return self._import(kind, records)
        except ValidationError as e:
            raise InvalidInput(f"a record of {kind} holds an invalid document: {e}") from None

    def _import(self, kind: str, records: list[Raw]) -> int:
        if kind in self._special:
            return self._special[kind][1](records)
        plain = _PLAIN[kind]
        docs = [_bson(plain.model, record["doc"], **plain.stored(record)) for record in records]
        if kind == "processes":
            return self._import_processes(docs)
        if kind == "journal":
            self._number_journal(docs)
        written = _insert_new(self._database[plain.collection], docs)
        if kind == "memory_entries":
            self._recount_memory(docs)
        return len(written)

    @translated
    def is_empty(self) -> bool:
        collections = {plain.collection for plain in _PLAIN.values()} | {
            kind.COLLECTION for kind in _DEFINITIONS.values()} | {_CHUNKS, _GENERATIONS, _PARKED,
                                                                  USAGE}
        return all(self._database[name].find_one({}, {"_id": True}) is None
                   for name in sorted(collections))

    # -- plain kinds ------------------------------------------------------------------

    def _plain_record(self, kind: str, plain: _Plain, raw: Raw) -> Raw:
        doc = _doc(raw, plain.extras)
        model = from_bson(plain.model, dict(raw))
        if kind == "processes" and _IMPORTED_DOC in raw:
            imported = raw[_IMPORTED_DOC]
            for name in _LANE_FIELDS:
                if name in imported:
                    doc[name] = imported[name]
                else:
                    doc.pop(name, None)
        if kind == "messages":  # as SQL's append_in wrote it; the columns say the rest
            doc.update(drainedAt=None, drainedEpoch=None, attempts=0)
        return _record(kind, {**plain.columns(model, raw), "doc": doc})

    def _deliver_outboxes(self) -> None:
        inbox = self.db.port(UserInboxStore)
        while inbox.redeliver_inbox_messages(100) == 100:
            pass

    def _number_journal(self, docs: list[Raw]) -> None:
        """Give each entry the next position of its process's journal, in record order."""
        journal = self._database[_PLAIN["journal"].collection]
        next_seq: dict[tuple[str, str], int] = {}
        for doc in docs:
            mine = (doc["tenantId"], doc["processId"])
            if mine not in next_seq:
                last = journal.find_one({"tenantId": mine[0], "processId": mine[1]},
                                        {"seq": True}, sort=[("seq", DESCENDING)])
                next_seq[mine] = 0 if last is None else last["seq"] + 1
            doc["seq"] = next_seq[mine]
            next_seq[mine] += 1

    def _recount_memory(self, docs: list[Raw]) -> None:
        """Set the counter of each scope of ``docs`` to what its entries hold."""
        entries, scopes = self._database["memory_entries"], self._database["memory_scopes"]
        for key in sorted({(d["tenantId"], d["scope"], d["scopeId"]) for d in docs}):
            counter = {"tenantId": key[0], "scope": key[1], "scopeId": key[2]}
            held = list(entries.aggregate([
                {"$match": dict(counter)},
                {"$group": {"_id": None, "entries": {"$sum": 1}, "terms": {"$sum": "$length"}}}]))
            scopes.update_one({"_id": counter}, {"$set": {
                "entries": held[0]["entries"] if held else 0,
                "terms": held[0]["terms"] if held else 0}}, upsert=True)

    # -- recipes: one collection per definition kind ------------------------------------

    def _export_definitions(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        position = None if after is None else cursor_values(after, 4)
        found: list[tuple[tuple[Any, ...], Raw]] = []
        for name, kind in _DEFINITIONS.items():
            query: Raw = {}
            if position is not None:
                tenant, project, last_kind, last_name = position
                if name == last_kind:
                    query = _after((("tenantId", False), ("projectId", False), ("name", False)),
                                   [tenant, project, last_name])
                else:
                    query = _after((("tenantId", False), ("projectId", False)),
                                   [tenant, project], inclusive=name > last_kind)
            rows = self._database[kind.COLLECTION].find(query).sort(
                [("tenantId", ASCENDING), ("projectId", ASCENDING), ("name", ASCENDING)]
            ).limit(limit + 1)
            found += [((raw["tenantId"], raw["projectId"], name, raw["name"]), _record(
                "recipes", {"tenant_id": raw["tenantId"], "project_id": raw["projectId"],
                            "kind": name, "name": raw["name"],
                            "doc": _doc(raw, ("tenantId", "projectId"))})) for raw in rows]
        return _merged(found, limit)

    def _import_definitions(self, records: list[Raw]) -> int:
        unknown = {record["kind"] for record in records} - set(_DEFINITIONS)
        if unknown:
            raise InvalidInput(f"definitions of unknown kinds: {', '.join(sorted(unknown))}")
        docs: dict[str, list[Raw]] = {name: [] for name in _DEFINITIONS}
        for record in records:  # all validated before any is written
            _DEFINITIONS[record["kind"]].load(record["doc"])
            tenant, project = record["tenant_id"], record["project_id"]
            docs[record["kind"]].append({
                **record["doc"], "tenantId": tenant, "projectId": project,
                "_id": {"tenantId": tenant, "projectId": project, "name": record["name"]}})
        return sum(len(_insert_new(self._database[kind.COLLECTION], docs[name]))
                   for name, kind in _DEFINITIONS.items())

    # -- lanes and vectors, which may come before their process or chunk ------------------

    def _parked(self, kind: str, after: str | None, limit: int
                ) -> list[tuple[tuple[Any, ...], Raw]]:
        """The first ``limit + 1`` parked records of ``kind`` past the cursor."""
        query: Raw = {"kind": kind}
        if after is not None:
            query["key"] = {"$gt": cursor_values(after, 1)[0]}
        rows = self._database[_PARKED].find(query).sort("key", ASCENDING).limit(limit + 1)
        return [((raw["key"],), raw["record"]) for raw in rows]

    def _park(self, kind: str, key: Any, record: Raw) -> bool:
        """Keep ``record`` until its process or chunk comes; False if it is kept already."""
        return bool(_insert_new(self._database[_PARKED], [
            {"_id": _hashable([kind, key]), "kind": kind, "key": key, "record": record}]))

    def _unpark(self, kind: str, keys: list[Any], write: Callable[[Raw], Any]) -> None:
        """Write the parked records of ``keys`` (``write`` is a no-op where done), then drop
        them."""
        parked = self._database[_PARKED]
        for raw in parked.find({"kind": kind, "key": {"$in": keys}}):
            write(raw["record"])
            parked.delete_one({"_id": raw["_id"]})

    def _import_processes(self, docs: list[Raw]) -> int:
        written = _insert_new(self._database[PROCESSES], docs)
        self._unpark("lanes", [doc["_id"] for doc in docs], self._set_lane)
        return len(written)

    def _set_lane(self, record: Raw) -> bool:
        """Set the lane on its process if that has none yet; whether it did."""
        return bool(self._database[PROCESSES].update_one(
            {"_id": record["process_id"], "tenantId": record["tenant_id"],
             _LANE_TO_IMPORT: True},
            {"$set": {"status": record["status"], "epoch": record["epoch"],
                      "nextSeq": record["next_seq"], "nextChatSeq": record["next_chat_seq"],
                      "pendingControl": record["pending_control"],
                      "controlRequestedAt": _naive_ms(record["control_requested_ms"]),
                      "turnAttempts": record["turn_attempts"]},
             "$unset": {_LANE_TO_IMPORT: ""}}).matched_count)

    def _export_lanes(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        query: Raw = {_LANE_TO_IMPORT: {"$exists": False}}
        if after is not None:
            query["_id"] = {"$gt": cursor_values(after, 1)[0]}
        rows = self._database[PROCESSES].find(query).sort("_id", ASCENDING).limit(limit + 1)
        return _merged([((raw["_id"],), _record("lanes", {
            "process_id": raw["_id"], "tenant_id": raw["tenantId"], "status": raw["status"],
            "epoch": raw["epoch"], "next_seq": raw["nextSeq"],
            "next_chat_seq": raw.get("nextChatSeq", 0),
            "pending_control": raw.get("pendingControl"),
            "control_requested_ms": _ms(raw.get("controlRequestedAt")),
            "turn_attempts": raw.get("turnAttempts", 0)})) for raw in rows]
            + self._parked("lanes", after, limit), limit)

    def _import_lanes(self, records: list[Raw]) -> int:
        processes, written = self._database[PROCESSES], 0
        for record in records:
            if self._set_lane(record):
                written += 1
            elif processes.find_one({"_id": record["process_id"]}, {"_id": True}) is None:
                written += self._park("lanes", record["process_id"], record)
        return written

    def _number_chunks(self) -> None:
        """Give every chunk without a ``rowId`` one past the highest (of the chunks and the
        parked vectors), in ``_id`` order."""
        chunks = self._database[_CHUNKS]
        last = chunks.find_one({_ROW: {"$exists": True}}, {_ROW: True},
                               sort=[(_ROW, DESCENDING)])
        parked = self._database[_PARKED].find_one({"kind": "knowledge_vectors"}, {"key": True},
                                                  sort=[("key", DESCENDING)])
        row = max(0, 0 if last is None else last[_ROW], 0 if parked is None else parked["key"])
        for raw in chunks.find({_ROW: {"$exists": False}}, {"_id": True}).sort("_id", ASCENDING):
            row += 1
            chunks.update_one({"_id": raw["_id"], _ROW: {"$exists": False}}, {"$set": {_ROW: row}})

    def _export_chunks(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        if after is None:
            self._number_chunks()
        rows, cursor = _page(self._database[_CHUNKS], {}, ((_ROW, False),), after, limit)
        return [_record("knowledge_chunks", {
            "id": raw[_ROW], "tenant_id": raw["tenantId"], "project_id": raw["projectId"],
            "document_id": raw["documentId"], "version": raw["documentVersion"],
            "ordinal": raw["ordinal"], "length": raw["length"], "text": raw["text"],
            "doc": _doc(raw, ("terms", "length", "text", _ROW, *_VECTOR))}) for raw in rows], cursor

    def _import_chunks(self, records: list[Raw]) -> int:
        docs = []
        for record in records:
            chunk = Chunk.load({**record["doc"], "text": record["text"]})
            docs.append({**record["doc"], "text": record["text"], "_id": chunk.id,
                         "terms": index_terms(chunk.text), "length": record["length"],
                         _ROW: record["id"]})
        written = _insert_new(self._database[_CHUNKS], docs)
        self._unpark("knowledge_vectors", [doc[_ROW] for doc in docs], self._set_vector)
        return len(written)

    def _set_vector(self, record: Raw) -> bool:
        """Set the vector on its chunk if that has none yet; whether it did."""
        return bool(self._database[_CHUNKS].update_one(
            {_ROW: record["chunk_id"], "tenantId": record["tenant_id"],
             "vector": {"$exists": False}},
            {"$set": {"vector": Binary(base64.b64decode(record["vector"])),
                      "vectorModel": record["model"], "vectorDim": record["dim"]}}
        ).matched_count)

    def _export_vectors(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        if after is None:
            self._number_chunks()
        query: Raw = {"vector": {"$exists": True}}
        if after is not None:
            query[_ROW] = {"$gt": cursor_values(after, 1)[0]}
        rows = self._database[_CHUNKS].find(query).sort(_ROW, ASCENDING).limit(limit + 1)
        return _merged([((raw[_ROW],), _record("knowledge_vectors", {
            "chunk_id": raw[_ROW], "tenant_id": raw["tenantId"], "project_id": raw["projectId"],
            "document_id": raw["documentId"], "version": raw["documentVersion"],
            "model": raw["vectorModel"], "dim": raw["vectorDim"],
            "vector": base64.b64encode(bytes(raw["vector"])).decode()})) for raw in rows]
            + self._parked("knowledge_vectors", after, limit), limit)

    def _import_vectors(self, records: list[Raw]) -> int:
        chunks, written = self._database[_CHUNKS], 0
        for record in records:
            if self._set_vector(record):
                written += 1
            elif chunks.find_one({_ROW: record["chunk_id"]}, {"_id": True}) is None:
                written += self._park("knowledge_vectors", record["chunk_id"], record)
        return written

    # -- vector generations ---------------------------------------------------------------

    def _export_generations(self, after: str | None,
                            limit: int) -> tuple[list[Raw], str | None]:
        """The imported generations, and generation 1 for each other project with vectors
        (what SQLite holds after one write)."""
        rows, _ = _page(self._database[_GENERATIONS], {},
                        (("tenantId", False), ("projectId", False)), after, limit + 1)
        found = [((raw["tenantId"], raw["projectId"]), raw["generation"]) for raw in rows]
        position = None if after is None else tuple(cursor_values(after, 2))
        with_vectors = sorted(
            key for key in ((group["_id"]["tenantId"], group["_id"]["projectId"])
                            for group in self._database[_CHUNKS].aggregate([
                                {"$match": {"vector": {"$exists": True}}},
                                {"$group": {"_id": {"tenantId": "$tenantId",
                                                    "projectId": "$projectId"}}}]))
            if position is None or key > position)
        found += [(key, 1) for key in with_vectors[:limit + 1]]
        return _merged([(key, _record(_GENERATIONS, {
            "tenant_id": key[0], "project_id": key[1], "generation": generation}))
            for key, generation in found], limit)

    def _import_generations(self, records: list[Raw]) -> int:
        docs = [{"_id": {"tenantId": r["tenant_id"], "projectId": r["project_id"]},
                 "tenantId": r["tenant_id"], "projectId": r["project_id"],
                 "generation": r["generation"]} for r in records]
        return len(_insert_new(self._database[_GENERATIONS], docs))

    # -- token usage ----------------------------------------------------------------------

    def _export_usage(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        rows, cursor = _page(self._database[USAGE], {},
                             tuple((f"_id.{name}", False) for name in KEY_FIELDS), after, limit)
        return [_record(USAGE, {
            "tenant_id": raw["tenantId"], "day": raw["day"], "session_id": raw["sessionId"],
            "model": raw["model"], "user_id": raw["userId"], "project_id": raw["projectId"],
            "tokens_in": raw["tokensIn"], "tokens_out": raw["tokensOut"],
            "calls": raw["calls"], "estimated_calls": raw["estimatedCalls"]})
            for raw in rows], cursor

    def _import_usage(self, records: list[Raw]) -> int:
        docs = []
        for r in records:
            key = usage_id(r["tenant_id"], r["day"], r["session_id"], r["model"],
                           r["user_id"], r["project_id"])
            docs.append({"_id": key, **key, "tokensIn": r["tokens_in"],
                         "tokensOut": r["tokens_out"], "calls": r["calls"],
                         "estimatedCalls": r["estimated_calls"]})
        return len(_insert_new(self._database[USAGE], docs))


assert set(_PLAIN) | {"recipes", "lanes", "knowledge_chunks", "knowledge_vectors",
                      _GENERATIONS, USAGE} == {kind.name for kind in KINDS}
