"""PostgreSQL ``TransferStore``: every kind's rows read out in the record form and written
back, over the tables the other adapters own.

Export: an insertion-ordered kind is read by ``row_no`` (its identity column), the others by
their key, text compared bytewise (``COLLATE "C"``, as SQLite compares), after the cursor by
a row comparison; the cursor is the page's last ``row_no`` or key as a JSON array, and one
row more than the page is read to tell whether it is the last. A row becomes its record:
``jsonb`` the parsed object, ``BYTEA`` base64, the derived columns (``row_no``, ``terms``,
``created_us``, ``updated_us``) left out. Cost: most tables have no index in that order (a
key column not declared ``COLLATE "C"``, ``row_no`` without an index: adding them would
cost every turn's writes), so a page read alone would read the rest of its table (100,000
rows: 10 s in pages of 1,000, and quadratic); ``PostgresTransfer`` reads the pages of a
kind from one server-side cursor instead, sorted once, on a connection of its own (closed
after the kind's last page, or when another call starts another cursor).

Import: one transaction per call, records inserted in the given order (so an
insertion-ordered kind's ``row_no`` follows the file) with ``ON CONFLICT (key) DO NOTHING
RETURNING``, so a record whose key is stored is skipped and only the rows written get
what the adapters derive, computed by their own functions:
- ``knowledge_documents``: ``updated_us`` from the document's ``updatedAt``;
- ``knowledge_chunks``: the imported ``id`` (``OVERRIDING SYSTEM VALUE``; the identity's
  sequence is then moved past the greatest imported id, never back), ``terms``
  (``documents.chunk_terms``), and the term statistics ``knowledge_terms`` of the chunks of
  READY documents (``documents.count_terms``, in term order, as ``write_chunks`` does);
- ``memory_entries``: ``created_us`` and ``terms`` (``memory.created_us`` and
  ``entry_lexemes``), and each scope's counters in ``memory_scopes`` (added to, in scope
  order, so a concurrent ``record`` keeps its own count right);
- ``knowledge_vectors``: the generation of their project, where one is stored already, is
  bumped, so no process keeps searching a matrix it cached before; into a fresh store
  nothing is bumped (generations are imported after vectors, and copied as they are).

Locks: the writers whose caps count rows take the same advisory locks (documents per
tenant, recipes per tenant and kind, in a sorted order), so a concurrent capped add waits
for the import rather than counting past it; a chunk import locks ``knowledge_chunks``
against inserts (``SHARE ROW EXCLUSIVE``) until it commits, so no ``write_chunks`` can take
an id from the sequence before it is moved. Other writers are not waited for: an import
is meant for a store nothing else uses (``TransferStore``).

Limit: PostgreSQL stores no U+0000 (``_db.REPLACEMENT``): a record holding one is imported
with U+FFFD in its place, so its export then differs from the one it was imported from.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from vancetope_brain.errors import InvalidInput, StoreError
from vancetope_brain.models.knowledge import KnowledgeDocument
from vancetope_brain.models.memory import MemoryEntry
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json
from vancetope_brain.store.postgres.documents import (
    chunk_terms,
    count_terms,
    epoch_us,
    tenant_lock_in,
)
from vancetope_brain.store.postgres.memory import created_us, entry_lexemes
from vancetope_brain.store.postgres.recipes import limit_lock_in
from vancetope_brain.store.transfer import (
    KINDS,
    ColumnType,
    Kind,
    TransferStore,
    cursor_values,
    kind_named,
)

if TYPE_CHECKING:
    from vancetope_brain.store.postgres import PostgresBackend

Row = tuple[Any, ...]


def _order(kind: Kind) -> list[str]:
    """The key's columns as compared for the export order (text bytewise)."""
    return [column if kind.columns[column] == "int" else f'{column} COLLATE "C"'
            for column in kind.key]


def _record_value(typ: ColumnType, value: Any) -> Any:
    """A column's value in the record form."""
    if value is None:
        return None
    if typ == "bytes":
        return base64.b64encode(bytes(value)).decode("ascii")
    if typ == "bool":
        return bool(value)
    return value


def _column_value(kind: Kind, column: str, value: Any) -> Any:
    """A record's value as the column's parameter; ``InvalidInput`` for a value that is not
    of the column's form."""
    typ = kind.columns[column]
    if value is None:
        return None
    if typ == "json":
        if not isinstance(value, dict):
            raise InvalidInput(f"{kind.name}.{column} is not a JSON object")
        return doc_json(value)
    if typ == "bytes":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError, ValueError) as e:
            raise InvalidInput(f"{kind.name}.{column} is not base64 text: {e}") from None
    return value


def _query(kind: Kind, after: str | None) -> tuple[str, list[Any]]:
    """The statement of the kind's records after the cursor ``after``, in export order, each
    row its columns then its position (``row_no`` or the key), and its parameters."""
    if kind.insertion_ordered:
        position = order = ["row_no"]
        params = [0] if after is None else cursor_values(after, 1)
        if not isinstance(params[0], int):
            raise InvalidInput(f"not a cursor of this store's export: {after!r}")
    else:
        position, order = list(kind.key), _order(kind)
        params = [] if after is None else cursor_values(after, len(order))
    where = "TRUE" if not params else \
        f"({', '.join(order)}) > ({', '.join(['%s'] * len(order))})"
    return (f"SELECT {', '.join([*kind.columns, *position])} FROM {kind.name} WHERE {where} "
            f"ORDER BY {', '.join(order)}"), params


@dataclass
class _Reading:
    """The export of one kind under way: a server-side cursor over the rest of its rows in
    export order (``DECLARE … WITH HOLD``, so the sorted rows are kept by the server, no
    transaction stays open), on a connection of its own; ``at`` is the cursor its next page
    follows, ``ahead`` the row read past the last page."""

    kind: str
    at: str | None
    conn: psycopg.Connection[Any]
    rows: psycopg.ServerCursor[Any]
    ahead: list[Row]

    def close(self) -> None:
        with contextlib.suppress(psycopg.Error):  # a lost connection: nothing to close
            self.rows.close()
        self.conn.close()


class PostgresTransfer(PostgresAdapter, TransferStore):
    """Pages of one kind are read from one server-side cursor while each call asks for the
    page after the previous one (so an export sorts each table once: no index is in the
    export order of most tables, and a page each read alone would read the rest of its
    table); any other call opens a new one after its cursor. Calls are serialised."""

    def __init__(self, db: PostgresBackend) -> None:
        super().__init__(db)
        self._reading: _Reading | None = None
        self._lock = threading.Lock()

    def export_page(self, kind: str, after: str | None, limit: int
                    ) -> tuple[list[dict[str, Any]], str | None]:
        of = kind_named(kind)
        if limit < 1:
            raise ValueError(f"a page holds at least one record, not {limit}")
        with self._lock:
            try:
                return self._page(of, after, limit)
            except psycopg.Error as e:
                self._stop()
                raise StoreError(f"PostgreSQL store: {e}") from e

    def _page(self, kind: Kind, after: str | None, limit: int
              ) -> tuple[list[dict[str, Any]], str | None]:
        reading = self._reading
        if reading is None or (reading.kind, reading.at) != (kind.name, after):
            self._stop()
            reading = self._reading = self._start(kind, after)
        rows = reading.ahead + reading.rows.fetchmany(limit + 1 - len(reading.ahead))
        reading.ahead = rows[limit:]
        records = [{column: _record_value(typ, value)
                    for (column, typ), value in zip(kind.columns.items(), row, strict=False)}
                   for row in rows[:limit]]
        if not reading.ahead:
            self._stop()
            return records, None
        reading.at = json.dumps(list(rows[limit - 1][len(kind.columns):]))
        return records, reading.at

    def _start(self, kind: Kind, after: str | None) -> _Reading:
        query, params = _query(kind, after)
        conninfo = self.db.pool.conninfo
        assert isinstance(conninfo, str)
        # Without the pool's statement timeout: the first FETCH sorts the rest of the table.
        conn = psycopg.connect(conninfo, autocommit=True)
        try:
            rows = conn.cursor(name=f"export_{kind.name}", withhold=True)
            rows.execute(query, params)
        except BaseException:
            conn.close()
            raise
        return _Reading(kind.name, after, conn, rows, [])

    def release(self) -> None:
        """An export stopped part way through a kind keeps its cursor's connection: close it."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        if self._reading is not None:
            self._reading.close()
            self._reading = None

    def import_records(self, kind: str, records: list[dict[str, Any]]) -> int:
        of = kind_named(kind)
        if not records:
            return 0
        rows = []
        for record in records:
            if record.keys() != of.columns.keys():
                raise InvalidInput(f"a record of {of.name} has the columns {sorted(record)}, "
                                   f"not {sorted(of.columns)}")
            rows.append(tuple(_column_value(of, column, record[column])
                              for column in of.columns))
        importer = _IMPORTERS.get(of.name, _plain)
        with self.db.write() as conn:
            return importer(conn, of, rows)

    def is_empty(self) -> bool:
        return bool(self.db.read("SELECT " + " AND ".join(
            f"NOT EXISTS (SELECT 1 FROM {kind.name})" for kind in KINDS))[0][0])


def _insert(conn: psycopg.Connection[Any], kind: Kind, rows: Sequence[Row], *,
            extra: dict[str, str] | None = None, overriding: bool = False) -> list[bool]:
    """Insert ``rows`` (the kind's columns, then ``extra``'s: column → the SQL of its
    parameter), one statement each, in order, skipping a stored key; which were inserted."""
    extra = extra or {}
    columns = [*kind.columns, *extra]
    values = ["%s"] * len(kind.columns) + list(extra.values())
    cursor = conn.cursor()
    cursor.executemany(
        f"INSERT INTO {kind.name} ({', '.join(columns)}) "
        f"{'OVERRIDING SYSTEM VALUE ' if overriding else ''}VALUES ({', '.join(values)}) "
        f"ON CONFLICT ({', '.join(kind.key)}) DO NOTHING RETURNING 1", rows, returning=True)
    inserted = [cursor.rowcount == 1]
    while cursor.nextset():
        inserted.append(cursor.rowcount == 1)
    return inserted


def _plain(conn: psycopg.Connection[Any], kind: Kind, rows: Sequence[Row]) -> int:
    return sum(_insert(conn, kind, rows))


def _columns(kind: Kind, rows: Sequence[Row], *names: str) -> list[tuple[Any, ...]]:
    """The values of the columns ``names`` of each row."""
    at = [list(kind.columns).index(name) for name in names]
    return [tuple(row[i] for i in at) for row in rows]


def _recipes(conn: psycopg.Connection[Any], kind: Kind, rows: Sequence[Row]) -> int:
    for tenant_id, recipe_kind in sorted(set(_columns(kind, rows, "tenant_id", "kind"))):
        limit_lock_in(conn, tenant_id, recipe_kind)
    return _plain(conn, kind, rows)


def _documents(conn: psycopg.Connection[Any], kind: Kind, rows: Sequence[Row]) -> int:
    for (tenant_id,) in sorted(set(_columns(kind, rows, "tenant_id"))):
        tenant_lock_in(conn, tenant_id)
    updated = [epoch_us(KnowledgeDocument.load(json.loads(doc)).updated_at)
               for (doc,) in _columns(kind, rows, "doc")]
    return sum(_insert(conn, kind, [(*row, us) for row, us in zip(rows, updated, strict=True)],
                       extra={"updated_us": "%s"}))


def _chunks(conn: psycopg.Connection[Any], kind: Kind, rows: Sequence[Row]) -> int:
    conn.execute("LOCK TABLE knowledge_chunks IN SHARE ROW EXCLUSIVE MODE")
    values = _columns(kind, rows, "id", "tenant_id", "project_id", "document_id", "text")
    terms = [chunk_terms(text)[1] for *_, text in values]
    inserted = _insert(conn, kind, [(*row, keys) for row, keys in zip(rows, terms, strict=True)],
                       extra={"terms": "array_to_tsvector(%s::text[])"}, overriding=True)
    written = [(value, keys) for value, keys, new in zip(values, terms, inserted, strict=True)
               if new]
    if not written:
        return 0
    conn.execute(
        "SELECT setval(s, GREATEST(%s, COALESCE(pg_sequence_last_value(s), 0))) "
        "FROM CAST(pg_get_serial_sequence('knowledge_chunks', 'id') AS regclass) AS s",
        (max(chunk_id for (chunk_id, *_), _ in written),))
    documents = sorted({(tenant_id, document_id)
                        for (_, tenant_id, _, document_id, _), _ in written})
    ready = set(conn.execute(
        "SELECT tenant_id, id FROM knowledge_documents WHERE status = 'READY' AND "
        "(tenant_id, id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
        ([tenant_id for tenant_id, _ in documents],
         [document_id for _, document_id in documents])).fetchall())
    change: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for (_, tenant_id, project_id, document_id, _), keys in written:
        if (tenant_id, document_id) in ready:
            change[tenant_id, project_id].update(keys)
    for (tenant_id, project_id), counts in sorted(change.items()):
        count_terms(conn, tenant_id, project_id, counts)
    return len(written)


def _memory(conn: psycopg.Connection[Any], kind: Kind, rows: Sequence[Row]) -> int:
    entries = [MemoryEntry.load(json.loads(doc)) for (doc,) in _columns(kind, rows, "doc")]
    inserted = _insert(conn, kind, [(*row, created_us(entry), entry_lexemes(entry))
                                    for row, entry in zip(rows, entries, strict=True)],
                       extra={"created_us": "%s", "terms": "array_to_tsvector(%s::text[])"})
    entries_of: Counter[tuple[str, str, str]] = Counter()
    terms_of: Counter[tuple[str, str, str]] = Counter()
    for (*scope, length), new in zip(
            _columns(kind, rows, "tenant_id", "scope", "scope_id", "length"), inserted,
            strict=True):
        if new:
            entries_of[tuple(scope)] += 1
            terms_of[tuple(scope)] += length
    if entries_of:
        scopes = sorted(entries_of)
        conn.execute(
            "INSERT INTO memory_scopes AS m (tenant_id, scope, scope_id, entries, terms) "
            "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::bigint[]) "
            "ORDER BY 1, 2, 3 ON CONFLICT (tenant_id, scope, scope_id) DO UPDATE SET "
            "entries = m.entries + excluded.entries, terms = m.terms + excluded.terms",
            ([s[0] for s in scopes], [s[1] for s in scopes], [s[2] for s in scopes],
             [entries_of[s] for s in scopes], [terms_of[s] for s in scopes]))
    return sum(inserted)


def _vectors(conn: psycopg.Connection[Any], kind: Kind, rows: Sequence[Row]) -> int:
    inserted = _insert(conn, kind, rows)
    projects = sorted({project for project, new in zip(
        _columns(kind, rows, "tenant_id", "project_id"), inserted, strict=True) if new})
    if projects:
        conn.execute(
            "UPDATE knowledge_vector_generations SET generation = generation + 1 "
            "WHERE (tenant_id, project_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
            ([tenant_id for tenant_id, _ in projects], [project for _, project in projects]))
    return sum(inserted)


_IMPORTERS: dict[str, Callable[[psycopg.Connection[Any], Kind, Sequence[Row]], int]] = {
    "recipes": _recipes,
    "knowledge_documents": _documents,
    "knowledge_chunks": _chunks,
    "memory_entries": _memory,
    "knowledge_vectors": _vectors,
}
"""The kinds whose import does more than insert their rows."""
