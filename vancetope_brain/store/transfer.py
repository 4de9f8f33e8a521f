"""The transfer port: every record of the store, read out page by page and written back.

``vancetope admin export`` and ``import`` (``vancetope_brain/services/transfer.py``) move a
whole store through this port: from SQLite to PostgreSQL or MongoDB and back, or into a
fresh store of the same kind. Records travel in one form on every backend, the *record
form* of their kind (``KINDS``): a JSON object holding exactly the kind's columns, so an
export of the same data is the same bytes whichever SQL store it came from.

What is not a record: what an adapter derives from records and rebuilds when it imports
them (full-text indexes, term statistics, a memory scope's counters, PostgreSQL's
``tsvector`` and ``row_no`` columns, the schema version table).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Literal

from vancetope_brain.errors import InvalidInput
from vancetope_brain.store.backend import Port

ColumnType = Literal["text", "int", "bool", "json", "bytes"]
"""How a column travels: ``text`` a string (or null), ``int`` an integer (or null), ``bool``
true/false, ``json`` the parsed document (an object), ``bytes`` standard base64 text."""

RECORD_FORM = 1
"""The version of every kind's record form; an import refuses an export of another."""


@dataclass(frozen=True)
class Kind:
    """One kind of record: its name (the SQL table's), its columns in record order, the
    columns that identify a record, and its export order.

    ``insertion_ordered``: exported in the order the store took the records (SQLite's
    ``rowid``, PostgreSQL's ``row_no``) and imported in file order, because some list of
    the kind pages by that order (users oldest first, a session's turns, the journal). The
    others are exported in ``key`` order (byte order of text, as SQLite compares it and
    PostgreSQL's ``COLLATE "C"``).
    """

    name: str
    columns: dict[str, ColumnType]
    key: tuple[str, ...]
    insertion_ordered: bool = False


def _kind(name: str, key: tuple[str, ...], columns: str, *,
          insertion_ordered: bool = False) -> Kind:
    cols: dict[str, ColumnType] = {}
    for spec in columns.split():
        column, _, typ = spec.partition(":")
        cols[column] = typ or "text"  # type: ignore[assignment]
    assert set(key) <= set(cols), name
    return Kind(name, cols, key, insertion_ordered)


KINDS: tuple[Kind, ...] = (
    _kind("tenants", ("id",), "id doc:json", insertion_ordered=True),
    _kind("projects", ("tenant_id", "id"), "tenant_id id doc:json", insertion_ordered=True),
    _kind("users", ("id",), "id tenant_id doc:json", insertion_ordered=True),
    _kind("api_tokens", ("id",), "id tenant_id user_id token_hash revoked:bool doc:json",
          insertion_ordered=True),
    _kind("settings", ("tenant_id", "level", "scope_id", "key"),
          "tenant_id level scope_id key doc:json"),
    _kind("recipes", ("tenant_id", "project_id", "kind", "name"),
          "tenant_id project_id kind name doc:json"),
    _kind("sessions", ("id",), "id tenant_id user_id created_ms:int doc:json",
          insertion_ordered=True),
    _kind("processes", ("id",), "id tenant_id session_id created_ms:int doc:json",
          insertion_ordered=True),
    _kind("lanes", ("process_id",),
          "process_id tenant_id status epoch:int next_seq:int next_chat_seq:int "
          "pending_control control_requested_ms:int turn_attempts:int"),
    _kind("messages", ("id",),
          "id tenant_id target_process_id seq:int idempotency_key created_ms:int drained_at "
          "drained_epoch:int attempts:int dead_ms:int doc:json"),
    _kind("chat", ("id",), "id tenant_id process_id seq:int role source_message_id doc:json",
          insertion_ordered=True),
    _kind("turns", ("id",), "id tenant_id process_id epoch:int doc:json",
          insertion_ordered=True),
    _kind("timers", ("id",), "id tenant_id process_id due_ms:int doc:json"),
    _kind("journal", ("tenant_id", "process_id", "key"),
          "tenant_id process_id key state doc:json", insertion_ordered=True),
    _kind("event_outbox", ("id",),
          "id tenant_id process_id epoch:int idx:int created_ms:int doc:json"),
    _kind("inbox_items", ("id",),
          "id tenant_id assigned_to status criticality origin_process_id origin_session_id "
          "idempotency_key created_ms:int resolved_ms:int revision:int doc:json"),
    _kind("notification_deliveries", ("id",),
          "id tenant_id item_id user_id channel status created_ms:int doc:json",
          insertion_ordered=True),
    _kind("webhook_subscriptions", ("id",),
          "id tenant_id project_id created_ms:int revision:int doc:json",
          insertion_ordered=True),
    _kind("webhook_deliveries", ("id",),
          "id tenant_id subscription_id status next_ms:int claim created_ms:int doc:json",
          insertion_ordered=True),
    _kind("tool_health", ("tenant_id", "project_id", "server", "tool"),
          "tenant_id project_id server tool probe_ms:int doc:json"),
    _kind("memory_entries", ("id",),
          "id tenant_id scope scope_id process_id kind idempotency_key length:int doc:json"),
    _kind("knowledge_documents", ("tenant_id", "id"),
          "tenant_id id project_id name version:int status size:int chunks:int tokens:int "
          "doc:json"),
    _kind("knowledge_chunks", ("id",),
          "id:int tenant_id project_id document_id version:int ordinal:int length:int text "
          "doc:json"),
    _kind("knowledge_vectors", ("chunk_id",),
          "chunk_id:int tenant_id project_id document_id version:int model dim:int "
          "vector:bytes"),
    _kind("knowledge_vector_generations", ("tenant_id", "project_id"),
          "tenant_id project_id generation:int"),
    _kind("audit_log", ("id",), "id tenant_id at_ms:int doc:json"),
    _kind("turn_inspections", ("id",),
          "id tenant_id session_id process_id at_ms:int head:json doc:json"),
    _kind("llm_usage", ("tenant_id", "day", "session_id", "model", "user_id", "project_id"),
          "tenant_id day session_id model user_id project_id tokens_in:int tokens_out:int "
          "calls:int estimated_calls:int"),
    _kind("schedules", ("id",), "id tenant_id project_id user_id next_ms:int doc:json",
          insertion_ordered=True),
    _kind("schedule_runs", ("id",),
          "id tenant_id schedule_id tick_ms:int status created_ms:int doc:json"),
)
"""Every kind, in import order: a record's parents (its tenant, session, process, document)
come before it."""

KIND_BY_NAME = {kind.name: kind for kind in KINDS}


def kind_named(name: str) -> Kind:
    """The kind called ``name``; ``InvalidInput`` naming the known kinds when there is none
    (an export written by another version, a mistyped name), so every adapter refuses alike."""
    try:
        return KIND_BY_NAME[name]
    except KeyError:
        raise InvalidInput(f"unknown kind of record {name!r}; the kinds are "
                           f"{', '.join(KIND_BY_NAME)}") from None


def cursor_values(after: str, width: int) -> list[Any]:
    """The ``width`` sort values (a key, a ``rowid``) an adapter's cursor holds: cursors are
    JSON arrays on every backend; ``InvalidInput`` for anything else."""
    try:
        values = json.loads(after)
    except ValueError:
        values = None
    if not isinstance(values, list) or len(values) != width:
        raise InvalidInput(f"not a cursor of this store's export: {after!r}")
    return values


class TransferStore(Port):
    """Reads every record of every tenant out, and writes records in, kind by kind.

    Not tenant-scoped: an operator's tool for the whole store (``docs/operations.md``,
    "Moving between stores"). An export of a store that is serving is not a snapshot (each
    page is read on its own); stop the gateways and workers first.
    """

    @abstractmethod
    def export_page(self, kind: str, after: str | None, limit: int
                    ) -> tuple[list[dict[str, Any]], str | None]:
        """Up to ``limit`` records of ``kind`` that come after the cursor ``after`` (None: from
        the first) in the kind's export order, in the record form, and the cursor to pass
        next (None when these were the last). A cursor is opaque and only good on the store
        that gave it."""

    @abstractmethod
    def import_records(self, kind: str, records: list[dict[str, Any]]) -> int:
        """Write ``records`` of ``kind`` (record form, in the given order) in one transaction
        where the backend has them, with what the adapter derives from them (search indexes,
        term statistics, counters, identity sequences past an imported integer id); a record
        whose key is already stored is skipped untouched, so an interrupted import can run
        again. Returns how many were written."""

    @abstractmethod
    def is_empty(self) -> bool:
        """True when the store holds no record of any kind."""
