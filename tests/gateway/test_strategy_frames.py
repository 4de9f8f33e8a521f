"""Strategy management over the protocol: the same cascade and verbs as recipes, a strategy
is validated before it is stored (refusals name the field), another tenant sees none of it.
"""

from __future__ import annotations

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers
from vancetope_brain.identity import Principal
from vancetope_brain.store import IdentityStore

STRATEGY = {"name": "frames-flow", "description": "tenant flow", "phases": [
    {"name": "draft", "recipe": "ford", "goal": "Draft {{ input }}",
     "checkpoint": {"type": "APPROVAL", "title": "Approve?"}},
    {"name": "final", "recipe": "ford", "goal": "Finish {{ phases.draft.output }}"}]}


def _catalogue(client: Client, **data) -> dict[str, dict]:
    return {s["name"]: s for s in client.ok("strategy-list", **data)["strategies"]}


@covers("strategy-list", SUCCESS, REFUSAL)
def test_strategy_list_is_the_effective_catalogue(emb, client):
    catalogue = _catalogue(client)
    assert {"draft-review", "compare-options", "research-brief"} <= set(catalogue)
    assert catalogue["draft-review"]["source"] == "bundled"
    assert client.refused("strategy-list", "not_found", projectId="no-such-project")


@covers("strategy-create", SUCCESS, REFUSAL)
@covers("strategy-update", SUCCESS, REFUSAL)
@covers("strategy-delete", SUCCESS, REFUSAL)
def test_strategy_create_update_delete_through_the_cascade(emb, client):
    stored = client.ok("strategy-create", strategy=STRATEGY)
    assert stored["strategy"]["phases"][0]["checkpoint"]["type"] == "APPROVAL"
    assert "strategy frames-flow already exists" in client.refused(
        "strategy-create", "conflict", strategy=STRATEGY)
    client.ok("strategy-create", projectId="default",
              strategy={**STRATEGY, "description": "project flow"})
    in_project = _catalogue(client, projectId="default")["frames-flow"]
    assert (in_project["source"], in_project["shadows"]) == ("project", ["tenant"])

    client.ok("strategy-update", strategy={**STRATEGY, "description": "v2"})
    assert _catalogue(client)["frames-flow"]["description"] == "v2"
    client.refused("strategy-update", "not_found", strategy={**STRATEGY, "name": "never-made"})
    message = client.refused("strategy-update", "invalid_input", strategy={
        **STRATEGY, "phases": [{**STRATEGY["phases"][0], "onFail": "nowhere"}]})
    assert message.startswith("strategy: phases.0.onFail: no phase named 'nowhere'")
    assert "phases.1.goal: template uses unknown variable(s) goal" in client.refused(
        "strategy-create", "invalid_input", strategy={**STRATEGY, "name": "bad", "phases": [
            STRATEGY["phases"][0], {"name": "x", "recipe": "ford", "goal": "{{ goal }}"}]})

    assert client.ok("strategy-delete", projectId="default", name="frames-flow") == {
        "projectId": "default", "name": "frames-flow"}
    client.refused("strategy-delete", "not_found", projectId="default", name="frames-flow")
    client.ok("strategy-delete", name="frames-flow")
    assert "frames-flow" not in _catalogue(client)


def test_another_tenant_neither_sees_nor_deletes_the_strategies(emb, client):
    brain = emb.brain
    if "initech" not in {t.id for t in brain.store.port(IdentityStore).list_tenants()}:
        brain.identity.create_tenant("initech", "initech")
        brain.identity.create_user("initech", "milton", "milton")
    client.ok("strategy-create", strategy={**STRATEGY, "name": "acme-only"})
    other = Client(emb, Principal("initech", "milton"))
    try:
        assert "acme-only" not in _catalogue(other)
        other.refused("strategy-delete", "not_found", name="acme-only")
    finally:
        other.close()
    client.ok("strategy-delete", name="acme-only")
