"""The gateway's event listener: every follower gets every event after its seq, once, in order."""

from __future__ import annotations

import threading

import fakeredis

from tests.helpers import wait_for
from vancetope_brain.events import EventBus, EventListener, EventType


class HeldReads:
    """A Redis client whose stream reads wait until ``go`` is set, after telling ``reading``."""

    def __init__(self, client: fakeredis.FakeRedis) -> None:
        self._client = client
        self.reading = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._client, name)

    def xread(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.reading.set()
        self.go.wait(10)
        return self._client.xread(*args, **kwargs)


def test_a_session_followed_from_further_back_during_a_read_misses_nothing():
    """A client resumes from seq 0 while the reader thread is in a read that started at
    another follower's (later) position: it must still get the session's first events."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    seqs = [bus.publish("s", "p", EventType.TOKEN, {"text": str(i)}) for i in range(3)]
    reads = HeldReads(client)
    listener = EventListener(reads, block_ms=20)  # type: ignore[arg-type]
    got: dict[str, list[int]] = {"live": [], "resumed": []}
    try:
        listener.follow("s", seqs[-1], lambda e: got["live"].append(e.seq))
        assert reads.reading.wait(10)  # reading from the live follower's seq on
        listener.follow("s", 0, lambda e: got["resumed"].append(e.seq))
        seqs.append(bus.publish("s", "p", EventType.TOKEN, {"text": "3"}))
        reads.go.set()
        wait_for(lambda: seqs[-1] in got["resumed"], what="the resumed follower to catch up")
        assert got == {"live": seqs[-1:], "resumed": seqs}
    finally:
        reads.go.set()
        listener.close()
