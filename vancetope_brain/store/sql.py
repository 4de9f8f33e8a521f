"""What the two SQL backends (SQLite, PostgreSQL) share: the codecs of their columns.

Times in ``*_ms`` columns are milliseconds since the Unix epoch (``to_ms``), so they
order and compare as integers.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, overload

from vancetope_brain.errors import InvalidInput
from vancetope_brain.store.sessions import BAD_CURSOR, cursor_position

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def sql_literals(values: Iterable[StrEnum]) -> str:
    """Enum values as SQL string literals, sorted: the text of an ``IN (…)`` list that a
    partial index and the queries that use it must spell alike (SQLite matches a query to a
    partial index by its terms, which a bound parameter is not)."""
    return ", ".join(f"'{v.value}'" for v in sorted(values))


def to_ms(moment: datetime) -> int:
    """Milliseconds since the Unix epoch; naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


@overload
def from_ms(ms: int) -> datetime: ...


@overload
def from_ms(ms: int | None) -> datetime | None: ...


def from_ms(ms: int | None) -> datetime | None:
    """The aware UTC datetime of a ``*_ms`` column (None stays None)."""
    return None if ms is None else _EPOCH + timedelta(milliseconds=ms)


def iso(moment: datetime) -> str:
    """A time as the documents spell it (``…Z``), for ``json_set``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def row_position(cursor: str) -> tuple[int, int]:
    """The (``created_ms``, row number) a sessions page cursor of a SQL store holds (its
    ties break on the row number: insertion order). Raises ``InvalidInput``."""
    created_ms, key = cursor_position(cursor)
    if not (key.isascii() and key.isdigit()):
        raise InvalidInput(BAD_CURSOR)
    return created_ms, int(key)


def newest_page(mark: str, column: str, table: str, equal: dict[str, Any],
                before: tuple[int, str] | None, limit: int,
                cap: int) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of a keyset page of ``table``'s rows newest first, by
    (``at_ms``, id): the ``column`` of those whose columns equal ``equal``'s values, after
    the place ``before`` (the last row of the previous page), at most ``limit`` (≤ ``cap``)
    rows; ``mark`` is the backend's parameter (``?`` or ``%s``). What the audit log and the
    inspector's records list by, on both SQL backends."""
    clauses = [f"{name} = {mark}" for name in equal]
    params: list[Any] = list(equal.values())
    if before is not None:
        clauses.append(f"(at_ms, id) < ({mark}, {mark})")
        params += list(before)
    where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
    return (f"SELECT {column} FROM {table} {where}ORDER BY at_ms DESC, id DESC LIMIT {mark}",
            (*params, max(0, min(limit, cap))))
