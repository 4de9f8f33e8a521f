"""Metrics counted in the turn's own calls (issue 15): LLM latency by model, tool calls by
tool and result — client-side tools under one label; and the tokens of committed turns by
tenant and model (issue 32)."""

from __future__ import annotations

from datetime import date

import pytest

from vancetope_brain.llm import LlmResponse, ToolSpec
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.models.usage import UsageKey, UsageRow
from vancetope_brain.observability import metrics
from vancetope_brain.tools import ToolDispatcher
from vancetope_brain.tools.dispatcher import Safety, ToolManifest, ToolOutcome


def _count(name: str, **labels: str) -> float:
    return metrics.registry().get_sample_value(name, labels) or 0.0


def test_an_llm_request_counts_its_time_and_result() -> None:
    before = _count("vancetope_llm_request_duration_seconds_count", model="m1", result="success")
    with metrics.llm_request("m1") as finished:
        finished(LlmResponse("hi", usage={"prompt_tokens": 7, "completion_tokens": 3}))
    with pytest.raises(ZeroDivisionError), metrics.llm_request("m1"):
        raise ZeroDivisionError
    assert _count("vancetope_llm_request_duration_seconds_count", model="m1",
                  result="success") == before + 1
    assert _count("vancetope_llm_request_duration_seconds_count", model="m1",
                  result="error") >= 1


def test_committed_tokens_count_by_tenant_model_and_direction_with_tenants_capped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_tenants", set())
    monkeypatch.setattr(metrics, "MAX_TENANT_LABELS", 1)
    day = date(2026, 12, 4)

    def rows(tenant: str) -> list[UsageRow]:
        return [UsageRow(UsageKey(tenant, "u", "p", "s", "m1", day), 7, 3, 1)]

    before = {(tenant, direction): _count("vancetope_llm_tokens_total", tenant=tenant,
                                          model="m1", direction=direction)
              for tenant in ("cap-t1", "other") for direction in ("in", "out")}
    metrics.tokens_committed("cap-t1", rows("cap-t1"))
    metrics.tokens_committed("cap-t2", rows("cap-t2"))
    for tenant in ("cap-t1", "other"):
        assert _count("vancetope_llm_tokens_total", tenant=tenant, model="m1",
                      direction="in") == before[tenant, "in"] + 7
        assert _count("vancetope_llm_tokens_total", tenant=tenant, model="m1",
                      direction="out") == before[tenant, "out"] + 3
    assert _count("vancetope_llm_tokens_total", tenant="cap-t2", model="m1",
                  direction="in") == 0


class _Source:
    def __init__(self, transport: str, fails: bool = False) -> None:
        self.transport, self.fails = transport, fails

    def manifests(self) -> list[ToolManifest]:
        return [ToolManifest(ToolSpec(f"{self.transport}_tool", "", {"type": "object"}),
                             self.transport, Safety.SAFE_PROBE)]

    def call(self, name: str, params: dict) -> ToolOutcome:
        if self.fails:
            raise RuntimeError("down")
        return ToolOutcome(ToolCallStatus.SUCCESS, {"ok": True})


def test_tool_calls_count_by_tool_and_result_and_client_tools_as_one() -> None:
    server = _count("vancetope_tool_calls_total", tool="mcp_tool", result="error")
    client = _count("vancetope_tool_calls_total", tool="client", result="success")
    ToolDispatcher(frozenset({"*"}), sources=[_Source("mcp", fails=True)]).invoke("mcp_tool", {})
    ToolDispatcher(frozenset({"*"}), sources=[_Source("client")]).invoke("client_tool", {})
    assert _count("vancetope_tool_calls_total", tool="mcp_tool", result="error") == server + 1
    assert _count("vancetope_tool_calls_total", tool="client", result="success") == client + 1
    assert _count("vancetope_tool_calls_total", tool="client_tool", result="success") == 0


def test_model_labels_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_models", set())
    monkeypatch.setattr(metrics, "MAX_MODEL_LABELS", 2)
    for name in ("a", "b", "c", "a"):
        with metrics.llm_request(f"cap-{name}") as finished:
            finished(LlmResponse("x"))
    assert _count("vancetope_llm_request_duration_seconds_count", model="cap-a",
                  result="success") == 2
    assert _count("vancetope_llm_request_duration_seconds_count", model="cap-c",
                  result="success") == 0
    assert _count("vancetope_llm_request_duration_seconds_count", model="other",
                  result="success") >= 1
