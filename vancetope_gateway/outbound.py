"""A connection's outbound side: a bounded queue of frames the gateway's socket hub
(``hub.py``) drains in order, so a client that reads slowly delays nobody but itself
(ARCHITECTURE §5).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vancetope_gateway.protocol import Socket

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CloseItem:
    code: int | None  # None: end without a close frame (the socket is gone or closes itself)
    message: str


class Outbound:
    """The frames of one connection, sent in order by the hub.

    ``put``, ``wait_for_room`` and ``close`` are called with ``lock`` held (the
    Connection's, which also guards its state); ``put`` and ``close`` never block, so
    the event listener may call them. ``sock.pump()`` is called whenever a frame is
    added; the hub drains the queue with ``take`` and, after the close item (its close
    frame sent if ``close`` got a code), calls ``finish``, which calls ``on_closed``.
    A socket that fails is the hub's to report, as a ``close`` of the connection. A
    queue not finished ``grace`` seconds after ``close`` (its client stopped reading)
    gets the socket aborted, which fails it: it always finishes.
    """

    def __init__(self, sock: Socket, lock: threading.Lock, *, limit: int, grace: float,
                 on_closed: Callable[[], None]) -> None:
        self._sock = sock
        self._finished = threading.Event()
        self._changed = threading.Condition(lock)  # notified when a frame is added or taken
        self._frames: deque[str | CloseItem] = deque()
        self._limit = limit
        self._grace = grace
        self._on_closed = on_closed
        self._closed = False
        self._deadline: threading.Timer | None = None

    def put(self, text: str) -> bool:
        """Queue a frame (never after ``close``); False when ``limit`` frames are waiting."""
        if len(self._frames) >= self._limit:
            return False
        self._add(text)
        return True

    def wait_for_room(self, below: int, timeout: float) -> bool:
        """Wait until at most ``below`` frames are waiting (``lock`` is released meanwhile);
        False if that takes longer than ``timeout`` seconds."""
        return self._changed.wait_for(
            lambda: self._closed or len(self._frames) <= below, timeout)

    def close(self, code: int | None, message: str, last_frame: str | None = None) -> None:
        """Replace whatever is still queued by ``last_frame`` (if given) and the close
        item; later frames are ignored."""
        self._closed = True
        self._frames.clear()
        if last_frame is not None:
            self._frames.append(last_frame)
        # Armed before the close item is queued, so ``finish`` always finds it to cancel.
        self._deadline = threading.Timer(self._grace, self._abort)
        self._deadline.name = "vt-writer-deadline"
        self._deadline.daemon = True
        self._deadline.start()
        self._add(CloseItem(code, message))

    def take(self) -> str | CloseItem | None:
        """The next item for the hub, None when none waits (``lock`` not held)."""
        with self._changed:
            if not self._frames:
                return None
            item = self._frames.popleft()
            self._changed.notify_all()
            return item

    def finish(self) -> None:
        """The close item was handled (its close frame sent, or the socket is gone)."""
        assert self._deadline is not None
        self._deadline.cancel()
        self._finished.set()
        self._on_closed()

    def _add(self, item: str | CloseItem) -> None:
        self._frames.append(item)
        self._changed.notify_all()
        self._sock.pump()

    def _abort(self) -> None:
        if not self._finished.is_set():
            log.info("a closed connection's frames were still not sent after %gs; aborting",
                     self._grace)
            self._sock.abort()
