"""The engines' views (``engineView``): what the web client draws of marvin's tree, vogon's
phases and zaphod's council, built from the typed state (the v1 record fixtures) and sent
with every process a client reads, in the shape of ``docs/schemas/view.<engine>.json``."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.engines.test_zaphod import Council, _done
from tests.gateway.wire import Client
from vancetope_brain.engines import ENGINES, shown_process
from vancetope_brain.engines.vogon_state import VogonState, VogonView
from vancetope_brain.engines.zaphod_state import ZaphodState, ZaphodView
from vancetope_brain.models import ThinkProcess

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "tests" / "fixtures" / "records"
SCHEMAS = ROOT / "docs" / "schemas"


def _state(name: str) -> dict:
    loaded: dict = json.loads((RECORDS / name).read_text())
    return loaded


def _process(engine: str, state: dict) -> ThinkProcess:
    return ThinkProcess.load(_state("think_process.v1.json")).model_copy(
        update={"engine": engine, "engine_state": state})


def test_vogon_waiting_at_its_checkpoint():
    view = VogonView.of(VogonState.load(_state("vogon_state.waiting.v1.json")).strategy_state)
    assert view is not None
    assert [(p.name, p.checkpoint) for p in view.phases] == [
        ("weigh", None), ("draft", "APPROVAL"), ("finish", None)]
    assert (view.index, view.iteration, view.step, view.current, view.outcome) == (
        1, 1, "ask", "draft", None)
    assert view.waiting is not None and view.waiting.title == "Approve the draft for the launch?"
    assert [(h.phase, h.gate) for h in view.history] == [("weigh", "passed")]


def test_vogon_done_and_a_strategy_that_could_not_load():
    view = VogonView.of(VogonState.load(_state("vogon_state.v1.json")).strategy_state)
    assert view is not None
    assert (view.step, view.current, view.outcome, view.waiting) == (
        "end", "finish", "completed", None)
    failed = VogonState.load(_state("vogon_state.failed.v1.json")).strategy_state
    assert failed is not None and VogonView.of(failed) is None


def test_zaphod_council_and_synthesis():
    view = ZaphodView.of(ZaphodState.load(_state("zaphod_state.v1.json")))
    assert view is not None and view.synthesis is not None
    council = view.council
    assert (council.pattern, council.round, council.rounds, council.phase) == (
        "debate", 2, 2, "done")
    assert [(h.name, h.round, h.status) for h in council.heads][3:] == [
        ("optimist", 2, "done"), ("skeptic", 2, "failed"), ("pragmatist", 2, "done")]
    assert council.missing_heads == view.synthesis.missing_heads == ["skeptic"]
    assert ZaphodView.of(ZaphodState.load(_state("zaphod_state.failed.v1.json"))) is None


@pytest.mark.parametrize(("engine", "state"), [
    ("marvin", {"tree": _state("task_tree.v1.json")}),
    ("vogon", _state("vogon_state.waiting.v1.json")),
    ("vogon", _state("vogon_state.v1.json")),
    ("zaphod", _state("zaphod_state.v1.json")),
])
def test_a_shown_process_carries_its_view_in_the_published_shape(engine, state):
    shown = shown_process(_process(engine, state))
    assert shown["engineState"] == state  # still sent; clients read the view
    view = shown["engineView"]
    assert view["engine"] == engine
    schema = json.loads((SCHEMAS / f"view.{engine}.json").read_text())
    jsonschema.validate(view, schema)
    assert schema["title"] == type(ENGINES.get(engine)).view_model.__name__


@pytest.mark.parametrize(("engine", "state"), [
    ("ford", {"lastReply": "hi"}),  # an engine without a view
    ("vogon", {}), ("zaphod", {}), ("marvin", {}),  # nothing to draw yet (INIT)
    ("vogon", _state("vogon_state.failed.v1.json")),
    ("zaphod", {"phase": "heads", "runs": [{"round": "one"}]}),  # unreadable: not a failure
    ("zaphod", {"schemaVersion": 2, "phase": "heads"}),  # from a newer server
])
def test_a_process_without_a_view_shows_null(engine, state):
    assert shown_process(_process(engine, state))["engineView"] is None


def test_process_status_and_list_send_the_view(embedded):
    council = Council(embedded, {"P-skeptic": RuntimeError("the skeptic's model is down")})
    process = _done(embedded, council.convene())
    client = Client(embedded, embedded.who)
    try:
        shown = client.ok("process-status", processId=process.id)["process"]
        client.ok("session-resume", sessionId=process.session_id)
        listed = client.ok("process-list", all=True)["processes"]
    finally:
        client.close()
    view = shown["engineView"]
    assert (view["engine"], view["council"]["phase"], view["council"]["missingHeads"]) == (
        "zaphod", "done", ["skeptic"])
    assert view["synthesis"]["conclusion"] == "Move, carefully."
    assert next(p for p in listed if p["id"] == process.id)["engineView"] == view
    heads = [p for p in listed if p["parentProcessId"] == process.id]
    assert heads and all(p["engineView"] is None for p in heads)  # ford: no view
