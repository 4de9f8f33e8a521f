"""Coalesced wake-ups: a woken process waits in its shard's ready set, and at most one
queued (not yet started) or lingering shard task per shard runs what waits there."""

from __future__ import annotations

import logging
import time
import zlib
from typing import NamedTuple, Protocol

import redis

from vancetope_brain import keys

log = logging.getLogger(__name__)


class Enqueue(Protocol):
    def __call__(self, shard: int, process: tuple[str, str] | None = None,
                 delay: float = 0.0) -> None:
        """Put a lane task on queue ``lanes.{shard}``: a shard task, which runs the turns of
        the shard's ready processes (``LaneRunner.drain``), or with ``process`` (tenant id,
        process id) the turn of that one process, to run ``delay`` seconds from now."""


def ready_member(tenant_id: str, process_id: str) -> str:
    """A process's member in its shard's ready set."""
    return f"{tenant_id}/{process_id}"


def ready_process(member: bytes) -> tuple[str, str]:
    """The (tenant id, process id) of a ready-set member."""
    tenant_id, _, process_id = member.decode().rpartition("/")
    return tenant_id, process_id


def shard_for(process_id: str, shards: int) -> int:
    """The lane queue of a process: stable across processes and restarts (CRC-32, not hash())."""
    return zlib.crc32(process_id.encode()) % shards


# KEYS: ready set, queued flag, the shard's bell, the lingering set. ARGV: member, now (µs),
# flag TTL (ms), force, the bells' prefix.
# A process already waiting keeps its place (NX). A task lingering on the shard (flag
# 'linger') is rung and takes it: nothing to queue. Returns 1 if a shard task must be
# queued; then every task lingering on another shard is rung too, so that it ends (it holds
# a worker that task may need) unless its own shard has work.
_WAKE = """
redis.call('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1])
if redis.call('GET', KEYS[2]) == 'linger' then
  redis.call('RPUSH', KEYS[3], 1)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  if ARGV[4] ~= '1' then return 0 end
end
if ARGV[4] == '1' then
  redis.call('SET', KEYS[2], 1, 'PX', ARGV[3])
elseif not redis.call('SET', KEYS[2], 1, 'NX', 'PX', ARGV[3]) then
  return 0
end
for _, shard in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  local bell = ARGV[5] .. shard
  if bell ~= KEYS[3] then
    redis.call('RPUSH', bell, 1)
    redis.call('PEXPIRE', bell, ARGV[3])
  end
end
return 1
"""

# KEYS: ready set, queued flag, the shard's bell, the lingering set. ARGV: the task's round
# ('' on its first take, which clears the queued flag and the shard's linger, and fixes
# the round: the wake time of the process that waits last now), flag TTL (ms), lease and
# re-check key prefixes, lease token, lease TTL (ms), the queued flags' prefix, the number
# of shards, this shard, the linger's flag TTL (ms; '0': the task may not linger).
# Returns nil (nothing waits) or {member, 1 if another shard task must be queued, ms left of
# the lease another worker holds or -1 if the lease is now ours, the round}; member '' when
# what waits was woken after the round and another shard's task waits for a worker (what
# waits is then the next task's, queued behind it); with no other shard's task queued, the
# task goes on with a new round instead (no Celery task for nothing to be fair to).
# Another task is queued whenever processes wait and none is queued, so those never depend
# on this task's survival.
# A task queued here rings every lingering shard's bell, as a wake that queues one does.
# When nothing waits, the task may linger, and the script returns {'', 0, -1, '', 1}: it
# sets the flag to 'linger' (so wakes ring the bell instead of queuing a task) unless a
# task of this shard is queued or another shard's task waits for a worker (a flag other
# than 'linger': a lingering task has its worker).
# The lease key is the taken process's and the other shards' flags are read by prefix (not
# declared in KEYS: one Redis, no cluster); a holder's re-check is asked for in the same
# script, so it sees the request on release.
_NEXT = """
local function others_queued()
  for shard = 0, tonumber(ARGV[8]) - 1 do
    if shard ~= tonumber(ARGV[9]) then
      local flag = redis.call('GET', ARGV[7] .. shard)
      if flag and flag ~= 'linger' then return true end
    end
  end
  return false
end
local function idle()
  if ARGV[10] == '0' or others_queued() or
      not redis.call('SET', KEYS[2], 'linger', 'NX', 'PX', ARGV[10]) then
    return nil
  end
  redis.call('DEL', KEYS[3])
  redis.call('SADD', KEYS[4], ARGV[9])
  return {'', 0, -1, '', 1}
end
local round = ARGV[1]
if round == '' then
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('SREM', KEYS[4], ARGV[9])
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if #last == 0 then return idle() end
  round = last[2]
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #head == 0 then return idle() end
local ours = tonumber(head[2]) <= tonumber(round)
if not ours and not others_queued() then
  round = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2]
  ours = true
end
local waiting = redis.call('ZCARD', KEYS[1])
if ours then
  redis.call('ZREM', KEYS[1], head[1])
  waiting = waiting - 1
end
local more = 0
if waiting > 0 and redis.call('SET', KEYS[2], 1, 'NX', 'PX', ARGV[2]) then
  more = 1
  for _, shard in ipairs(redis.call('SMEMBERS', KEYS[4])) do
    local bell = string.match(KEYS[3], '^(.*:)') .. shard
    redis.call('RPUSH', bell, 1)
    redis.call('PEXPIRE', bell, ARGV[2])
  end
end
if not ours then return {'', more, -1, round} end
local process = string.match(head[1], '[^/]*$')
local lease = ARGV[3] .. process
if redis.call('SET', lease, ARGV[5], 'NX', 'PX', ARGV[6]) then
  return {head[1], more, -1, round}
end
redis.call('SET', ARGV[4] .. process, 1, 'PX', ARGV[6])
return {head[1], more, math.max(0, redis.call('PTTL', lease)), round}
"""

LINGER_MARGIN = 1.0
"""Seconds a linger's flag outlives the linger: a task that dies while it lingers holds
its shard's wakes back no longer (a live one's flag never runs out under it: it takes
again right after its wait)."""


class Lingering(NamedTuple):
    """What ``Waker.next_ready`` returns when nothing waits and the task may linger: wakes
    of the shard ring its bell now; the task waits for one (``Waker.await_wake``), then
    takes again as on its first take."""

    shard: int


class Ready(NamedTuple):
    """A ready process a shard task took (``Waker.next_ready``)."""

    tenant_id: str
    process_id: str
    busy_for: float | None
    """None: its lease is the taker's now (under the token it gave); else another worker
    holds it for that many seconds more, and re-checks the lane when it releases."""
    round_end: bytes
    """The taking task's round: the wake time (µs, as Redis writes it) of the process that
    waited last when the task took its first; the task's further takes pass it on."""


class Waker:
    """``wake`` puts a process into its shard's ready set (``vt:ready:{shard}``) and
    enqueues a shard task unless one is queued already (``vt:shard-queued:{shard}``, set
    with SET NX); ``wake_after`` enqueues the turn of one process to run later (a lease
    that must run out first).

    A shard task clears the queued flag as its first act, then takes ready processes one
    at a time, oldest wake first, each with its lane lease (``next_ready``), for one
    round: the processes that waited when it began; one woken later (also one woken
    again while its turn runs) is the next task's, which waits in the Celery queue behind
    the other shards' tasks — unless no other shard's task is queued, when the same task
    goes on with the next round (a task per round would cost Celery's round trip and be
    fair to no one). Whenever processes wait after a take and no task is queued,
    the take queues one, so stopping a task anywhere loses no wake-up
    (docs/architecture.md, "No lost wake-up"). The flag expires after ``flag_ttl`` seconds
    so a lost broker message cannot block wake-ups for longer than that; the sweeper
    covers the gap.

    A task whose round is over and finds nothing waiting may linger (``next_ready`` with
    ``linger``: the flag becomes ``linger``): wakes of its shard then ring its bell
    (``vt:shard-bell:{shard}``) instead of queuing a task, and a wake that queues a task of
    any shard rings every lingering shard's bell (``vt:lingering``), so a lingering task
    does not keep a worker from a task that waits for one.
    """

    def __init__(self, client: redis.Redis, enqueue: Enqueue, *, shards: int,
                 flag_ttl: float) -> None:
        self._redis = client
        self._enqueue = enqueue
        self._shards = shards
        self._flag_ttl_ms = int(flag_ttl * 1000)
        self._wake = client.register_script(_WAKE)
        self._next = client.register_script(_NEXT)

    def wake(self, tenant_id: str, process_id: str, *, force: bool = False) -> bool:
        """Make the process ready and enqueue a shard task; False when one was already
        queued (coalesced). ``force`` enqueues regardless: the sweeper's, which finds work
        that a queued task should have done long ago (that task may sit with a frozen or
        dead worker)."""
        shard = shard_for(process_id, self._shards)
        flag = keys.shard_queued(shard)
        if not self._wake(keys=[keys.ready(shard), flag, keys.shard_bell(shard), keys.LINGERING],
                          args=[ready_member(tenant_id, process_id), time.time_ns() // 1000,
                                self._flag_ttl_ms, int(force), keys.shard_bell("")]):
            return False
        try:
            self._enqueue(shard)
        except Exception:
            self._redis.delete(flag)
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
        self._enqueue(shard_for(process_id, self._shards), (tenant_id, process_id), delay)
        return True

    def clear(self, tenant_id: str, process_id: str) -> None:
        """Take the process out of its shard's ready set: a lane-turn task of its own, about
        to look at its inbox, runs the turn it waits for."""
        self._redis.zrem(keys.ready(shard_for(process_id, self._shards)),
                         ready_member(tenant_id, process_id))

    def shard(self, process_id: str) -> int:
        """The shard of a process."""
        return shard_for(process_id, self._shards)

    def next_ready(self, shard: int, round_end: bytes | None, *, token: bytes,
                   lease_ttl: float, linger: float = 0.0) -> Ready | Lingering | None:
        """Take the longest-waiting ready process of ``shard`` and its lane lease (under
        ``token``, for ``lease_ttl`` seconds) in one round trip; None when none waits that
        was woken by ``round_end`` (the task's round, from its first take's ``Ready``; None
        for the first take, which clears the shard's queued flag and fixes the round) and
        another shard's task is queued — with none queued, the next round begins
        (``Ready.round_end`` is then the new one).
        Queues another shard task if processes are left waiting and none is queued. Called
        by a shard task before it looks at the process's inbox.
        When none waits and ``linger`` > 0, the task may linger for that many seconds
        (``Lingering``: no task of the shard is queued and no other shard's task waits for
        a worker); from then on the shard's wakes ring its bell instead of queuing a task,
        until the task's next take, which must be a first take (``round_end`` None) after
        ``await_wake``."""
        linger_ttl = int((linger + LINGER_MARGIN) * 1000) if linger > 0 else 0
        got = self._next(keys=[keys.ready(shard), keys.shard_queued(shard),
                               keys.shard_bell(shard), keys.LINGERING],
                         args=[round_end or b"", self._flag_ttl_ms, keys.lease(""),
                               keys.recheck(""), token, int(lease_ttl * 1000),
                               keys.shard_queued(""), self._shards, shard, linger_ttl])
        if got is None:
            return None
        if len(got) == 5:
            return Lingering(shard)
        member, more, left_ms, round_end = got
        if more:
            try:
                self._enqueue(shard)
            except Exception as e:  # a later wake queues one, or the sweeper finds them
                self._redis.delete(keys.shard_queued(shard))
                log.warning("could not queue a further task for lane shard %s (%s)", shard, e)
        if not member:
            return None
        return Ready(*ready_process(member), None if left_ms < 0 else left_ms / 1000, round_end)

    def await_wake(self, shard: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds (at least 1 ms) for the bell of ``shard``, on which
        a task lingers (``next_ready`` returned ``Lingering``): one blocking read, no
        polling. True if it rang — a wake of the shard, or another shard's task queued."""
        return self._redis.blpop([keys.shard_bell(shard)], timeout=max(timeout, 0.001)) \
            is not None
