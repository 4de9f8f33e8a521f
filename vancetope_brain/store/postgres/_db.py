"""The PostgreSQL backend's plumbing: the schema version and its migrations, and the
column codecs the adapters share.

Schema versions (table ``schema_version``): 1 — the first, the tables of every
adapter as of the SQLite backend's version 7; 2 — ``chat`` gains ``row_no``, its
insertion order (``lanes.py``); 3 — the index ``sessions_by_user`` ends in ``row_no``, so
a page of a user's sessions reads in index order with no sort (``sessions.py``: dropped,
and made anew by the table script). Functions (``*.sql`` files of this package, each one
``CREATE OR REPLACE FUNCTION``, named by their adapter's ``functions``) are made at every
open, after the tables, like a new table, and change no version: each under a name that
ends in a digest of its file (``function``), so the pods of two versions during a rolling
upgrade each call the body they ship, and neither replaces the other's. An older version's
function stays beside the new one (unused once no pod of that version runs; dropping it
is an operator's ``DROP FUNCTION``, never needed). A migration is forward-only: an
adapter's ``migrations[N]`` are the statements that bring its tables from version
N-1 to N, run once, in version order, in the same transaction that records N (DDL
is transactional on PostgreSQL, so a failed migration leaves the previous version
whole). Opening a database of a newer version is refused.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from importlib.resources import files
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg import errors
from psycopg.adapt import Buffer, PyFormat, Transformer
from psycopg.pq import ConnStatus, DiagnosticField, ExecStatus, Format
from psycopg.pq.abc import PGresult
from psycopg.types.string import StrDumperUnknown
from pydantic import BaseModel
from pydantic_core import to_json

from vancetope_brain.errors import NotFound, StoreError
from vancetope_brain.models import Document

D = TypeVar("D", bound=Document)
log = logging.getLogger(__name__)

SCHEMA_VERSION = 3
"""Bumped by a migration that changes an existing table (never by a new table)."""

STATEMENT_TIMEOUT_MS = 30_000
"""The server cancels a statement that runs longer (every connection of the pool)."""

_LOCK_CLASS = 0x7661_6E63
"""The first key of the advisory lock held while the schema is created or migrated; the
second is the schema's name hashed, so stores in two schemas of one database do not wait
for each other."""

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
)
"""

_STATEMENT = re.compile(r"(?:\$(\w*)\$.*?\$\1\$|[^;$]|\$)+", re.DOTALL)
"""A statement of a script: up to its ``;``, a dollar-quoted body taken whole."""


def create_schema(conn: psycopg.Connection[Any], tables: Iterable[str],
                  migrations: Sequence[Mapping[int, Sequence[str]]],
                  version: int = SCHEMA_VERSION, functions: Iterable[str] = ()) -> None:
    """Create or migrate the schema to ``version`` in one transaction.

    ``tables``: each adapter's ``CREATE … IF NOT EXISTS`` script; ``migrations``:
    each adapter's statements per version. The transaction first takes a
    transaction-scoped advisory lock, so of several processes opening the store at
    once one creates or migrates and the others then find the current version. An
    older database runs every migration above its version, in version order
    (adapters in registry order within one version), then the scripts, whose new
    indexes may need the new columns, then ``functions`` (each one statement, run whole:
    a function's body holds ``;``). A script's statements end at each ``;`` outside a
    dollar-quoted body (``$fn$ … $fn$``). Raises ``StoreError``, having changed
    nothing, if the database was written by a newer schema than ``version``.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))",
                     (_LOCK_CLASS,))
        conn.execute(_VERSION_TABLE)
        row = conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
        if row is not None and row[0] > version:
            raise StoreError(
                f"PostgreSQL store has schema version {row[0]}, newer than this server's "
                f"{version}; upgrade the server")
        if row is not None and row[0] < version:  # a new database: the scripts create it
            log.info("migrating the PostgreSQL store's schema from version %d to %d",
                     row[0], version)
            for step in range(row[0] + 1, version + 1):
                for owned in migrations:
                    for statement in owned.get(step, ()):
                        conn.execute(statement)
        for script in tables:
            for statement in (match[0] for match in _STATEMENT.finditer(script)):
                if statement.strip():
                    conn.execute(statement)
        for function in functions:
            conn.execute(function)
        conn.execute("INSERT INTO schema_version (id, version) VALUES (1, %s) "
                     "ON CONFLICT (id) DO UPDATE SET version = excluded.version", (version,))


class Function(NamedTuple):
    """A PL/pgSQL function of this package: its SQL name and its ``CREATE`` statement."""

    name: str
    create: str


def function(file: str) -> Function:
    """The function of ``file.sql`` in this package (``CREATE OR REPLACE FUNCTION
    vt_<file>(``…), named ``vt_<file>_<12 hex digits of the file's SHA-256>``: a changed
    body (or argument list) is a new name, so code of one version never runs another's."""
    text = files(__package__).joinpath(f"{file}.sql").read_text(encoding="utf-8")
    name = f"vt_{file}_{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    head = f"CREATE OR REPLACE FUNCTION vt_{file}("
    if text.count(head) != 1:
        raise ValueError(f"{file}.sql does not create one function vt_{file}")
    return Function(name, text.replace(head, f"CREATE OR REPLACE FUNCTION {name}("))


class JsonDoc(str):
    """A document's JSON text, written as ``jsonb`` (``doc_json(…)`` makes one)."""


def doc_json(value: BaseModel | Any) -> JsonDoc:
    """The camelCase JSON of a record (or of any JSON-ready value), for a ``doc`` column."""
    if isinstance(value, BaseModel):
        return JsonDoc(value.model_dump_json(by_alias=True))
    return JsonDoc(to_json(value).decode())


REPLACEMENT = "\ufffd"
"""What U+0000 becomes: PostgreSQL stores no NUL in ``text`` or ``jsonb``, and a user's
message, a model's reply or an Inbox answer that holds one must still be stored rather
than fail its write (and be retried forever). Every other backend keeps it."""

# A JSON escape of U+0000: ``\u0000`` after an even number of backslashes (an odd number
# makes the backslash before ``u`` a literal one).
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


class NulFreeText(StrDumperUnknown):
    """Every ``str`` parameter, with U+0000 replaced (PostgreSQL refuses it in text)."""

    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace("\x00", REPLACEMENT) if "\x00" in obj else obj)


class NulFreeJson(StrDumperUnknown):
    """A ``JsonDoc`` parameter, typed ``jsonb``, with U+0000's escape replaced (``jsonb``
    refuses ``\\u0000``)."""

    oid = psycopg.adapters.types["jsonb"].oid
    format = Format.TEXT

    def dump(self, obj: str) -> Buffer | None:
        if "\\u0000" in obj:
            obj = _JSON_NUL.sub(lambda m: m.group(1) + "\\ufffd", obj)
        return super().dump(obj)


def register_dumpers(conn: psycopg.Connection[Any]) -> None:
    """Make ``conn`` write ``str`` and ``JsonDoc`` parameters through the dumpers above."""
    conn.adapters.register_dumper(str, NulFreeText)
    conn.adapters.register_dumper(JsonDoc, NulFreeJson)


PREPARED_MAX = 200
"""Statements one connection keeps prepared (``Statements``); the least recently run one is
deallocated to make room."""

_TEXTS_MAX = 1000
"""Texts one connection keeps converted (``Statements``), all forgotten when it is full."""
_UNPREPARED = b"26000"  # SQLSTATE invalid_sql_statement_name
_PLACEHOLDER = re.compile(rb"%(.)", re.DOTALL)


def _numbered(sql: str, encoding: str) -> tuple[bytes, int] | None:
    """``sql`` with its ``%s`` placeholders numbered ``$1``, ``$2``… and ``%%`` made ``%``,
    and the number of placeholders; None if it has another kind (``%(name)s``, ``%b``)."""
    count = 0
    plain = True

    def number(m: re.Match[bytes]) -> bytes:
        nonlocal count, plain
        if m.group(1) == b"%":
            return b"%"
        if m.group(1) != b"s":
            plain = False
            return b""
        count += 1
        return b"$%d" % count

    query = _PLACEHOLDER.sub(number, sql.encode(encoding))
    return (query, count) if plain else None


class Statements:
    """One statement at a time on one connection of the pool, with less of the driver's
    Python per statement than ``Connection.execute`` (about half the client CPU of a point
    read: no cursor, ``AdaptersMap`` copy or new ``Transformer`` per call, no generator and
    wait loop — libpq's blocking call, which releases the GIL, and the server's
    ``statement_timeout`` bounds it).

    The connection's ``Transformer`` is kept (its dumpers and loaders are those of the
    connection's adapters, e.g. ``register_dumpers``'); each text (with its parameters'
    types) is prepared on the server the second time it runs, as psycopg does after
    ``prepare_threshold`` runs, and kept prepared — at most ``PREPARED_MAX``, the least
    recently run one deallocated first (all of them are forgotten when psycopg deallocates
    them, which it does after a ROLLBACK, DROP or ALTER on the connection). Only for a
    statement outside a transaction with ``%s`` placeholders: ``run`` returns None for a
    text with none (psycopg sends it by the simple protocol, which runs several statements
    of one text) or with another kind, and the caller uses ``Connection.execute``. Errors
    are psycopg's: the server's by SQLSTATE (``errors.error_from_result``), a lost
    connection ``OperationalError``."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._pgconn = conn.pgconn
        self._encoding = conn.info.encoding
        self._tx = Transformer(conn)
        self._texts: dict[str, tuple[bytes, list[PyFormat]] | None] = {}
        self._prepared: OrderedDict[tuple[bytes, Any], bytes | None] = OrderedDict()
        self._names = 0

    def run(self, sql: str, params: Sequence[Any]) -> PGresult | None:
        """The result of ``sql`` with ``params``, its rows not yet loaded (``rows``)."""
        try:
            text = self._texts[sql]
        except KeyError:
            if len(self._texts) >= _TEXTS_MAX:  # texts built per call (``IN`` lists) pile up
                self._texts.clear()
            numbered = _numbered(sql, self._encoding)
            text = self._texts[sql] = None if numbered is None or not numbered[1] else \
                (numbered[0], [PyFormat.AUTO] * numbered[1])
        if text is None:
            return None
        query, formats = text
        if len(params) != len(formats):
            raise psycopg.ProgrammingError(f"the query has {len(formats)} placeholders but "
                                           f"{len(params)} parameters were passed")
        tx = self._tx
        values = tx.dump_sequence(params, formats)
        key = (query, tx.types)
        name = self._prepared.get(key, b"")
        if name:
            self._prepared.move_to_end(key)
        elif name is None:  # its second run: prepare it
            name = self._prepare(key)
        else:
            self._remember(key, None)
        pgconn = self._pgconn
        if name:
            # A None value is SQL NULL, as psycopg's own calls pass it (its stub says no).
            result = pgconn.exec_prepared(name, values, tx.formats)  # type: ignore[arg-type]
            if result.error_field(DiagnosticField.SQLSTATE) == _UNPREPARED:
                # psycopg ran DEALLOCATE ALL on this connection: it does after a ROLLBACK
                # (``write``'s, on an error), DROP or ALTER once it has prepared any
                self._prepared.clear()
                self._remember(key, None)
                name = b""
        if not name:
            result = pgconn.exec_params(query, values, tx.types, tx.formats)
        self._check(result)
        return result

    def rows(self, result: PGresult) -> list[Any]:
        """The rows of ``result`` as tuples."""
        if result.status != ExecStatus.TUPLES_OK:
            raise psycopg.ProgrammingError("the statement returned no rows")
        tx = self._tx
        tx.set_pgresult(result)
        return tx.load_rows(0, result.ntuples, tuple)

    def _prepare(self, key: tuple[bytes, Any]) -> bytes:
        self._names += 1
        name = b"vt_%d" % self._names
        self._check(self._pgconn.prepare(name, key[0], key[1]))
        self._remember(key, name)
        return name

    def _remember(self, key: tuple[bytes, Any], name: bytes | None) -> None:
        self._prepared[key] = name
        self._prepared.move_to_end(key)
        if len(self._prepared) > PREPARED_MAX:
            _, old = self._prepared.popitem(last=False)
            if old is not None:  # unchecked: psycopg may have deallocated it already
                self._pgconn.exec_(b"DEALLOCATE " + old)

    def _check(self, result: PGresult) -> None:
        if result.status == ExecStatus.FATAL_ERROR:
            if self._pgconn.status == ConnStatus.BAD:
                raise psycopg.OperationalError(result.get_error_message(self._encoding))
            raise errors.error_from_result(result, encoding=self._encoding)


def load_one(cls: type[D], rows: list[Any], missing: str) -> D:
    """The document in the ``doc`` column of the first of ``rows`` (a point read);
    ``NotFound(missing)`` when there is none."""
    if not rows:
        raise NotFound(missing)
    return cls.load(rows[0][0])


def load_all(cls: type[D], rows: Iterable[Any]) -> list[D]:
    """The documents in the ``doc`` column of ``rows``, in order."""
    return [cls.load(row[0]) for row in rows]


def equal_clauses(tenant_id: str, **columns: str | None) -> tuple[list[str], list[Any]]:
    """The clauses ``tenant_id = %s`` and ``column = %s`` for each given value, and their
    parameters."""
    given = {column: value for column, value in columns.items() if value is not None}
    return ["tenant_id = %s", *(f"{column} = %s" for column in given)], [tenant_id,
                                                                          *given.values()]


def run_together(conn: psycopg.Connection[Any],
                 writes: Sequence[tuple[str, Sequence[Any]]]) -> int:
    """Run ``writes`` (``INSERT``, ``UPDATE`` or ``DELETE`` statements without
    ``RETURNING``, with their parameters) as one statement, one round trip: each but the
    last becomes a ``WITH`` query of the last, which PostgreSQL runs to completion
    whether read or not. They all see the rows as they were before any of them (one
    snapshot), so no write may touch a row another of them touches or depend on what
    another writes; an error in any fails the one statement. Returns the number of rows
    the last one changed."""
    *first, (last, _) = writes
    head = ", ".join(f"w{i} AS ({sql})" for i, (sql, _) in enumerate(first))
    return conn.execute(f"WITH {head} {last}" if first else last,
                        [param for _, params in writes for param in params]).rowcount
