"""The journal port: the recorded steps of each process's uncommitted turn (ARCHITECTURE §3)."""

from __future__ import annotations

from abc import abstractmethod

from vancetope_brain.errors import JournalFull
from vancetope_brain.models import JournalEntry
from vancetope_brain.store.backend import Port

MAX_ENTRY_BYTES = 256 * 1024
"""The most one entry may take as JSON (a completion, a tool result and its arguments)."""
MAX_ENTRIES = 500
"""The most entries one process's journal holds (a turn's steps plus its in-doubt calls)."""


def entry_json(entry: JournalEntry) -> str:
    """The stored form of ``entry``; raises ``JournalFull`` past ``MAX_ENTRY_BYTES``."""
    text = entry.model_dump_json(by_alias=True)
    if len(text.encode()) > MAX_ENTRY_BYTES:
        raise JournalFull(f"journal_full: the {entry.kind.value} step {entry.key} of process "
                          f"{entry.process_id} takes {len(text.encode())} bytes, more than a "
                          f"journal entry holds ({MAX_ENTRY_BYTES})")
    return text


def too_many(process_id: str) -> JournalFull:
    return JournalFull(f"journal_full: the turn journal of process {process_id} holds "
                       f"{MAX_ENTRIES} entries, its cap")


class JournalStore(Port):
    """The turn journal: per process, the steps its uncommitted turn has taken, so that an
    attempt of that turn after a crash replays them instead of taking them again.

    Entries are keyed by (process, ``key``); they are written by the turn's own epoch only
    (fenced like ``LaneStore.commit_turn``) and leave with the turn's commit: a
    ``LaneStore.commit_turn`` whose ``TurnCommit.journal_opened`` is set deletes every entry
    of the process but its IN_DOUBT ones, in the same atomic step as the commit (SQLite,
    PostgreSQL; on MongoDB right after the commit's claim, see its adapter), and a commit that
    closes the process deletes them all. Caps: ``MAX_ENTRY_BYTES`` per entry, ``MAX_ENTRIES`` per
    process.
    """

    @abstractmethod
    def journal(self, tenant_id: str, process_id: str) -> list[JournalEntry]:
        """Every entry of the process, in the order each key was first written (empty for a
        process that has none, is missing, or is another tenant's)."""

    @abstractmethod
    def record_steps(self, tenant_id: str, process_id: str, epoch: int,
                     entries: list[JournalEntry]) -> bool:
        """Write ``entries`` (each replacing the entry with its key) all or nothing, only
        while the process's epoch is still ``epoch``; returns False, having written nothing,
        once it moved on (a newer turn owns the journal). Durable when it returns.

        Raises ``JournalFull`` (writing nothing) when an entry passes ``MAX_ENTRY_BYTES`` or
        the process would hold more than ``MAX_ENTRIES``; ``NotFound`` when the process does
        not exist in the tenant.
        """
