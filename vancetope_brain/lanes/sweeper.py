"""The sweeper: the store is the truth, broker messages are hints (ARCHITECTURE §3.6).

The sweep (``workers.parts.Worker.sweep``, scheduled by the workers) runs these and also
publishes the event outbox that dead workers left (``events.outbox.EventOutbox.sweep``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import redis

from vancetope_brain import keys
from vancetope_brain.engines.context import TIMER_COMMAND
from vancetope_brain.lanes.lease import TAKE_OVER_MARGIN
from vancetope_brain.lanes.quota import QUOTA_TIMER
from vancetope_brain.lanes.waker import Waker
from vancetope_brain.models import ExternalCommand, InboxMessage, new_id, utcnow
from vancetope_brain.store import LaneStore, TimerStore

TIMERS_PER_SWEEP = 500
"""Most timers one sweep delivers; the rest wait for the next sweep."""


def sweep(store: LaneStore, client: redis.Redis, waker: Waker, *, age: float,
          interval: float) -> int:
    """Re-wake every wakeable process with a message pending longer than ``age`` seconds
    (a CLOSED/FAILED one too: it answers the message), and every INIT or RUNNING one (a
    lost start, a dead turn). One with no live lease is woken now, past any wake flag
    (its queued task may sit with a dead or frozen worker), one forced task per shard.
    One whose lease runs out
    before the next sweep (``interval`` seconds) gets a turn for that moment: its holder
    may be dead. A lease that lives longer is left alone: a live holder renews it (so a
    running turn is not re-woken every sweep) and re-checks its inbox on release, and a
    dead holder's lease comes within ``interval`` of its end at a later sweep. Returns
    how many were woken.

    Catches what a lost broker message, a killed worker or a frozen worker
    left behind; the bound on pending time is sweep interval + age, or the lease TTL.
    """
    woken = 0
    forced: set[int] = set()
    found = store.stale_pending(utcnow() - timedelta(seconds=age)) + store.unsettled()
    for tenant_id, process_id in dict.fromkeys(found):
        held = client.pttl(keys.lease(process_id))
        if held > interval * 1000:
            continue
        if held > 0:
            woken += waker.wake_after(tenant_id, process_id, held / 1000 + TAKE_OVER_MARGIN)
            continue
        # One forced task per shard: it runs every process of the shard's ready set (a
        # round), so the shard's other processes only join the set (coalesced behind it).
        shard = waker.shard(process_id)
        waker.wake(tenant_id, process_id, force=shard not in forced)
        forced.add(shard)
        woken += 1
    return woken


def fire_timers(store: TimerStore, waker: Waker, now: datetime | None = None) -> int:
    """Deliver every timer due at ``now`` (default: now) as a ``timer`` ExternalCommand into
    its process's inbox and wake the process; a quota's timer (``QUOTA_TIMER``) only wakes
    its process. Returns how many were delivered.

    Safe to run in several beats at once: a timer's message carries the idempotency key
    ``timer:<id>:<due ms>``, so a timer delivered twice lands once.
    """
    fired = 0
    for timer in store.due_timers(now or utcnow(), limit=TIMERS_PER_SWEEP):
        if timer.key == QUOTA_TIMER:  # only a wake: the lane checks the quota again
            if store.fire_timer(timer, None):
                waker.wake(timer.tenant_id, timer.process_id)
                fired += 1
            continue
        due_ms = int(timer.due_at.timestamp() * 1000)
        message = InboxMessage(
            id=new_id("msg"), tenant_id=timer.tenant_id, target_process_id=timer.process_id,
            idempotency_key=f"timer:{timer.id}:{due_ms}",
            message=ExternalCommand(command=TIMER_COMMAND, params={"key": timer.key}))
        if store.fire_timer(timer, message):
            waker.wake(timer.tenant_id, timer.process_id)
            fired += 1
    return fired
