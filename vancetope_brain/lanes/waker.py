"""Coalesced wake-ups: at most one queued lane-turn task per process."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import redis

from vancetope_brain import keys

Enqueue = Callable[[str, str, int], None]
"""``enqueue(tenant_id, process_id, shard)`` puts one lane-turn task on queue ``lanes.{shard}``."""


def shard_for(process_id: str, shards: int) -> int:
    """The lane queue of a process: stable across processes and restarts (CRC-32, not hash())."""
    return zlib.crc32(process_id.encode()) % shards


class Waker:
    """``wake`` enqueues a lane turn unless one is already queued for the process.

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

    def wake(self, tenant_id: str, process_id: str) -> bool:
        """Enqueue a lane turn; False when one was already queued (coalesced)."""
        if not self._redis.set(keys.wake(process_id), 1, nx=True, px=self._flag_ttl_ms):
            return False
        try:
            self._enqueue(tenant_id, process_id, shard_for(process_id, self._shards))
        except Exception:
            self._redis.delete(keys.wake(process_id))
            raise
        return True

    def clear(self, process_id: str) -> None:
        """Called by a lane-turn task before it looks at the inbox."""
        self._redis.delete(keys.wake(process_id))
