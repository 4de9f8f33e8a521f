"""SQLite ``TransferStore``: each kind's table read out page by page and written back, with
what the other adapters derive from its rows rebuilt as they are written.

A kind's table is the one of its name, its record the row's columns of the record form
(``doc`` parsed, ``revoked`` a bool, ``vector`` in base64). Export: each page is one read
(no transaction spans pages: the port says to stop serving first), in ``rowid`` order for an
insertion-ordered kind, else in key order (the default ``BINARY`` collation: byte order of
UTF-8 text); the cursor is the JSON list of the last row's ``rowid`` or key values, and one
row past ``limit`` is read to tell whether there are more.

Import: the records are checked first (exactly the kind's columns, else ``InvalidInput``
and nothing written), then written in one ``BEGIN IMMEDIATE`` transaction per call, each
``INSERT … ON CONFLICT (key) DO NOTHING`` in the given order, so an insertion-ordered kind
takes its rowids in export order; a row that collides on another unique index (a token's
hash, a message's seq) raises ``Conflict`` and rolls the call back. For each row written,
in that transaction:

- ``chat``: ``conversation_fts``, by ``session_search.py``'s trigger;
- ``knowledge_chunks``: ``knowledge_fts`` (``documents.index_chunk_in``), and
  ``knowledge_terms`` when the chunk's document is READY at the chunk's version (documents
  are imported before their chunks);
- ``knowledge_vectors``: the generation of its project, where one is stored already, is
  bumped, so no process keeps searching a matrix it cached before; into a fresh store
  nothing is bumped (generations are imported after vectors, and copied as they are);
- ``memory_entries``: ``created_ms`` from the document's ``createdAt``, and
  ``memory_terms`` and the scope's counts in ``memory_scopes`` (``memory.index_entry_in``).
"""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3
from collections import Counter
from typing import Any

from pydantic_core import to_json

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models.memory import MemoryEntry
from vancetope_brain.store.documents import index_terms
from vancetope_brain.store.sql import to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite.documents import count_terms_in, index_chunk_in
from vancetope_brain.store.sqlite.memory import index_entry_in
from vancetope_brain.store.transfer import (
    KINDS,
    ColumnType,
    Kind,
    TransferStore,
    cursor_values,
    kind_named,
)


class SqliteTransfer(SqliteAdapter, TransferStore):
    def export_page(self, kind: str, after: str | None, limit: int
                    ) -> tuple[list[dict[str, Any]], str | None]:
        found = kind_named(kind)
        if limit < 1:
            raise ValueError(f"a page holds at least one record, not {limit}")
        order = ("rowid",) if found.insertion_ordered else found.key
        ordered = ", ".join(order)
        where, params = ("", ()) if after is None else (
            f"WHERE ({ordered}) > ({', '.join('?' * len(order))})", cursor_values(after, len(order)))
        rows = self.db.read(
            f"SELECT {ordered}, {', '.join(found.columns)} FROM {found.name} {where} "
            f"ORDER BY {ordered} LIMIT ?", (*params, limit + 1))
        page = rows[:limit]
        records = [_record(found, row[len(order):]) for row in page]
        more = len(rows) > limit
        return records, json.dumps(list(page[-1][:len(order)])) if more else None

    def import_records(self, kind: str, records: list[dict[str, Any]]) -> int:
        found = kind_named(kind)
        derived = _DERIVED.get(found.name, _Derived)()
        rows = [(*_row(found, record), *derived.values(record)) for record in records]
        columns = [*found.columns, *derived.columns]
        insert = (f"INSERT INTO {found.name} ({', '.join(columns)}) VALUES "
                  f"({', '.join('?' * len(columns))}) ON CONFLICT ({', '.join(found.key)}) "
                  f"DO NOTHING")
        written = 0
        with self.db.write() as conn:
            for record, row in zip(records, rows, strict=True):
                if conn.execute(insert, row).rowcount:
                    written += 1
                    derived.written(conn, record)
            derived.done(conn)
        return written

    def is_empty(self) -> bool:
        held = self.db.read("SELECT " + " OR ".join(
            f"EXISTS (SELECT 1 FROM {kind.name})" for kind in KINDS), ())
        return not held[0][0]


def _record(kind: Kind, row: tuple[Any, ...]) -> dict[str, Any]:
    return {column: _exported(typ, value)
            for (column, typ), value in zip(kind.columns.items(), row, strict=True)}


def _exported(typ: ColumnType, value: Any) -> Any:
    if value is None:
        return None
    if typ == "json":
        return json.loads(value)
    if typ == "bool":
        return bool(value)
    if typ == "bytes":
        return base64.b64encode(value).decode("ascii")
    return value


def _row(kind: Kind, record: dict[str, Any]) -> tuple[Any, ...]:
    """The column values of a record, in the kind's column order."""
    if record.keys() != kind.columns.keys():
        raise InvalidInput(f"a record of {kind.name} has the columns {sorted(record)}, not "
                           f"{sorted(kind.columns)}")
    return tuple(_imported(kind, column, typ, record[column])
                 for column, typ in kind.columns.items())


def _imported(kind: Kind, column: str, typ: ColumnType, value: Any) -> Any:
    if value is None:
        return None
    if typ == "json":
        if not isinstance(value, dict):
            raise InvalidInput(f"{kind.name}.{column} is not a JSON object")
        return to_json(value).decode()
    if typ == "bool":
        return int(bool(value))
    if typ == "bytes":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError, ValueError) as e:
            raise InvalidInput(f"{kind.name}.{column} is not base64 text: {e}") from None
    return value


class _Derived:
    """What is derived from the rows of a kind as one import call writes them (here:
    nothing)."""

    columns: tuple[str, ...] = ()
    """The table's columns that the record form leaves out, after the record's."""

    def values(self, record: dict[str, Any]) -> tuple[Any, ...]:
        """The values of ``columns`` for ``record``."""
        return ()

    def written(self, conn: sqlite3.Connection, record: dict[str, Any]) -> None:
        """After ``record``'s row is inserted (not after a skipped one)."""

    def done(self, conn: sqlite3.Connection) -> None:
        """After every row of the call, in its transaction."""


class _MemoryEntries(_Derived):
    columns = ("created_ms",)

    def values(self, record: dict[str, Any]) -> tuple[Any, ...]:
        return (to_ms(MemoryEntry.load(record["doc"]).created_at),)

    def written(self, conn: sqlite3.Connection, record: dict[str, Any]) -> None:
        entry = MemoryEntry.load(record["doc"])
        index_entry_in(conn, (record["tenant_id"], record["scope"], record["scope_id"]),
                       record["id"], entry.indexed_terms(), record["length"])


class _Chunks(_Derived):
    def __init__(self) -> None:
        self.ready: dict[tuple[str, str], int | None] = {}  # (tenant, document): READY version
        self.holding: dict[tuple[str, str], Counter[str]] = {}  # (tenant, project): terms

    def written(self, conn: sqlite3.Connection, record: dict[str, Any]) -> None:
        index_chunk_in(conn, record["id"], record["text"])
        document = (record["tenant_id"], record["document_id"])
        if document not in self.ready:
            row = conn.execute("SELECT version FROM knowledge_documents WHERE tenant_id = ? "
                               "AND id = ? AND status = 'READY'", document).fetchone()
            self.ready[document] = None if row is None else row[0]
        if self.ready[document] == record["version"]:
            self.holding.setdefault((record["tenant_id"], record["project_id"]), Counter()
                                    ).update(set(index_terms(record["text"])))

    def done(self, conn: sqlite3.Connection) -> None:
        for (tenant_id, project_id), holding in self.holding.items():
            count_terms_in(conn, tenant_id, project_id, holding, 1)


class _Vectors(_Derived):
    def __init__(self) -> None:
        self.projects: set[tuple[str, str]] = set()

    def written(self, conn: sqlite3.Connection, record: dict[str, Any]) -> None:
        self.projects.add((record["tenant_id"], record["project_id"]))

    def done(self, conn: sqlite3.Connection) -> None:
        conn.executemany("UPDATE knowledge_vector_generations SET generation = generation + 1 "
                         "WHERE tenant_id = ? AND project_id = ?", sorted(self.projects))


_DERIVED: dict[str, type[_Derived]] = {
    "memory_entries": _MemoryEntries, "knowledge_chunks": _Chunks,
    "knowledge_vectors": _Vectors}
"""The kinds with derived data beyond the triggers (``chat``'s search index)."""
