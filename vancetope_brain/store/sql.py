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
from vancetope_brain.store.audit import MAX_LISTED, AuditPosition
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


def audit_page(mark: str, tenant_id: str | None, before: AuditPosition | None,
               limit: int) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of ``AuditStore.list_audit`` on table ``audit_log``, with
    the backend's parameter ``mark`` (``?`` or ``%s``): newest first, keyset-paged by
    (``at_ms``, id), one tenant's or every tenant's."""
    clauses: list[str] = []
    params: list[Any] = []
    if tenant_id is not None:
        clauses.append(f"tenant_id = {mark}")
        params.append(tenant_id)
    if before is not None:
        clauses.append(f"(at_ms, id) < ({mark}, {mark})")
        params += [before.at_ms, before.id]
    where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
    return (f"SELECT doc FROM audit_log {where}ORDER BY at_ms DESC, id DESC LIMIT {mark}",
            (*params, max(0, min(limit, MAX_LISTED))))
