"""The MongoDB transfer's records of the kinds held one document per record
(``PLAIN``) and the helpers every kind shares: a document's BSON and JSON forms, the
export order and its cursor, inserting only what is not stored. ``transfer.py``
documents the mapping."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic_core import to_jsonable_python
from pymongo import ASCENDING
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
from vancetope_brain.models.knowledge import DocumentStatus, KnowledgeDocument
from vancetope_brain.models.memory import MemoryEntry
from vancetope_brain.models.schedule import Schedule, ScheduleRun
from vancetope_brain.models.settings import StoredSetting
from vancetope_brain.models.tool_health import ToolHealth
from vancetope_brain.models.webhooks import WebhookDelivery, WebhookSubscription
from vancetope_brain.store.mongo._codec import naive_utc
from vancetope_brain.store.mongo.lanes import MESSAGES
from vancetope_brain.store.mongo.sessions import PROCESSES
from vancetope_brain.store.sql import from_ms, iso, to_ms
from vancetope_brain.store.transfer import (
    KIND_BY_NAME,
    Kind,
    cursor_values,
)

Order = tuple[tuple[str, bool], ...]
"""A collection's export order: (field, whether it holds a time), ascending."""
Raw = dict[str, Any]

_OLDEST: Order = (("createdAt", True), ("_id", False))
_BY_ID: Order = (("_id", False),)
LANE_FIELDS = ("status", "epoch", "nextSeq", "pendingControl", "controlRequestedAt",
                "turnAttempts")
"""A process's fields SQL keeps in ``lanes``, whose copies in ``processes.doc`` stay as
they were written."""
IMPORTED_DOC = "_importedDoc"
LANE_TO_IMPORT = "_laneToImport"
_DUPLICATE_KEY = 11000


def aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def ms_of(moment: datetime | None) -> int | None:
    return None if moment is None else to_ms(aware(moment))


def naive_of_ms(ms: int | None) -> datetime | None:
    moment = from_ms(ms)
    return None if moment is None else naive_utc(moment)


def jsonable(value: Any) -> Any:
    """A stored value as JSON: BSON datetimes as the ISO text pydantic writes."""
    if isinstance(value, datetime):
        return to_jsonable_python(aware(value))
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [jsonable(item) for item in value]
    return value


def doc_of(raw: Raw, extras: Iterable[str] = ()) -> Raw:
    """The record's ``doc``: the stored document without ``_id`` and ``extras``."""
    left_out = {"_id", *extras}
    return {key: jsonable(value) for key, value in raw.items() if key not in left_out}


def bson_of(model: type[Document], doc: Raw, **extra: Any) -> Raw:
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


def check_records(kind: Kind, records: list[Raw]) -> None:
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


def field_of(raw: Raw, path: str) -> Any:
    for part in path.split("."):
        raw = raw[part]
    return raw


def query_after(order: Order, values: list[Any], *, inclusive: bool = False) -> Raw:
    """The filter of the documents past ``values`` in ``order`` (or at them, ``inclusive``)."""
    values = [naive_of_ms(v) if is_time else v for (_, is_time), v in zip(order, values,
                                                                        strict=True)]
    clauses = []
    for i, (name, _) in enumerate(order):
        last = inclusive and i == len(order) - 1
        clauses.append({**{n: v for (n, _), v in zip(order[:i], values[:i], strict=True)},
                        name: {"$gte" if last else "$gt": values[i]}})
    return {"$or": clauses}


def position_of(order: Order, raw: Raw) -> list[Any]:
    """The sort values of ``raw`` in ``order``, times as milliseconds (a cursor's parts)."""
    return [ms_of(field_of(raw, name)) if is_time else field_of(raw, name) for name, is_time in order]


def read_page(collection: Any, query: Raw, order: Order, after: str | None,
          limit: int) -> tuple[list[Raw], str | None]:
    """Up to ``limit`` documents of ``query`` past the cursor in ``order``, and the next
    cursor (None when they were the last)."""
    if limit < 1:
        raise ValueError(f"a page holds at least one record, not {limit}")
    if after is not None:
        query = {"$and": [query, query_after(order, cursor_values(after, len(order)))]}
    rows = list(collection.find(query).sort([(name, ASCENDING) for name, _ in order])
                .limit(limit + 1))
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, json.dumps(position_of(order, rows[-1]))


def merged_pages(found: list[tuple[tuple[Any, ...], Raw]],
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


def hashable(key: Any) -> str:
    return json.dumps(key, sort_keys=True, default=str)


def insert_new(collection: Any, docs: list[Raw]) -> list[Raw]:
    """Insert, in order, those of ``docs`` whose ``_id`` is not stored; returns them."""
    if not docs:
        return []
    stored = {hashable(raw["_id"]) for raw in collection.find(
        {"_id": {"$in": [doc["_id"] for doc in docs]}}, {"_id": True})}
    new = [doc for doc in docs if hashable(doc["_id"]) not in stored]
    if new:
        try:
            collection.insert_many(new, ordered=True)
        except BulkWriteError as e:
            if e.details["writeErrors"][0].get("code") == _DUPLICATE_KEY:  # another unique key
                raise Conflict(f"a record clashes with a stored one: {e}") from e
            raise
    return new


@dataclass(frozen=True)
class Plain:
    """A kind held as one document per record in ``collection``.

    ``columns``: the record's columns but ``doc``, from the loaded model and the stored
    document; ``extras``: the stored fields that are not the model's; ``stored``: what the
    import adds to ``bson_of``'s form of ``doc`` (``_id`` included where it is not the id)."""

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
            "dead_ms": None if dead is None else to_ms(aware(dead.at))}


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
            "probe_ms": ms_of(raw.get("probeAt"))}


def _health_stored(record: Raw) -> Raw:
    stored: Raw = {"_id": {"tenantId": record["tenant_id"], "projectId": record["project_id"],
                           "server": record["server"], "tool": record["tool"]}}
    if record["probe_ms"] is not None:
        stored["probeAt"] = naive_of_ms(record["probe_ms"])
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


PLAIN: dict[str, Plain] = {
    "tenants": Plain("tenants", _OLDEST, Tenant, lambda t, raw: {"id": t.id}),
    "projects": Plain(
        "projects", (("createdAt", True), ("tenantId", False), ("id", False)), Project,
        lambda p, raw: {"tenant_id": p.tenant_id, "id": p.id},
        stored=lambda r: {"_id": {"tenantId": r["tenant_id"], "id": r["id"]}}),
    "users": Plain("users", _OLDEST, User,
                    lambda u, raw: {"id": u.id, "tenant_id": u.tenant_id}),
    "api_tokens": Plain(
        "api_tokens", _OLDEST, ApiToken,
        lambda t, raw: {"id": t.id, "tenant_id": t.tenant_id, "user_id": t.user_id,
                        "token_hash": t.token_hash, "revoked": t.revoked},
        stored=lambda r: {"revoked": r["revoked"]}),
    "settings": Plain(
        "settings", (("tenantId", False), ("level", False), ("scopeId", False), ("key", False)),
        StoredSetting,
        lambda s, raw: {"tenant_id": s.tenant_id, "level": s.level.value,
                        "scope_id": s.scope_id, "key": s.key},
        stored=lambda r: {"_id": {"tenantId": r["tenant_id"], "level": r["level"],
                                  "scopeId": r["scope_id"], "key": r["key"]}}),
    "sessions": Plain(
        "sessions", _OLDEST, Session,
        lambda s, raw: {"id": s.id, "tenant_id": s.tenant_id, "user_id": s.user_id,
                        "created_ms": to_ms(s.created_at)}),
    "processes": Plain(
        PROCESSES, _OLDEST, ThinkProcess,
        lambda p, raw: {"id": p.id, "tenant_id": p.tenant_id, "session_id": p.session_id,
                        "created_ms": to_ms(p.created_at)},
        extras=("nextChatSeq", IMPORTED_DOC, LANE_TO_IMPORT),
        stored=lambda r: {"nextChatSeq": 0, LANE_TO_IMPORT: True, IMPORTED_DOC: {
            name: r["doc"][name] for name in LANE_FIELDS if name in r["doc"]}}),
    "messages": Plain(MESSAGES, _BY_ID, InboxMessage, _message_columns,
                       extras=("drainClaim",), stored=_message_stored),
    "chat": Plain(
        "chat_messages", (("tenantId", False), ("processId", False), ("seq", False)),
        ChatMessage,
        lambda c, raw: {"id": c.id, "tenant_id": c.tenant_id, "process_id": c.process_id,
                        "seq": c.seq, "role": c.role.value,
                        "source_message_id": c.source_message_id}),
    "turns": Plain(
        "turn_records", (("tenantId", False), ("processId", False), ("epoch", False),
                         ("endedAt", True), ("_id", False)), TurnRecord,
        lambda t, raw: {"id": t.id, "tenant_id": t.tenant_id, "process_id": t.process_id,
                        "epoch": t.epoch}),
    "timers": Plain(
        "process_timers", _BY_ID, Timer,
        lambda t, raw: {"id": t.id, "tenant_id": t.tenant_id, "process_id": t.process_id,
                        "due_ms": to_ms(t.due_at)}),
    "journal": Plain(
        "turn_journal", (("tenantId", False), ("processId", False), ("seq", False)),
        JournalEntry,
        lambda e, raw: {"tenant_id": e.tenant_id, "process_id": e.process_id, "key": e.key,
                        "state": e.state.value},
        extras=("seq",)),
    "event_outbox": Plain(
        "event_outbox", _BY_ID, OutboxEvent,
        lambda e, raw: {"id": e.id, "tenant_id": e.tenant_id, "process_id": e.process_id,
                        "epoch": e.epoch, "idx": e.index, "created_ms": to_ms(e.created_at)}),
    "inbox_items": Plain("inbox_items", _BY_ID, InboxItem, _item_columns,
                          extras=("_outbox",)),
    "notification_deliveries": Plain(
        "notification_deliveries", _OLDEST, NotificationDelivery,
        lambda d, raw: {"id": d.id, "tenant_id": d.tenant_id, "item_id": d.item_id,
                        "user_id": d.user_id, "channel": d.channel, "status": d.status.value,
                        "created_ms": to_ms(d.created_at)}),
    "webhook_subscriptions": Plain(
        "webhook_subscriptions", _OLDEST, WebhookSubscription,
        lambda w, raw: {"id": w.id, "tenant_id": w.tenant_id, "project_id": w.project_id,
                        "created_ms": to_ms(w.created_at), "revision": w.revision}),
    "webhook_deliveries": Plain(
        "webhook_deliveries", _OLDEST, WebhookDelivery,
        lambda d, raw: {"id": d.id, "tenant_id": d.tenant_id,
                        "subscription_id": d.subscription_id, "status": d.status.value,
                        "next_ms": to_ms(d.next_at), "claim": d.claim,
                        "created_ms": to_ms(d.created_at)}),
    "tool_health": Plain(
        "tool_health", (("tenantId", False), ("projectId", False), ("server", False),
                        ("_id.tool", False)),
        ToolHealth, _health_columns, extras=("probeAt",), stored=_health_stored),
    "memory_entries": Plain("memory_entries", _BY_ID, MemoryEntry, _memory_columns,
                             extras=("terms", "length"), stored=_memory_stored),
    "audit_log": Plain(
        "audit_log", _BY_ID, AuditRecord,
        lambda a, raw: {"id": a.id, "tenant_id": a.tenant_id, "at_ms": to_ms(a.at)}),
    "turn_inspections": Plain(
        "turn_inspections", _BY_ID, TurnInspection,
        lambda t, raw: {"id": t.id, "tenant_id": t.tenant_id, "session_id": t.session_id,
                        "process_id": t.process_id, "at_ms": to_ms(t.started_at),
                        "head": t.head().dump()}),
    "schedules": Plain(
        "schedules", _OLDEST, Schedule,
        lambda s, raw: {"id": s.id, "tenant_id": s.tenant_id, "project_id": s.project_id,
                        "user_id": s.user_id, "next_ms": None if s.paused or s.next_run_at
                        is None else to_ms(s.next_run_at)}),
    "schedule_runs": Plain(
        "schedule_runs", _BY_ID, ScheduleRun,
        lambda r, raw: {"id": r.id, "tenant_id": r.tenant_id, "schedule_id": r.schedule_id,
                        "tick_ms": to_ms(r.tick), "status": r.status.value,
                        "created_ms": to_ms(r.created_at)}),
    "knowledge_documents": Plain(
        "knowledge_documents", (("tenantId", False), ("_id", False)), KnowledgeDocument,
        _document_columns, extras=("tokens",), stored=lambda r: {"tokens": r["tokens"]}),
}
"""The kinds held one document per record (the others: ``MongoTransfer._special``)."""


def in_columns(kind: str, values: Raw) -> Raw:
    """``values`` in the kind's column order (a missing column is a bug: ``KeyError``)."""
    return {name: values[name] for name in KIND_BY_NAME[kind].columns}
