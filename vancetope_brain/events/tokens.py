"""Coalescing the token events of a worker process's turns into few Redis round trips.

A model streams its reply as many small chunks; published one by one, each would be a Lua
round trip to Redis from the turn's thread and an event frame at every gateway socket of
the session. A ``TokenCoalescer`` (one per worker process) instead collects the tokens of
all its turns and publishes them every ``interval`` seconds from one thread, all in one
script call (``EventBus.publish_tokens``: one round trip, the events' bodies encoded once
here in the form the gateways send on), the tokens a process streamed since the last flush
merged into one ``token`` event (their texts joined: a ``token`` is a chunk of the reply,
so clients see the same text in fewer, larger chunks — docs/protocol.md).

Order: a process's tokens reach its stream in the order it streamed them, and before any
other event of that process: ``ThinkEngineContext`` streams through a ``TokenStream`` only
while a completion runs, flushes it (synchronously, waiting for a batch in flight) when the
completion returns and before any other event the process emits meanwhile (e.g.
``stream-reset``), so the turn's ``chat-message`` and status events, published after it,
follow its tokens.

Failures: tokens are a live overlay, not the record. Tokens still buffered when the process
dies are lost like tokens it had not streamed yet; the turn's next attempt starts with
``turn-restarted``, which tells clients to drop that attempt's stream. A batch that Redis
refuses fails every turn with tokens in it at its next token or flush (the ``RedisError``
is raised there), as a synchronous publish would have failed it.

Cap: at most ``max_pending`` chunks wait in a process at once (default ``MAX_PENDING``);
a turn that streams one more while the buffer is full publishes everything pending itself,
in its own thread, before going on — the model's stream waits for Redis (back-pressure),
nothing is dropped.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from vancetope_brain.events.bus import EventBus

log = logging.getLogger(__name__)

MAX_PENDING = 10_000
"""Token chunks a worker process buffers at most (all its turns together)."""


class TokenStream:
    """The tokens of one completion of one process. Used by one thread (the turn's)."""

    def __init__(self, coalescer: TokenCoalescer, session_id: str, process_id: str) -> None:
        self.session_id = session_id
        self.process_id = process_id
        self._coalescer = coalescer
        self.error: redis.RedisError | None = None
        """Set when a batch holding tokens of this stream failed; raised at the next call."""

    def put(self, text: str) -> None:
        """Queue a token; it is published within the coalescer's interval."""
        self._raise()
        self._coalescer._put(self, text)

    def flush(self) -> None:
        """Publish what is queued of this stream now, after any batch in flight; raises the
        ``RedisError`` of a batch that failed with tokens of it."""
        self._coalescer._flush(self)
        self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error


class TokenCoalescer:
    """Publishes the queued tokens of every stream every ``interval`` seconds, in one
    script call; thread-safe. Its thread starts with the first token."""

    def __init__(self, bus: EventBus, *, interval: float, max_pending: int = MAX_PENDING):
        if interval <= 0 or max_pending < 1:
            raise ValueError("TokenCoalescer needs interval > 0 and max_pending >= 1")
        self._bus = bus
        self._interval = interval
        self._max_pending = max_pending
        self._lock = threading.Lock()     # guards _pending, _count, _thread
        self._io = threading.Lock()       # held while a batch is being published
        self._pending: dict[TokenStream, list[str]] = {}
        self._count = 0
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def stream(self, session_id: str, process_id: str) -> TokenStream:
        return TokenStream(self, session_id, process_id)

    def close(self) -> None:
        """Publish what is pending and stop the thread."""
        self._closed.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        self._flush_all()

    def _put(self, stream: TokenStream, text: str) -> None:
        with self._lock:
            self._pending.setdefault(stream, []).append(text)
            self._count += 1
            full = self._count >= self._max_pending
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="vt-token-flush",
                                                daemon=True)
                self._thread.start()
        if full:
            self._flush_all()
        else:
            self._wake.set()

    def _run(self) -> None:
        last = float("-inf")  # the first batch goes out at once
        while not self._closed.is_set():
            self._wake.wait()
            self._wake.clear()
            delay = last + self._interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            last = time.monotonic()
            self._flush_all()

    def _flush(self, stream: TokenStream) -> None:
        with self._io:
            with self._lock:
                texts = self._pending.pop(stream, None)
                self._count -= len(texts or ())
            if texts:
                self._publish({stream: texts})

    def _flush_all(self) -> None:
        with self._io:
            with self._lock:
                batch, self._pending, self._count = self._pending, {}, 0
            if batch:
                self._publish(batch)

    def _publish(self, batch: dict[TokenStream, list[str]]) -> None:
        """One event per stream, its tokens joined, all in one call (holding ``_io``)."""
        try:
            self._bus.publish_tokens([(s.session_id, s.process_id, "".join(texts))
                                      for s, texts in batch.items()])
        except redis.RedisError as e:
            log.warning("publishing the tokens of %d stream(s) failed: %s", len(batch), e)
            for stream in batch:
                stream.error = e
