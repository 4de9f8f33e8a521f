"""Token usage: added with the turn's commit, summed per key, read per tenant, user and
session over days; a fenced commit adds nothing."""

from __future__ import annotations

from datetime import date

from tests.store_contract.conftest import World
from vancetope_brain.models import ProcessStatus
from vancetope_brain.models.usage import UsageKey, UsageRow
from vancetope_brain.store import LaneStore, UsageStore

D1, D2, D3 = date(2026, 12, 1), date(2026, 12, 2), date(2026, 12, 3)


def _key(tenant: str, model: str = "m1", day: date = D1, *, user: str = "usr_1",
         session: str = "ses_1") -> UsageKey:
    return UsageKey(tenant, user, "default", session, model, day)


def _commit(world: World, lanes: LaneStore, tenant: str, rows: list[UsageRow]) -> None:
    process = world.process(tenant)
    world.set_status(process, ProcessStatus.IDLE, usage=rows)


def test_commits_add_their_rows_to_the_totals_of_each_key(
        world: World, lanes: LaneStore, usage: UsageStore) -> None:
    tenant = world.tenant()
    _commit(world, lanes, tenant, [UsageRow(_key(tenant), 10, 2, 1),
                                   UsageRow(_key(tenant, "m2"), 5, 1, 1, 1)])
    _commit(world, lanes, tenant, [UsageRow(_key(tenant), 7, 3, 2, 1)])
    assert usage.read_usage(tenant, D1, D1) == [UsageRow(_key(tenant), 17, 5, 3, 1),
                                                UsageRow(_key(tenant, "m2"), 5, 1, 1, 1)]


def test_reads_keep_to_the_tenant_days_user_and_session(
        world: World, lanes: LaneStore, usage: UsageStore) -> None:
    tenant, other = world.tenant(), world.tenant()
    rows = [UsageRow(_key(tenant, day=D1), 1, 1, 1),
            UsageRow(_key(tenant, day=D2, session="ses_2"), 2, 2, 1),
            UsageRow(_key(tenant, day=D3, user="usr_2"), 3, 3, 1)]
    _commit(world, lanes, tenant, rows)
    _commit(world, lanes, other, [UsageRow(_key(other), 9, 9, 1)])
    assert usage.read_usage(tenant, D1, D3) == rows
    assert usage.read_usage(tenant, D2, D3) == rows[1:]
    assert usage.read_usage(tenant, D1, D3, user_id="usr_1") == rows[:2]
    assert usage.read_usage(tenant, D1, D3, session_id="ses_2") == [rows[1]]
    assert usage.read_usage(tenant, D1, D3, user_id="usr_2", session_id="ses_2") == []
    assert usage.read_usage(other, D1, D1) == [UsageRow(_key(other), 9, 9, 1)]


def test_a_fenced_commit_adds_nothing(world: World, lanes: LaneStore,
                                      usage: UsageStore) -> None:
    tenant = world.tenant()
    process = world.process(tenant)
    stale = lanes.acquire_epoch(tenant, process.id).epoch
    lanes.acquire_epoch(tenant, process.id)
    assert lanes.commit_turn(tenant, process.id, stale, world.turn(
        process, stale, usage=[UsageRow(_key(tenant), 10, 2, 1)])) is None
    assert usage.read_usage(tenant, D1, D1) == []


def test_an_ordinary_turn_and_one_that_spawns_both_add_theirs(
        world: World, lanes: LaneStore, usage: UsageStore) -> None:
    """(PostgreSQL commits the two through different paths.)"""
    tenant = world.tenant()
    parent = world.process(tenant)
    epoch = lanes.acquire_epoch(tenant, parent.id).epoch
    child = parent.model_copy(update={"id": "proc_child", "parent_process_id": parent.id})
    assert lanes.commit_turn(tenant, parent.id, epoch, world.turn(
        parent, epoch, spawned=[child], usage=[UsageRow(_key(tenant), 4, 1, 1)])) is not None
    _commit(world, lanes, tenant, [UsageRow(_key(tenant), 6, 2, 1)])
    assert usage.read_usage(tenant, D1, D1) == [UsageRow(_key(tenant), 10, 3, 2)]
