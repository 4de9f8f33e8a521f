"""The inspector's turn records as the doors read them (``turn-list`` / ``turn-get``, the
``/admin/`` routes, ``vancetope admin inspect``): a process's records a page at a time, newest
first, and one record whole. Who may read them is the door's business (the process's owner,
or an operator of its tenant); every read here is scoped to a tenant."""

from __future__ import annotations

from dataclasses import dataclass

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models.inspector import TurnInspection
from vancetope_brain.store import Backend, InspectorStore
from vancetope_brain.store.inspector import InspectionPosition
from vancetope_brain.store.sql import to_ms


@dataclass(frozen=True)
class InspectorService:
    store: InspectorStore

    @classmethod
    def on(cls, store: Backend) -> InspectorService:
        return cls(store.port(InspectorStore))

    def page(self, tenant_id: str, process_id: str, cursor: str | None,
             limit: int) -> tuple[list[TurnInspection], str | None]:
        """A page of the process's records (without steps), newest first, and the next
        page's cursor (None: this is the last). ``limit`` below the store's ``MAX_LISTED``."""
        found = self.store.list_inspections(tenant_id, process_id,
                                            None if cursor is None else position(cursor),
                                            limit + 1)
        more = len(found) > limit
        return found[:limit], cursor_after(found[limit - 1]) if more else None

    def get(self, tenant_id: str, turn_id: str) -> TurnInspection:
        """One record whole; ``NotFound`` if the tenant has none of that id."""
        return self.store.get_inspection(tenant_id, turn_id)


def cursor_after(record: TurnInspection) -> str:
    """The cursor of the page after ``record`` (``<startedAt ms>:<id>``)."""
    return f"{to_ms(record.started_at)}:{record.id}"


def position(cursor: str) -> InspectionPosition:
    """The position a ``cursor_after`` cursor names; ``InvalidInput`` for anything else."""
    at, _, turn_id = cursor.partition(":")
    if not at.isdigit() or not turn_id:
        raise InvalidInput(f"not a turn cursor: {cursor[:80]!r}")
    return InspectionPosition(int(at), turn_id)
