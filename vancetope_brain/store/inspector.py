"""The inspector port: the record of each committed turn (``models/inspector.py``).

A record is written once, right after its turn commits (``LaneRunner``), and never changed;
it goes with its session's purge (``RetentionStore``: a CLOSED session's records go with
it) or once older than the tenant's ``retention.turnRecordDays``
(``RetentionStore.purge_inspections``).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import NamedTuple

from vancetope_brain.models.inspector import TurnInspection
from vancetope_brain.store.backend import Port

MAX_LISTED = 200
"""Most records one ``list_inspections`` call returns."""


class InspectionPosition(NamedTuple):
    """A record's place in a process's order: its start in milliseconds, then its id."""

    at_ms: int
    id: str


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
