"""The inspector port: the record of each committed turn (``models/inspector.py``).

A record is written once, right after its turn commits (``LaneRunner``), and never changed;
it goes with its session's purge (``RetentionStore``: a CLOSED session's records go with
it) or once older than the tenant's ``retention.turnRecordDays``
(``RetentionStore.purge_inspections``).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import NamedTuple

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models.inspector import TurnInspection
from vancetope_brain.store.backend import Port
from vancetope_brain.store.sql import to_ms

MAX_LISTED = 200
"""Most records one ``list_inspections`` call returns."""


class InspectionPosition(NamedTuple):
    """A record's place in a process's order: its start in milliseconds, then its id."""

    at_ms: int
    id: str


def cursor_after(record: TurnInspection) -> str:
    """The cursor of the page after ``record`` (``<startedAt ms>:<id>``)."""
    return f"{to_ms(record.started_at)}:{record.id}"


def position(cursor: str) -> InspectionPosition:
    """The position a ``cursor_after`` cursor names; ``InvalidInput`` for anything else."""
    at, _, turn_id = cursor.partition(":")
    if not at.isdigit() or not turn_id:
        raise InvalidInput(f"not a turn cursor: {cursor[:80]!r}")
    return InspectionPosition(int(at), turn_id)


def page(store: InspectorStore, tenant_id: str, process_id: str, cursor: str | None,
         limit: int) -> tuple[list[TurnInspection], str | None]:
    """A page of the process's records, newest first, and the next page's cursor (None:
    this is the last)."""
    found = store.list_inspections(tenant_id, process_id,
                                   None if cursor is None else position(cursor), limit + 1)
    more = len(found) > limit
    return found[:limit], cursor_after(found[limit - 1]) if more else None


class InspectorStore(Port):
    """Turn records, by tenant and id. Order of a process's records: newest first by
    (``startedAt`` in milliseconds, ``id``), both descending."""

    @abstractmethod
    def put_inspection(self, record: TurnInspection) -> None:
        """Insert the record (one atomic write); a record of the same id already there is
        left as it is (a turn's record is written once)."""

    @abstractmethod
    def get_inspection(self, tenant_id: str, turn_id: str) -> TurnInspection:
        """The whole record. Raises ``NotFound`` if the tenant has none of that id."""

    @abstractmethod
    def list_inspections(self, tenant_id: str, process_id: str,
                         before: InspectionPosition | None = None,
                         limit: int = 50) -> list[TurnInspection]:
        """At most ``min(limit, MAX_LISTED)`` records of the process, newest first, only
        those strictly before ``before`` if given, each as ``TurnInspection.head`` shows it
        (without tools and steps: a listing never reads them)."""
