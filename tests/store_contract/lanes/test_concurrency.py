"""Lanes under concurrency: writers on separate connections (a backend each, as separate
workers and gateways are) append gap-free, become visible in seq order, drain a message
once, fire a timer once, and never deadlock sending each other messages."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from vancetope_brain.models import (
    ExternalCommand,
    InboxMessage,
    Timer,
    UserChatInput,
    new_id,
    utcnow,
)
from vancetope_brain.store import LaneStore, Port, TimerStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World

T = TypeVar("T")
WRITERS = 8



def _race(storage: Storage, work: Callable[[Any, int], T], n: int = WRITERS,
          port: type[Port] = LaneStore) -> list[T]:
    """``work(store, i)`` for i in 0..n-1, each in a thread of its own on a backend of its
    own (``store``: its ``port``, the lanes by default), released together; their results in
    order (a thread's exception is raised here)."""
    stores = [storage.open_backend().port(port) for _ in range(n)]
    start = threading.Barrier(n)

    def run(i: int) -> T:
        start.wait(timeout=30)
        return work(stores[i], i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n), timeout=60))


def test_concurrent_appends_to_one_process_number_it_gap_free(storage: Storage,
                                                              world: World) -> None:
    process = world.process("ten_1")
    per_writer = 5

    def append(lanes: LaneStore, i: int) -> list[int]:
        return [lanes.append_message(world.message("ten_1", process.id, f"{i}.{n}"))[0].seq
                for n in range(per_writer)]

    seqs = [seq for mine in _race(storage, append) for seq in mine]
    total = WRITERS * per_writer
    assert sorted(seqs) == list(range(1, total + 1))
    lanes = storage.open_backend().port(LaneStore)
    pending = lanes.pending_messages("ten_1", process.id)
    assert [m.seq for m in pending] == list(range(1, total + 1))
    assert lanes.append_message(world.message("ten_1", process.id))[0].seq == total + 1


def test_appends_become_visible_in_seq_order(storage: Storage, world: World) -> None:
    # A reader never sees seq n without every seq before it: what a turn drains is a prefix.
    # MongoDB's documented gap (mongo/lanes.py; docs/architecture.md, "Which store"): an
    # append reserves its seq, then inserts, so "two concurrent appends may become visible
    # out of seq order for a moment" — there a reader may see a hole, which fills.
    process = world.process("ten_1")
    done = threading.Event()
    seen: list[list[int]] = []

    def read() -> None:
        lanes = storage.open_backend().port(LaneStore)
        while not done.is_set():
            seen.append([m.seq for m in lanes.pending_messages("ten_1", process.id)])

    reader = threading.Thread(target=read)
    reader.start()
    try:
        _race(storage, lambda lanes, i: [
            lanes.append_message(world.message("ten_1", process.id, f"{i}.{n}"))
            for n in range(5)])
    finally:
        done.set()
        reader.join(timeout=30)
    assert seen
    total = WRITERS * 5
    final = [m.seq for m in storage.open_backend().port(LaneStore).pending_messages(
        "ten_1", process.id)]
    assert final == list(range(1, total + 1))
    for seqs in seen:
        if storage.name.startswith("mongo"):
            assert seqs == sorted(set(seqs)) and set(seqs) <= set(final)
        else:
            assert seqs == list(range(1, len(seqs) + 1))


def test_concurrent_appends_with_one_idempotency_key_store_one(storage: Storage,
                                                               world: World) -> None:
    process = world.process("ten_1")
    results = _race(storage, lambda lanes, i: lanes.append_message(
        world.message("ten_1", process.id, f"attempt {i}", key="once")))
    winners = [message for message, created in results if created]
    assert len(winners) == 1
    assert {message.id for message, _ in results} == {winners[0].id}
    assert storage.open_backend().port(LaneStore).pending_messages("ten_1", process.id) \
        == winners


def test_concurrent_commits_draining_one_message_apply_once(storage: Storage,
                                                            world: World) -> None:
    # Two workers that both believe they hold the turn (one epoch): the drain decides.
    process = world.process("ten_1")
    message = world.append("ten_1", process.id)
    lanes = storage.open_backend().port(LaneStore)
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    results = _race(storage, lambda store, i: store.commit_turn(
        "ten_1", process.id, epoch,
        world.turn(process, epoch, drained=[message.id],
                   chat=[world.line(process, f"answer {i}")])))
    assert len([r for r in results if r is not None]) == 1
    assert len(lanes.chat_history("ten_1", process.id)) == 1
    assert len(lanes.turn_records("ten_1", process.id)) == 1
    assert lanes.pending_messages("ten_1", process.id) == []


def test_a_timer_fired_by_several_sweepers_at_once_appends_once(storage: Storage,
                                                                world: World) -> None:
    process = world.process("ten_1")
    timer = Timer(id=f"{process.id}:t", tenant_id="ten_1", process_id=process.id, key="t",
                  due_at=utcnow() - timedelta(seconds=1))
    lanes = storage.open_backend().port(LaneStore)
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    assert lanes.commit_turn("ten_1", process.id, epoch,
                             world.turn(process, epoch, timers=[timer])) is not None

    # On SQL stores, no idempotency key: only the timer's removal keeps the delivery single.
    # MongoDB's documented gap (mongo/timers.py): fire_timer appends, then deletes the timer,
    # and only "the repeated key makes that append a no-op" — so there the message carries
    # the key the port requires and the sweeper gives it (``timer:<id>:<due ms>``).
    key = f"timer:{timer.id}:{int(timer.due_at.timestamp() * 1000)}" \
        if storage.name.startswith("mongo") else None

    def fire(store: TimerStore, i: int) -> bool:
        return store.fire_timer(timer, InboxMessage(
            id=new_id("msg"), tenant_id="ten_1", target_process_id=process.id,
            idempotency_key=key, message=ExternalCommand(command="timer", params={"sweeper": i})))

    assert sorted(_race(storage, fire, port=TimerStore)) == [False] * (WRITERS - 1) + [True]
    assert len(lanes.pending_messages("ten_1", process.id)) == 1
    assert storage.open_backend().port(TimerStore).due_timers(utcnow() + timedelta(days=1)) == []


def test_processes_sending_each_other_messages_at_once_all_commit(storage: Storage,
                                                                  world: World) -> None:
    # Each commit locks its own lane and its targets' lanes: in opposite orders, two such
    # transactions would deadlock.
    procs = [world.process("ten_1") for _ in range(4)]
    lanes = storage.open_backend().port(LaneStore)
    epochs = [lanes.acquire_epoch("ten_1", p.id).epoch for p in procs]
    rounds = 5

    def send(store: LaneStore, i: int) -> int:
        me, committed = procs[i], 0
        for n in range(rounds):
            notes = [InboxMessage(id=new_id("msg"), tenant_id="ten_1", target_process_id=p.id,
                                  sender_process_id=me.id,
                                  message=UserChatInput(from_user="process", content=f"{n}"))
                     for p in reversed(procs) if p.id != me.id]
            commit = replace(world.turn(me, epochs[i]), outbox=notes)
            committed += store.commit_turn("ten_1", me.id, epochs[i], commit) is not None
        return committed

    assert _race(storage, send, n=len(procs)) == [rounds] * len(procs)
    for p in procs:
        seqs = [m.seq for m in lanes.pending_messages("ten_1", p.id)]
        assert seqs == list(range(1, rounds * (len(procs) - 1) + 1))
