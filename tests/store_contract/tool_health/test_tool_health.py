"""Tool health: one record per (tenant, project, server, tool), replaced whole, listed in
key order, reset by scope, due probes found across tenants; another tenant sees nothing."""

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


def test_a_put_record_reads_back_whole_and_a_second_put_replaces_it(
        tool_health: ToolHealthStore) -> None:
    down = _record()
    tool_health.put_tool_health(down)
    assert tool_health.get_tool_health("ten_1", "default", "echo") == down
    assert tool_health.get_tool_health("ten_1", "default", "echo", "echo__echo") is None
    up = down.model_copy(update={"state": HealthState.UP, "cause": None, "failures": 0,
                                 "next_probe_at": None, "source": HealthSource.AGRAJAG})
    tool_health.put_tool_health(up)
    assert tool_health.get_tool_health("ten_1", "default", "echo") == up
    assert tool_health.list_tool_health("ten_1") == [up]


def test_records_of_a_server_and_its_tools_are_apart_and_listed_in_key_order(
        tool_health: ToolHealthStore) -> None:
    tool = _record(tool="echo__add", state=HealthState.DEGRADED, cause=HealthCause.SERVER_ERROR)
    server = _record()
    other = _record(server="alpha")
    elsewhere = _record(project_id="p2")
    for record in (tool, server, other, elsewhere):
        tool_health.put_tool_health(record)
    assert tool_health.get_tool_health("ten_1", "default", "echo", "echo__add") == tool
    assert tool_health.list_tool_health("ten_1") == [other, server, tool, elsewhere]
    assert tool_health.list_tool_health("ten_1", "default") == [other, server, tool]
    assert tool_health.list_tool_health("ten_1", "p2") == [elsewhere]


def test_another_tenant_sees_and_resets_nothing(tool_health: ToolHealthStore) -> None:
    mine = _record()
    tool_health.put_tool_health(mine)
    assert tool_health.get_tool_health("ten_2", "default", "echo") is None
    assert tool_health.list_tool_health("ten_2") == []
    assert tool_health.reset_tool_health("ten_2") == 0
    assert tool_health.list_tool_health("ten_1") == [mine]


def test_reset_deletes_one_tool_one_server_one_project_or_everything(
        tool_health: ToolHealthStore) -> None:
    records = [_record(), _record(tool="echo__add"), _record(tool="echo__echo"),
               _record(server="alpha"), _record(project_id="p2"), _record(project_id="p3")]
    for record in records:
        tool_health.put_tool_health(record)
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
    for record in (late, early, exact, future, never, up):
        tool_health.put_tool_health(record)
    assert tool_health.due_tool_health(now) == [early, late, exact]
    assert tool_health.due_tool_health(now, limit=1) == [early]
    assert tool_health.due_tool_health(now, limit=0) == []
    tool_health.put_tool_health(early.model_copy(update={"state": HealthState.UP, "cause": None}))
    assert tool_health.due_tool_health(now) == [late, exact]


def test_a_record_survives_reopening(tool_health: ToolHealthStore, storage: Any) -> None:
    record = _record(reason="list: TimeoutError after 2 s", cause=HealthCause.TIMEOUT)
    tool_health.put_tool_health(record)
    again = storage.open_backend().port(ToolHealthStore)
    assert again.get_tool_health("ten_1", "default", "echo") == record
