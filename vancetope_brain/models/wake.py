"""``ProcessWaker``: how the floors above the lanes start a process's turn.

Sessions and service jobs persist a message or a call, then wake its process; they see
the waker only through this protocol, so they do not import the lane runtime
(``vancetope_brain.lanes.Waker`` implements it; the composition roots hand it over).
"""

from __future__ import annotations

from typing import Protocol


class ProcessWaker(Protocol):
    def wake(self, tenant_id: str, process_id: str) -> object:
        """Have the process's lane run a turn soon. Called after what the turn is to read
        is persisted; waking twice costs nothing (wakes coalesce)."""
        ...
