"""The sweeper: the store is the truth, broker messages are hints (ARCHITECTURE §3.6)."""

from __future__ import annotations

from datetime import timedelta

import redis

from vancetope_brain import keys
from vancetope_brain.lanes.waker import Waker
from vancetope_brain.models import utcnow
from vancetope_brain.store import LaneStore


def sweep(store: LaneStore, client: redis.Redis, waker: Waker, *, age: float) -> int:
    """Re-wake every wakeable process with a message pending longer than ``age`` seconds
    and no live lease. Returns how many were woken.

    Catches what a lost broker message, a killed worker or a frozen worker
    left behind; the bound on pending time is lease TTL + sweep interval + age.
    """
    woken = 0
    for tenant_id, process_id in store.stale_pending(utcnow() - timedelta(seconds=age)):
        if client.exists(keys.lease(process_id)):
            continue
        woken += waker.wake(tenant_id, process_id)
    return woken
