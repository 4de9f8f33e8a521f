"""How the MongoDB adapters store documents: BSON datetimes, ``_id``, driver errors mapped."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError, PyMongoError

from vancetope_brain.errors import Conflict, NotFound, StoreError
from vancetope_brain.models import Document

P = ParamSpec("P")
R = TypeVar("R")
D = TypeVar("D", bound=Document)

STRING = {"$type": "string"}
"""A filter (and partial-index expression) matching set string fields only."""
OLDEST_FIRST = [("createdAt", ASCENDING), ("_id", ASCENDING)]
"""Equal creation times (millisecond resolution) fall back to the id, so the order is stable."""


def naive_utc(moment: datetime) -> datetime:
    """BSON keeps UTC milliseconds; naive UTC reads the same in pymongo and mongomock."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def to_bson(doc: Document, **extra: Any) -> dict[str, Any]:
    """The stored form: camelCase JSON with BSON datetimes and ``_id`` = ``id``."""
    raw = doc.dump()
    for name, field in type(doc).model_fields.items():
        value = getattr(doc, name)
        if isinstance(value, datetime):
            raw[field.alias or name] = naive_utc(value)
    raw["_id"] = raw["id"]
    raw.update(extra)
    return raw


def from_bson(cls: type[D], raw: dict[str, Any]) -> D:
    """Validate a stored record; datetimes come back as aware UTC whatever the client gives."""
    for key, value in raw.items():
        if isinstance(value, datetime):
            raw[key] = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return cls.load(raw)


def load_one(cls: type[D], raw: dict[str, Any] | None, missing: str) -> D:
    """The document ``find_one`` found; ``NotFound(missing)`` when it found none."""
    if raw is None:
        raise NotFound(missing)
    return from_bson(cls, raw)


def translated(method: Callable[P, R]) -> Callable[P, R]:
    """Map driver errors onto the errors tree (duplicate key → ``Conflict``)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except DuplicateKeyError as e:
            raise Conflict(f"duplicate record: {e}") from e
        except PyMongoError as e:
            raise StoreError(f"MongoDB store: {e}") from e

    return wrapper
