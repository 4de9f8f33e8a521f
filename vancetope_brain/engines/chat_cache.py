"""The committed chat lines a worker process already read, so a turn reads only what is new.

Committed chat lines never change and a process's commits are serialized (its lane), each
numbering its lines after every earlier one; so the newest lines of a process that a worker
read in an earlier turn are still its newest lines, but for those committed since. A turn
(``ChatCache.reader``) reads the lines newer than the ones held (one small page, usually)
and then serves ``ChatApi.history``'s page reads from memory, reading from the store only
what lies beyond the oldest line held (and holding that too). Lines are held for the most
recently read processes, at most ``max_lines`` in all (``VANCETOPE_CHAT_CACHE_LINES``):
the least recently read process's lines go first.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from vancetope_brain.models import ChatMessage
from vancetope_brain.store import LaneStore

Reader = Callable[[int | None, int], list[ChatMessage]]
"""``(before_seq, limit)`` → the newest ``limit`` committed lines older than ``before_seq``
(None: the newest), oldest first: ``LaneStore.chat_history``'s contract."""

def store_reader(lanes: LaneStore, tenant_id: str, process_id: str) -> Reader:
    """The process's pages, each read from the store (nothing held)."""
    def read(before: int | None, limit: int) -> list[ChatMessage]:
        return lanes.chat_history(tenant_id, process_id, before_seq=before, limit=limit)
    return read


SYNC_PAGE = 4
"""Lines read first to find those committed since a process's lines were last read (a turn
commits two or three); a process further behind reads pages as large as what it read so
far, up to ``CATCH_UP`` lines in all, beyond which its held lines are dropped and read
again as needed."""
CATCH_UP = 200


@dataclass
class _Held:
    """The newest committed lines of one process, oldest first, without a hole; ``start``:
    they begin at the process's first line (nothing older exists)."""

    lines: list[ChatMessage] = field(default_factory=list)
    start: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class ChatCache:
    """Per worker process, shared by its turns (thread-safe)."""

    def __init__(self, lanes: LaneStore, max_lines: int) -> None:
        self._lanes = lanes
        self._max_lines = max_lines
        self._held: OrderedDict[tuple[str, str], _Held] = OrderedDict()
        self._count = 0  # lines held in all
        self._lock = threading.Lock()

    def reader(self, tenant_id: str, process_id: str) -> Reader:
        """The page reader of one turn of the process (it takes up what was committed since
        on its first read)."""
        store = store_reader(self._lanes, tenant_id, process_id)
        if self._max_lines <= 0:
            return store
        key = (tenant_id, process_id)
        with self._lock:
            held = self._held.pop(key, None) or _Held()
            self._held[key] = held  # the most recently read, last
        synced = False

        def read(before: int | None, limit: int) -> list[ChatMessage]:
            nonlocal synced
            with held.lock:
                size = len(held.lines)
                if not synced:
                    _sync(held, store)
                    synced = True
                if before is not None and (not held.lines or before < held.lines[0].seq):
                    # Not a page reader's order (nothing held, or a page below a hole):
                    # what it reads would not be the newest lines, so it is not held.
                    lines = store(before, limit)
                else:
                    end = len(held.lines) if before is None else \
                        bisect.bisect_left(held.lines, before, key=_seq)
                    lines = held.lines[max(0, end - limit):end] if limit else []
                    if len(lines) < limit and not held.start:
                        # Beyond the oldest line held (all of them are in ``lines``): read
                        # it and hold it too.
                        older = store(held.lines[0].seq if held.lines else None,
                                      limit - len(lines))
                        held.lines[:0] = older
                        held.start = len(older) < limit - len(lines)
                        lines = older + lines
                grown = len(held.lines) - size
            self._count_lines(key, held, grown)
            return lines

        return read

    def _count_lines(self, key: tuple[str, str], held: _Held, grown: int) -> None:
        """Count what ``held`` grew by; drop the least recently read processes' lines
        while more than ``max_lines`` are held."""
        with self._lock:
            if self._held.get(key) is not held:  # dropped meanwhile: not counted any more
                return
            self._count += grown
            while self._count > self._max_lines and self._held:
                _, dropped = self._held.popitem(last=False)
                self._count -= len(dropped.lines)
                if dropped is held:  # this turn still reads from it; nothing more is kept
                    break


def _seq(line: ChatMessage) -> int:
    return line.seq


def _sync(held: _Held, store: Reader) -> None:
    """Add the lines committed since ``held`` was read (all of them, or drop what is held
    when that is more than ``CATCH_UP`` lines)."""
    if not held.lines:
        held.start = False  # a held empty chat may have grown: read it like a new one
        return
    newest = held.lines[-1].seq
    fresh: list[ChatMessage] = []
    before: int | None = None
    limit = SYNC_PAGE
    while True:
        older = store(before, limit)
        if not older or older[0].seq <= newest:
            fresh = [line for line in older if line.seq > newest] + fresh
            break
        fresh = older + fresh
        if len(fresh) >= CATCH_UP:
            held.lines, held.start = [], False  # too far behind: read again as needed
            return
        before, limit = older[0].seq, min(len(fresh), CATCH_UP - len(fresh))
    held.lines += fresh
