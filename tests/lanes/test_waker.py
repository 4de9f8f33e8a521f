"""Wake coalescing on the real Redis: a woken process waits in its shard's ready set; while
a shard task is queued (not started), more wakes of the shard enqueue nothing; once the
task starts (or the flag expires), a wake enqueues again. Takes are oldest-first, a task
takes one round (the processes that waited when it began), and a take that leaves
processes waiting with no task queued queues one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.lanes.lease import LeaseKeeper
from vancetope_brain.lanes.sweeper import sweep
from vancetope_brain.lanes.waker import Lingering, Waker, shard_for


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    opened = redis.Redis.from_url(redis_url)
    yield opened
    opened.delete(*(keys.ready(i) for i in range(4)), *(keys.shard_queued(i) for i in range(4)),
                  *(keys.shard_bell(i) for i in range(4)), keys.LINGERING)
    if (held := opened.keys(keys.lease("*")) + opened.keys(keys.recheck("*"))):
        opened.delete(*held)
    opened.close()


class Task:
    """A shard task's takes: the first fixes its round, the others pass it on."""

    def __init__(self, waker: Waker, shard: int) -> None:
        self.waker, self.shard = waker, shard
        self.round_end: bytes | None = None

    def take(self, client: redis.Redis | None = None) -> tuple[str, str] | None:
        """The next ready process of the round, its lease taken under a token of its own
        (and given back at once if ``client`` is given: its turn is over)."""
        ready = self.waker.next_ready(self.shard, self.round_end, token=LeaseKeeper.new_token(),
                                      lease_ttl=10)
        if ready is None:
            return None
        assert not isinstance(ready, Lingering)
        self.round_end = ready.round_end
        if client is not None:
            client.delete(keys.lease(ready.process_id))
        return ready.tenant_id, ready.process_id


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

    _other_shard_waits(client)  # (shard 1 of 4 is ours; ``_other_shard_waits`` flags 1 …)
    client.set(keys.shard_queued(2), 1, px=60_000)  # … so another shard's task: shard 2's
    task = Task(waker, 1)
    assert task.take() == ("acme", a)  # the task starts: flag cleared
    assert queued == [(1,), (1,)]  # b still waits: a second task is queued for it
    assert not waker.wake("acme", a)  # ... which takes a again
    assert task.take() == ("acme", b)
    assert task.take() is None  # a was woken after this task began: the next task's
    assert len(queued) == 2
    assert Task(waker, 1).take() == ("acme", a)


def _on_shard_0(n: int) -> list[str]:
    """``n`` process ids of shard 0 of 2."""
    return [p for p in (f"proc_{i}" for i in range(200)) if shard_for(p, 2) == 0][:n]


def _other_shard_waits(client: redis.Redis) -> None:
    """Shard 1's task is queued (waits for a worker): a round of shard 0 ends its task."""
    client.set(keys.shard_queued(1), 1, px=60_000)


def test_takes_are_oldest_wake_first_and_a_rewake_keeps_its_place(client):
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=2, flag_ttl=60)
    a, b, c = _on_shard_0(3)
    for pid in (a, b, c):
        waker.wake("acme", pid)
    waker.wake("acme", a)  # already waiting: stays first
    _other_shard_waits(client)
    task = Task(waker, 0)
    assert task.take() == ("acme", a)
    waker.wake("globex", a)  # woken while the task runs: behind the others
    assert [task.take() for _ in range(3)] == [("acme", b), ("acme", c), None]
    assert Task(waker, 0).take() == ("globex", a)


def _closed_loop(client: redis.Redis, waker: Waker, tasks: int) -> list[list[str]]:
    """Run ``tasks`` shard tasks of shard 0 over three lanes woken again as soon as their
    turn ends, a fourth woken during the first turn; the lanes each task took, by name."""
    a, b, c, d = _on_shard_0(4)
    names = {a: "a", b: "b", c: "c", d: "d"}
    for pid in (a, b, c):
        waker.wake("acme", pid)
    taken_by_task = []
    for _ in range(tasks):
        task, turns = Task(waker, 0), []
        while len(turns) < 11 and (taken := task.take(client)) is not None:
            turns.append(names[taken[1]])
            if turns == ["a"] and not taken_by_task:
                waker.wake("acme", d)  # a lane woken while the task runs
            waker.wake("acme", taken[1])  # its next message, as its turn ends
        taken_by_task.append(turns)
    return taken_by_task


def test_a_task_takes_one_round_while_another_shard_waits_and_lanes_take_turns_round_robin(
        client):
    """Lanes woken again as soon as their turn ends (a closed loop), one woken late, another
    shard's task waiting for a worker: each task runs one turn of every lane that waited
    when it began and then ends, its successor queued; no lane gets a second turn before
    every other waiting lane had one."""
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=2, flag_ttl=60)
    _other_shard_waits(client)
    assert _closed_loop(client, waker, 3) == [
        ["a", "b", "c"], ["d", "a", "b", "c"], ["d", "a", "b", "c"]]
    assert len(queued) == 4  # the first wake's, then one per task: its successor
    assert client.exists(keys.shard_queued(0))


def test_with_no_other_shard_waiting_a_task_goes_on_with_the_next_round(client):
    """The same closed loop with no other shard's task queued: one task runs round after
    round (up to the caller's cap here, ``LaneRunner.drain``'s in the product), in the same
    round-robin order; its successor is still queued, for the lanes it may leave."""
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=2, flag_ttl=60)
    assert _closed_loop(client, waker, 1) == [
        ["a", "b", "c", "d", "a", "b", "c", "d", "a", "b", "c"]]
    assert queued == [(0,), (0,)] and client.exists(keys.shard_queued(0))
    _other_shard_waits(client)  # now another shard's task waits: the round ends the task
    task = Task(waker, 0)
    assert [task.take(client) is not None for _ in range(5)] == [True] * 4 + [False]


def test_a_round_that_ends_with_no_task_queued_queues_one(client):
    """The queued flag lost (expired, or a failed enqueue took it back) while processes wait:
    the task ending its round queues their task, so they do not wait for the sweeper."""
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=2, flag_ttl=60)
    a, = _on_shard_0(1)
    _other_shard_waits(client)
    waker.wake("acme", a)
    task = Task(waker, 0)
    assert task.take(client) == ("acme", a)
    waker.wake("acme", a)
    client.delete(keys.shard_queued(0))  # the task that wake queued is lost
    queued.clear()
    assert task.take() is None
    assert queued == [(0,)] and client.exists(keys.shard_queued(0))


def test_a_take_takes_the_lane_lease_or_asks_its_holder_for_a_re_check(client):
    waker = Waker(client, lambda *task: None, shards=1, flag_ttl=60)
    waker.wake("acme", "proc_a")
    mine = LeaseKeeper.new_token()
    assert waker.next_ready(0, None, token=mine, lease_ttl=10)[:3] == ("acme", "proc_a", None)
    assert client.get(keys.lease("proc_a")) == mine
    assert 9_000 < client.pttl(keys.lease("proc_a")) <= 10_000
    assert not client.exists(keys.recheck("proc_a"))

    waker.wake("acme", "proc_a")  # a message while the turn runs: taken, the lease is not
    busy = waker.next_ready(0, None, token=LeaseKeeper.new_token(), lease_ttl=10)
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


def _linger(waker: Waker, shard: int) -> None:
    """A task of ``shard`` whose round is over, nothing waiting: it lingers."""
    assert waker.next_ready(shard, None, token=LeaseKeeper.new_token(), lease_ttl=10,
                            linger=0.05) == Lingering(shard)


def test_a_wake_of_a_lingering_shard_rings_its_task_and_queues_none(client):
    """While a task lingers on its shard, a wake of the shard queues no task: it rings the
    bell the task waits on, and the task's next take (a first take) runs the process."""
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=2, flag_ttl=60)
    a, b = _on_shard_0(2)
    _linger(waker, 0)
    assert client.get(keys.shard_queued(0)) == b"linger"
    assert not waker.wake("acme", a) and not waker.wake("acme", b)
    assert queued == []
    assert waker.await_wake(0, 1)  # rung: returns at once
    task = Task(waker, 0)
    assert task.take(client) == ("acme", a)  # the linger's flag is gone: b, left waiting,
    assert queued == [(0,)] and client.get(keys.shard_queued(0)) == b"1"  # has a task
    assert task.take(client) == ("acme", b)


def test_a_wake_that_races_the_end_of_a_linger_is_not_lost(client):
    """The linger runs out (nothing rang) and a wake comes before the task's last take: that
    wake queued nothing, and the take — which always follows a linger — runs it. A wake
    after that take queues a task."""
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=2, flag_ttl=60)
    a, b = _on_shard_0(2)
    _linger(waker, 0)
    assert not waker.await_wake(0, 0.01)  # the linger runs out ...
    assert not waker.wake("acme", a)  # ... a wake between the wait and the take
    assert Task(waker, 0).take(client) == ("acme", a)
    assert queued == []
    assert waker.next_ready(0, None, token=LeaseKeeper.new_token(), lease_ttl=10) is None
    assert waker.wake("acme", b) and queued == [(0,)]


def test_another_shards_queued_task_ends_a_linger_and_none_begins_while_one_waits(client):
    """A linger holds a worker: a task queued for another shard rings the lingering task,
    whose next take, finding its own shard idle, ends it. While another shard's task waits
    for a worker, no task lingers; a lingering shard's flag is no such task."""
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=2, flag_ttl=60)
    other = next(p for p in (f"proc_{i}" for i in range(200)) if shard_for(p, 2) == 1)
    _linger(waker, 0)
    _linger(waker, 1)  # shard 0's linger is no task waiting for a worker
    assert client.smembers(keys.LINGERING) == {b"0", b"1"}
    assert not waker.wake("acme", other)  # shard 1's own linger takes it: nothing queued
    assert not client.exists(keys.shard_bell(0))
    assert waker.next_ready(1, None, token=LeaseKeeper.new_token(),
                            lease_ttl=10)[:2] == ("acme", other)
    client.delete(keys.lease(other))
    assert waker.wake("acme", other) and queued == [(1,)]  # shard 1's task is queued ...
    assert waker.await_wake(0, 1)  # ... and rings shard 0's lingering task
    assert waker.next_ready(0, None, token=LeaseKeeper.new_token(), lease_ttl=10,
                            linger=0.05) is None
    assert not client.exists(keys.shard_queued(0)) and client.smembers(keys.LINGERING) == set()


class _Stale:
    """A store whose stale processes are ``found`` (the sweeper's two reads)."""

    def __init__(self, found: list[tuple[str, str]]) -> None:
        self.found = found

    def stale_pending(self, before: object) -> list[tuple[str, str]]:
        return self.found

    def unsettled(self) -> list[tuple[str, str]]:
        return []


def test_the_sweeper_forces_one_task_per_shard(client):
    """Stale processes whose shard's flag stands for a lost task: the sweep forces one task
    per shard past the flag (it runs the whole ready set), not one per process."""
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=2, flag_ttl=60)
    a, b, c = _on_shard_0(3)
    other = next(p for p in (f"proc_{i}" for i in range(200)) if shard_for(p, 2) == 1)
    client.set(keys.shard_queued(0), 1, px=60_000)
    client.set(keys.shard_queued(1), 1, px=60_000)
    found = [("acme", p) for p in (a, other, b, c)]
    assert sweep(_Stale(found), client, waker, age=0, interval=1.0) == 4  # type: ignore[arg-type]
    assert sorted(queued) == [(0,), (1,)]
    assert client.zcard(keys.ready(0)) == 3 and client.zcard(keys.ready(1)) == 1


def test_a_take_that_queues_a_task_rings_the_lingering_shards(client):
    """A take that leaves processes waiting queues their task: a shard task that lingers
    elsewhere is rung, so its worker is free for it."""
    queued: list[tuple[object, ...]] = []
    waker = Waker(client, lambda *task: queued.append(task), shards=2, flag_ttl=60)
    a, b = _on_shard_0(2)
    _linger(waker, 1)
    assert waker.wake("acme", a) and not waker.wake("acme", b)  # (the first wake rang 1 …
    client.delete(keys.shard_bell(1))  # … which is still lingering, say)
    assert Task(waker, 0).take(client) == ("acme", a)  # b left waiting: a task is queued
    assert queued == [(0,), (0,)]
    assert waker.await_wake(1, 1)
