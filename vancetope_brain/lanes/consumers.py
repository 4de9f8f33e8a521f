"""Which workers consume which lane queues: a heartbeat in Redis (``keys.WORKERS``).

Each worker writes its name and the queues it consumes every ``HEARTBEAT_INTERVAL``
seconds, from a thread of its own (so a long turn in a solo pool does not stop it),
while its consumer is connected; it removes its entry when it stops consuming. A
gateway's ``/readyz`` reads the hash: one ``HGETALL`` of a few fields, where Celery's
``inspect`` would broadcast to every worker and wait for their replies.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

import redis

from vancetope_brain import keys

HEARTBEAT_INTERVAL = 5.0
"""Seconds between a worker's heartbeats."""
HEARTBEAT_TTL = 3 * HEARTBEAT_INTERVAL
"""Seconds a worker counts as consuming after its last heartbeat (a worker killed with
SIGKILL leaves its entry; it stops counting after this)."""


def beat(client: redis.Redis, worker: str, queues: Iterable[str]) -> None:
    """Record that ``worker`` consumes ``queues`` now."""
    entry = json.dumps({"queues": sorted(queues), "until": time.time() + HEARTBEAT_TTL})
    with client.pipeline() as pipe:
        pipe.hset(keys.WORKERS, worker, entry)
        pipe.expire(keys.WORKERS, int(HEARTBEAT_TTL) + 1)
        pipe.execute()


def forget(client: redis.Redis, worker: str) -> None:
    """``worker`` stopped consuming."""
    client.hdel(keys.WORKERS, worker)


def live(client: redis.Redis) -> dict[str, list[str]]:
    """Worker name → the queues it consumes, for every worker whose heartbeat is fresh;
    stale entries are removed."""
    now, alive, stale = time.time(), {}, []
    for name, raw in client.hgetall(keys.WORKERS).items():
        entry = json.loads(raw)
        if entry["until"] >= now:
            alive[name.decode() if isinstance(name, bytes) else name] = entry["queues"]
        else:
            stale.append(name)
    if stale:
        client.hdel(keys.WORKERS, *stale)
    return alive


def uncovered(consumers: dict[str, list[str]], queues: Iterable[str]) -> list[str]:
    """The ``queues`` no live worker consumes."""
    consumed = {q for names in consumers.values() for q in names}
    return [q for q in queues if q not in consumed]
