"""Wake coalescing on the real Redis: a woken process waits in its shard's ready set; while
a shard task is queued (not started), more wakes of the shard enqueue nothing; once the
task starts (or the flag expires), a wake enqueues again. Takes are oldest-first, and a
take that leaves processes waiting with no task queued queues one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.lanes.lease import LeaseKeeper
from vancetope_brain.lanes.waker import Waker, shard_for


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    opened = redis.Redis.from_url(redis_url)
    yield opened
    opened.delete(*(keys.ready(i) for i in range(4)), *(keys.shard_queued(i) for i in range(4)))
    if (held := opened.keys(keys.lease("*")) + opened.keys(keys.recheck("*"))):
        opened.delete(*held)
    opened.close()


def _take(waker: Waker, shard: int, *, first: bool) -> tuple[str, str] | None:
    """The next ready process of ``shard``, its lease taken under a token of its own."""
    ready = waker.next_ready(shard, first=first, token=LeaseKeeper.new_token(), lease_ttl=10)
    return None if ready is None else (ready.tenant_id, ready.process_id)


def _two_on(shard: int, shards: int) -> tuple[str, str]:
    """Two process ids of ``shard``."""
    found = [p for p in (f"proc_{i}" for i in range(200)) if shard_for(p, shards) == shard]
    return found[0], found[1]


def test_wakes_of_a_shard_coalesce_until_its_task_starts(client):
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=4, flag_ttl=60)
    a, b = _two_on(1, 4)
    assert [waker.wake("acme", a) for _ in range(3)] == [True, False, False]
    assert not waker.wake("acme", b)  # same shard: the queued task takes it too
    assert queued == [(1,)]
    assert 0 < client.pttl(keys.shard_queued(1)) <= 60_000

    assert _take(waker, 1, first=True) == ("acme", a)  # the task starts: flag cleared
    assert queued == [(1,), (1,)]  # b still waits: a second task is queued for it
    assert not waker.wake("acme", a)  # ... which takes a again too
    assert _take(waker, 1, first=False) == ("acme", b)
    assert _take(waker, 1, first=False) == ("acme", a)
    assert _take(waker, 1, first=False) is None
    assert len(queued) == 2


def test_takes_are_oldest_wake_first_and_a_rewake_keeps_its_place(client):
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=1, flag_ttl=60)
    for pid in ("proc_a", "proc_b", "proc_c"):
        waker.wake("acme", pid)
    waker.wake("acme", "proc_a")  # already waiting: stays first
    assert _take(waker, 0, first=True) == ("acme", "proc_a")
    waker.wake("globex", "proc_a")  # woken again while its turn runs: behind the others
    assert [_take(waker, 0, first=False) for _ in range(4)] == [
        ("acme", "proc_b"), ("acme", "proc_c"), ("globex", "proc_a"), None]


def test_a_take_takes_the_lane_lease_or_asks_its_holder_for_a_re_check(client):
    waker = Waker(client, lambda *task: None, shards=1, flag_ttl=60)
    waker.wake("acme", "proc_a")
    mine = LeaseKeeper.new_token()
    assert waker.next_ready(0, first=True, token=mine, lease_ttl=10) == ("acme", "proc_a", None)
    assert client.get(keys.lease("proc_a")) == mine
    assert 9_000 < client.pttl(keys.lease("proc_a")) <= 10_000
    assert not client.exists(keys.recheck("proc_a"))

    waker.wake("acme", "proc_a")  # a message while the turn runs: taken, the lease is not
    busy = waker.next_ready(0, first=True, token=LeaseKeeper.new_token(), lease_ttl=10)
    assert busy is not None and busy[:2] == ("acme", "proc_a")
    assert busy.busy_for is not None and 9 < busy.busy_for <= 10
    assert client.get(keys.lease("proc_a")) == mine  # still the holder's ...
    assert client.exists(keys.recheck("proc_a"))  # ... which re-checks when it releases


def test_an_expired_flag_no_longer_holds_wakes_back(client):
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=1, flag_ttl=0.2)
    assert waker.wake("acme", "proc_a") and not waker.wake("acme", "proc_a")
    wait_for(lambda: not client.exists(keys.shard_queued(0)), what="the queued flag to expire")
    assert waker.wake("acme", "proc_a")
    assert len(queued) == 2


def test_a_failed_enqueue_leaves_no_flag_behind(client):
    def broken(*task: object) -> None:
        raise ConnectionError("broker down")

    with pytest.raises(ConnectionError):
        Waker(client, broken, shards=1, flag_ttl=60).wake("acme", "proc_a")
    assert not client.exists(keys.shard_queued(0))


def test_a_forced_wake_enqueues_past_a_queued_flag(client):
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=1, flag_ttl=60)
    assert waker.wake("acme", "proc_a") and not waker.wake("acme", "proc_a")
    assert waker.wake("acme", "proc_a", force=True)  # the sweeper's: that task may be lost
    assert len(queued) == 2 and client.exists(keys.shard_queued(0))


def test_a_delayed_wake_carries_its_delay_and_coalesces_until_it_is_due(client):
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=1, flag_ttl=60)
    assert waker.wake_after("acme", "proc_a", 0.3)
    assert not waker.wake_after("acme", "proc_a", 0.3)
    assert waker.wake("acme", "proc_a")  # a wake now is not held back by a later one
    assert queued == [(0, ("acme", "proc_a"), 0.3), (0,)]
    wait_for(lambda: not client.exists(keys.wake_later("proc_a")),
             what="the delayed wake to fall due")
    assert waker.wake_after("acme", "proc_a", 0.3)
