"""Workflow templates as a definition kind (issue 10, think-engines §9): managed over the
protocol (``template-list/-create/-update/-delete``) and with ``vancetope admin template``,
validated on save (refusals name the field), and resolved by marvin through the cascade
project → tenant → bundled: a ``process-create {template}`` runs the innermost one's tree.
"""

from __future__ import annotations

import json

import pytest

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers, wait_process
from vancetope_brain.engines.marvin import TaskTree
from vancetope_brain.llm import LlmResponse, ToolCall
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import CloseReason, ProcessStatus
from vancetope_gateway.cli import main

TEMPLATE = {"name": "research-brief", "description": "the tenant's brief", "steps": [
    {"kind": "WORKER", "goal": "Tenant step one on {{ goal }}"},
    {"kind": "WORKER", "goal": "Tenant step two ({{ params.depth }})"}],
    "aggregate": "Tenant synthesis of {{ goal }}"}


def _catalogue(client: Client, **data) -> dict[str, dict]:
    return {t["name"]: t for t in client.ok("template-list", **data)["templates"]}


def _call(tool: str, **args) -> LlmResponse:
    return LlmResponse("", (ToolCall(f"c_{tool}", tool, json.dumps(args)),))


def _marvin_model(messages, tools):
    """Workers report their step; the aggregate says which steps it saw. A PLAN call would
    mean the tree did not come from the template, so there is none."""
    names = {t.name for t in tools}
    assert "marvin_plan" not in names, "the template's tree needs no planning"
    if "marvin_aggregate" in names:
        return _call("marvin_aggregate", summary="synthesized", result={})
    return _call("respond", message=json.dumps({"summary": "reported"}),
                 awaiting_user_input=False)


def _run_marvin(emb, client: Client, **data) -> TaskTree:
    """``process-create`` (default engine: marvin) in a fresh session; the finished tree."""
    created = client.ok("session-create", title="templates", onDisconnect="KEEP_OPEN")
    wait_process(emb, emb.who, created["chatProcessId"], ProcessStatus.IDLE)
    emb.model = FunctionModel(_marvin_model)
    pid = client.ok("process-create", goal="solar panels", **data)["process"]["id"]
    process = wait_process(emb, emb.who, pid, ProcessStatus.CLOSED, timeout=30)
    assert process.close_reason is CloseReason.DONE, process.engine_state
    return TaskTree.model_validate(process.engine_state["tree"])


def _goals(tree: TaskTree) -> list[str]:
    return [n.goal for n in tree.nodes.values()][1:]


@covers("template-list", SUCCESS, REFUSAL)
def test_template_list_is_the_effective_catalogue(emb, client):
    catalogue = _catalogue(client)
    assert {"compare-options", "research-brief"} <= set(catalogue)
    assert catalogue["research-brief"]["source"] == "bundled"
    assert catalogue["compare-options"]["steps"][2]["kind"] == "USER_INPUT"
    assert client.refused("template-list", "not_found", projectId="no-such-project")


@covers("template-create", SUCCESS, REFUSAL)
@covers("template-update", SUCCESS, REFUSAL)
@covers("template-delete", SUCCESS, REFUSAL)
def test_a_tenant_template_shadows_the_bundled_one_and_a_project_one_beats_it(emb, client):
    stored = client.ok("template-create", template=TEMPLATE)["template"]
    assert stored["steps"][1]["goal"] == "Tenant step two ({{ params.depth }})"
    try:
        assert "template research-brief already exists" in client.refused(
            "template-create", "conflict", template=TEMPLATE)
        entry = _catalogue(client)["research-brief"]
        assert (entry["source"], entry["shadows"]) == ("tenant", ["bundled"])
        tree = _run_marvin(emb, client, template="research-brief", params={"depth": "deep"})
        assert tree.template == "research-brief"
        assert _goals(tree) == ["Tenant step one on solar panels", "Tenant step two (deep)",
                                "Tenant synthesis of solar panels"]

        client.ok("template-create", projectId="default", template={
            **TEMPLATE, "steps": [{"goal": "Project step on {{ goal }}"}]})
        entry = _catalogue(client, projectId="default")["research-brief"]
        assert (entry["source"], entry["shadows"]) == ("project", ["tenant", "bundled"])
        tree = _run_marvin(emb, client, template="research-brief", params={"depth": "deep"})
        assert _goals(tree) == ["Project step on solar panels", "Tenant synthesis of solar panels"]
        assert client.ok("template-delete", projectId="default", name="research-brief") == {
            "projectId": "default", "name": "research-brief"}
        client.refused("template-delete", "not_found", projectId="default",
                       name="research-brief")

        client.ok("template-update", template={**TEMPLATE, "description": "v2"})
        assert _catalogue(client)["research-brief"]["description"] == "v2"
        client.refused("template-update", "not_found", template={**TEMPLATE, "name": "never"})
    finally:
        client.ok("template-delete", name="research-brief")
    assert _catalogue(client)["research-brief"]["source"] == "bundled"


@pytest.mark.parametrize(("change", "error"), [
    ({"steps": [{"goal": "{{ user.name }}"}]},
     "template: steps.0.goal: template uses unknown variable(s) user"),
    ({"steps": [{"goal": "{% if goal %}open"}]}, "template: steps.0.goal: template line 1"),
    ({"aggregate": "{{ phases.x }}"}, "template: aggregate: template uses unknown variable(s)"),
    ({"steps": [{"kind": "AGGREGATE", "goal": "g"}]}, "template: steps.0.kind: "),
    ({"steps": []}, "template: steps: List should have at least 1 item"),
    ({"stpes": []}, "template: stpes: unknown field"),
])
def test_an_invalid_template_is_refused_on_save_naming_the_field(emb, client, change, error):
    message = client.refused("template-create", "invalid_input",
                             template={**TEMPLATE, "name": "broken", **change})
    assert message.startswith(error), message
    assert "broken" not in _catalogue(client)


def test_the_admin_cli_puts_a_tenant_template_that_marvin_runs(emb, client, tmp_path,
                                                                 monkeypatch, capsys):
    config = emb.brain.config
    monkeypatch.setenv("VANCETOPE_DATA_DIR", str(config.data_dir))
    monkeypatch.setenv("VANCETOPE_STORE_URL", config.store_url)

    def admin(*argv: str) -> tuple[int, str, str]:
        code = main(["admin", "template", *argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: compare-options\nsteps:\n  - {goal: '{{ tenant.id }}'}\n"
                   "aggregate: x\n")
    code, _, err = admin("put", "--tenant", "acme", str(bad))
    assert code == 2
    assert f"{bad}: steps.0.goal: template uses unknown variable(s) tenant" in err
    good = tmp_path / "compare-options.yaml"
    good.write_text("name: compare-options\nsteps:\n  - {goal: 'CLI step on {{ goal }}'}\n"
                    "aggregate: 'CLI synthesis'\n")
    try:
        assert admin("put", "--tenant", "acme", str(good))[:2] == (0, "compare-options\n")
        code, out, _ = admin("list", "--tenant", "acme")
        assert {r.split()[0]: r.split()[1] for r in out.splitlines()[1:]}[
            "compare-options"] == "tenant"
        code, out, err = admin("show", "--tenant", "acme", "compare-options")
        assert out.startswith("name: compare-options\n") and "overrides bundled" in err
        tree = _run_marvin(emb, client, template="compare-options")
        assert _goals(tree) == ["CLI step on solar panels", "CLI synthesis"]
    finally:
        assert admin("delete", "--tenant", "acme", "compare-options")[0] == 0
    assert _catalogue(client)["compare-options"]["source"] == "bundled"
