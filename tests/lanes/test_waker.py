"""Wake coalescing on the real Redis: while a lane-turn task is queued, more wakes enqueue
nothing; once the task clears the flag (or the flag expires), a wake enqueues again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.lanes.waker import Waker, shard_for


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    opened = redis.Redis.from_url(redis_url)
    yield opened
    opened.close()


def test_wakes_of_a_queued_process_coalesce_until_the_flag_clears(client):
    queued: list[tuple[str, str, int]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=4, flag_ttl=60)
    assert [waker.wake("acme", "proc_a") for _ in range(5)] == [True] + [False] * 4
    assert waker.wake("acme", "proc_b")  # another process has its own flag
    assert queued == [("acme", "proc_a", shard_for("proc_a", 4)),
                      ("acme", "proc_b", shard_for("proc_b", 4))]
    assert 0 < client.pttl(keys.wake("proc_a")) <= 60_000

    waker.clear("proc_a")  # what the lane-turn task does first
    assert waker.wake("acme", "proc_a") and not waker.wake("acme", "proc_a")
    assert [task[1] for task in queued] == ["proc_a", "proc_b", "proc_a"]


def test_an_expired_flag_no_longer_holds_wakes_back(client):
    queued: list[tuple[str, str, int]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=1, flag_ttl=0.2)
    assert waker.wake("acme", "proc_a") and not waker.wake("acme", "proc_a")
    wait_for(lambda: not client.exists(keys.wake("proc_a")), what="the wake flag to expire")
    assert waker.wake("acme", "proc_a")
    assert len(queued) == 2


def test_a_failed_enqueue_leaves_no_flag_behind(client):
    def broken(*task: object) -> None:
        raise ConnectionError("broker down")

    with pytest.raises(ConnectionError):
        Waker(client, broken, shards=1, flag_ttl=60).wake("acme", "proc_a")
    assert not client.exists(keys.wake("proc_a"))


def test_a_forced_wake_enqueues_past_a_queued_flag(client):
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=1, flag_ttl=60)
    assert waker.wake("acme", "proc_a") and not waker.wake("acme", "proc_a")
    assert waker.wake("acme", "proc_a", force=True)  # the sweeper's: that task may be lost
    assert len(queued) == 2 and client.exists(keys.wake("proc_a"))


def test_a_delayed_wake_carries_its_delay_and_coalesces_until_it_is_due(client):
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=1, flag_ttl=60)
    assert waker.wake_after("acme", "proc_a", 0.3)
    assert not waker.wake_after("acme", "proc_a", 0.3)
    assert waker.wake("acme", "proc_a")  # a wake now is not held back by a later one
    assert queued == [("acme", "proc_a", 0, 0.3), ("acme", "proc_a", 0)]
    wait_for(lambda: not client.exists(keys.wake_later("proc_a")),
             what="the delayed wake to fall due")
    assert waker.wake_after("acme", "proc_a", 0.3)
