"""Tool health: one record per (tenant, project, server, tool), replaced whole by a
compare-and-set on its revision, listed in key order, reset by scope, due probes found across
tenants; another tenant sees nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from vancetope_brain.models import utcnow
from vancetope_brain.models.tool_health import (
    HealthCause,
    HealthSource,
    HealthState,
    ToolHealth,
)
from vancetope_brain.store import ToolHealthStore


def _record(tenant: str = "ten_1", server: str = "echo", tool: str | None = None,
            **fields: Any) -> ToolHealth:
    return ToolHealth(**{"tenant_id": tenant, "server": server, "tool": tool,
                         "state": HealthState.DOWN, "cause": HealthCause.UNREACHABLE,
                         "reason": "connect: refused", "failures": 1,
                         "next_probe_at": utcnow() + timedelta(seconds=30), **fields})


def _put(store: ToolHealthStore, record: ToolHealth) -> ToolHealth:
    """Store a new record; the stored one (revision 1)."""
    stored = store.put_tool_health(record, expected_revision=None)
    assert stored is not None
    return stored


def test_a_put_record_reads_back_whole_and_a_second_put_replaces_it(
        tool_health: ToolHealthStore) -> None:
    down = _record()
    stored = tool_health.put_tool_health(down, expected_revision=None)
    assert stored == down.model_copy(update={"revision": 1})
    assert tool_health.get_tool_health("ten_1", "default", "echo") == stored
    assert tool_health.get_tool_health("ten_1", "default", "echo", "echo__echo") is None
    up = down.model_copy(update={"state": HealthState.UP, "cause": None, "failures": 0,
                                 "next_probe_at": None, "source": HealthSource.AGRAJAG})
    again = tool_health.put_tool_health(up, expected_revision=1)
    assert again == up.model_copy(update={"revision": 2})
    assert tool_health.get_tool_health("ten_1", "default", "echo") == again
    assert tool_health.list_tool_health("ten_1") == [again]


def test_of_two_writers_that_read_the_same_record_one_wins(
        tool_health: ToolHealthStore) -> None:
    down = _put(tool_health, _record())
    up = down.model_copy(update={"state": HealthState.UP, "cause": None})
    assert tool_health.put_tool_health(up, expected_revision=down.revision) is not None
    assert tool_health.put_tool_health(up, expected_revision=down.revision) is None
    assert tool_health.put_tool_health(_record(), expected_revision=None) is None  # exists
    stored = tool_health.get_tool_health("ten_1", "default", "echo")
    assert stored is not None and (stored.state, stored.revision) == (HealthState.UP, 2)
    tool_health.reset_tool_health("ten_1")
    assert tool_health.put_tool_health(up, expected_revision=2) is None  # gone meanwhile


def test_a_record_stored_before_revisions_reads_as_revision_0(
        tool_health: ToolHealthStore, storage: Any) -> None:
    _put(tool_health, _record())
    storage.drop_raw("tool_health", "echo", "revision")
    old = tool_health.get_tool_health("ten_1", "default", "echo")
    assert old is not None and old.revision == 0
    up = old.model_copy(update={"state": HealthState.UP, "cause": None})
    assert tool_health.put_tool_health(up, expected_revision=0) is not None


def test_records_of_a_server_and_its_tools_are_apart_and_listed_in_key_order(
        tool_health: ToolHealthStore) -> None:
    tool = _record(tool="echo__add", state=HealthState.DEGRADED, cause=HealthCause.SERVER_ERROR)
    server = _record()
    other = _record(server="alpha")
    elsewhere = _record(project_id="p2")
    tool, server, other, elsewhere = (_put(tool_health, r)
                                      for r in (tool, server, other, elsewhere))
    assert tool_health.get_tool_health("ten_1", "default", "echo", "echo__add") == tool
    assert tool_health.list_tool_health("ten_1") == [other, server, tool, elsewhere]
    assert tool_health.list_tool_health("ten_1", "default") == [other, server, tool]
    assert tool_health.list_tool_health("ten_1", "p2") == [elsewhere]


def test_another_tenant_sees_and_resets_nothing(tool_health: ToolHealthStore) -> None:
    mine = _put(tool_health, _record())
    assert tool_health.get_tool_health("ten_2", "default", "echo") is None
    assert tool_health.list_tool_health("ten_2") == []
    assert tool_health.reset_tool_health("ten_2") == 0
    assert tool_health.list_tool_health("ten_1") == [mine]


def test_reset_deletes_one_tool_one_server_one_project_or_everything(
        tool_health: ToolHealthStore) -> None:
    records = [_record(), _record(tool="echo__add"), _record(tool="echo__echo"),
               _record(server="alpha"), _record(project_id="p2"), _record(project_id="p3")]
    for record in records:
        _put(tool_health, record)
    assert tool_health.reset_tool_health("ten_1", "default", "echo", "echo__add") == 1
    assert tool_health.reset_tool_health("ten_1", "default", "echo") == 2  # the server and its tool
    assert [r.server for r in tool_health.list_tool_health("ten_1", "default")] == ["alpha"]
    assert tool_health.reset_tool_health("ten_1", "p2") == 1
    assert tool_health.reset_tool_health("ten_1") == 2
    assert tool_health.list_tool_health("ten_1") == []
    with pytest.raises(ValueError, match="needs its server"):
        tool_health.reset_tool_health("ten_1", tool="echo__add")


def test_due_records_are_found_across_tenants_soonest_first_and_never_up_ones(
        tool_health: ToolHealthStore) -> None:
    now = utcnow()
    late = _record(tenant="ten_a", next_probe_at=now - timedelta(seconds=5))
    early = _record(tenant="ten_b", server="alpha", next_probe_at=now - timedelta(seconds=60))
    exact = _record(tenant="ten_c", next_probe_at=now)
    future = _record(tenant="ten_d", next_probe_at=now + timedelta(seconds=60))
    never = _record(tenant="ten_e", next_probe_at=None)
    up = _record(tenant="ten_f", state=HealthState.UP, cause=None,
                 next_probe_at=now - timedelta(seconds=60))
    late, early, exact, future, never, up = (_put(tool_health, r)
                                             for r in (late, early, exact, future, never, up))
    assert tool_health.due_tool_health(now) == [early, late, exact]
    assert tool_health.due_tool_health(now, limit=1) == [early]
    assert tool_health.due_tool_health(now, limit=0) == []
    tool_health.put_tool_health(early.model_copy(update={"state": HealthState.UP, "cause": None}),
                                expected_revision=early.revision)
    assert tool_health.due_tool_health(now) == [late, exact]


def test_a_record_survives_reopening(tool_health: ToolHealthStore, storage: Any) -> None:
    record = _put(tool_health, _record(reason="list: TimeoutError after 2 s",
                                       cause=HealthCause.TIMEOUT))
    again = storage.open_backend().port(ToolHealthStore)
    assert again.get_tool_health("ten_1", "default", "echo") == record
