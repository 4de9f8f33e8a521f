"""A connection's outbound side: a bounded queue of frames drained in order — by the
gateway's socket hub (``hub.py``, what the server runs) or by a writer thread of the
connection's own (a ``Connection`` on a blocking ``Socket``, as tests drive it) — so a
client that reads slowly delays nobody but itself (ARCHITECTURE §5).
"""

from __future__ import annotations

import contextlib
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
    """The frames of one connection, sent in order by one drainer.

    ``put``, ``wait_for_room`` and ``close`` are called with ``lock`` held (the
    Connection's, which also guards its state); ``put`` and ``close`` never block, so
    the event listener may call them. With ``pump`` (the hub's wake-up for this
    socket), ``pump()`` is called whenever a frame is added and the hub drains the queue
    with ``take`` and, after the close item, calls ``finish``. Without it a writer
    thread starts with the first frame, sends each with ``sock.send`` and ends after
    the close item: it sends the close frame if ``close`` got a code, then finishes.
    Finishing calls ``on_closed``. A send that fails calls ``on_failure``, which must
    lead to ``close``. A drainer not finished ``grace`` seconds after ``close`` (its
    client stopped reading, a send is blocked) gets the socket aborted, which fails that
    send: it always finishes.
    """

    def __init__(self, sock: Socket, lock: threading.Lock, *, limit: int, grace: float,
                 on_failure: Callable[[], None], on_closed: Callable[[], None],
                 pump: Callable[[], None] | None = None) -> None:
        self._sock = sock
        self._pump = pump
        self._finished = threading.Event()
        self._changed = threading.Condition(lock)  # notified when a frame is added or taken
        self._frames: deque[str | CloseItem] = deque()
        self._limit = limit
        self._grace = grace
        self._on_failure = on_failure
        self._on_closed = on_closed
        self._closed = False
        self._writer: threading.Thread | None = None
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
        # Armed before the close item is queued, so the writer always finds it to cancel.
        self._deadline = threading.Timer(self._grace, self._abort)
        self._deadline.name = "vt-writer-deadline"
        self._deadline.daemon = True
        self._deadline.start()
        self._add(CloseItem(code, message))

    def join(self) -> None:
        """Wait until finished (at most about ``grace`` seconds after ``close``)."""
        if self._writer is not None or self._pump is not None:
            self._finished.wait()

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
        if self._pump is not None:
            self._pump()
        elif self._writer is None:
            self._writer = threading.Thread(target=self._write, name="vt-writer", daemon=True)
            self._writer.start()

    def _take(self) -> str | CloseItem:
        with self._changed:
            self._changed.wait_for(lambda: self._frames)
            item = self._frames.popleft()
            self._changed.notify_all()
            return item

    def _write(self) -> None:
        while not isinstance(item := self._take(), CloseItem):
            try:
                self._sock.send(item)
            except Exception:
                log.info("send failed; the client is gone")
                self._on_failure()
        if item.code is not None:
            with contextlib.suppress(Exception):  # the client may be gone already
                self._sock.close(item.code, item.message)
        self.finish()

    def _abort(self) -> None:
        if (self._writer is not None or self._pump is not None) and \
                not self._finished.is_set():
            log.info("a closed connection's writer was still blocked after %gs; aborting",
                     self._grace)
            self._sock.abort()
