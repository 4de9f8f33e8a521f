"""Coalesced wake-ups: at most one queued lane-turn task per process."""

from __future__ import annotations

import zlib
from typing import Protocol

import redis

from vancetope_brain import keys


class Enqueue(Protocol):
    def __call__(self, tenant_id: str, process_id: str, shard: int, delay: float = 0.0) -> None:
        """Put one lane-turn task on queue ``lanes.{shard}``, to run ``delay`` seconds from now."""


def shard_for(process_id: str, shards: int) -> int:
    """The lane queue of a process: stable across processes and restarts (CRC-32, not hash())."""
    return zlib.crc32(process_id.encode()) % shards


class Waker:
    """``wake`` enqueues a lane turn unless one is already queued for the process;
    ``wake_after`` enqueues one to run later (a lease that must run out first).

    The queued-flag is set with SET NX before enqueueing and cleared by the
    task as its first act (``clear``), so a message persisted after the task
    cleared the flag always enqueues a new task. The flag expires after
    ``flag_ttl`` seconds so a lost broker message cannot block wake-ups for
    longer than that; the sweeper covers the gap.
    """

    def __init__(self, client: redis.Redis, enqueue: Enqueue, *, shards: int,
                 flag_ttl: float) -> None:
        self._redis = client
        self._enqueue = enqueue
        self._shards = shards
        self._flag_ttl_ms = int(flag_ttl * 1000)

    def wake(self, tenant_id: str, process_id: str, *, force: bool = False) -> bool:
        """Enqueue a lane turn; False when one was already queued (coalesced). ``force``
        enqueues regardless: the sweeper's, which finds work that a queued task should have
        done long ago (that task may sit with a frozen or dead worker)."""
        if not self._redis.set(keys.wake(process_id), 1, nx=not force, px=self._flag_ttl_ms):
            return False
        try:
            self._enqueue(tenant_id, process_id, shard_for(process_id, self._shards))
        except Exception:
            self._redis.delete(keys.wake(process_id))
            raise
        return True

    def wake_after(self, tenant_id: str, process_id: str, delay: float) -> bool:
        """Enqueue a lane turn to run in ``delay`` seconds, unless one is already due then or
        earlier (coalesced: False). For a lane whose lease another worker holds: if that
        worker is alive it looks at the inbox when it releases; if it died or froze, its
        lease runs out, and this turn takes over (liveness without the sweeper)."""
        if not self._redis.set(keys.wake_later(process_id), 1, nx=True,
                               px=max(1, int(delay * 1000))):
            return False
        self._enqueue(tenant_id, process_id, shard_for(process_id, self._shards), delay)
        return True

    def clear(self, process_id: str) -> None:
        """Called by a lane-turn task before it looks at the inbox."""
        self._redis.delete(keys.wake(process_id))
