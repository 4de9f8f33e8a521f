"""Recipe management over the protocol (issue 4, scope 1): list the cascade, create, update
and delete tenant and project recipes; refusals with stable codes; another tenant sees none
of it.
"""

from __future__ import annotations

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers
from vancetope_brain.identity import Principal
from vancetope_brain.store import IdentityStore

RECIPE = {"name": "frames-analyst", "engine": "ford", "category": "worker",
          "description": "tenant analyst", "promptOverride": "You analyse {{ process.goal }}."}


def _catalogue(client: Client, **data) -> dict[str, dict]:
    return {r["name"]: r for r in client.ok("recipe-list", **data)["recipes"]}


@covers("recipe-list", SUCCESS, REFUSAL)
def test_recipe_list_is_the_effective_catalogue(emb, client):
    catalogue = _catalogue(client)
    assert {"arthur", "ford", "analyze", "summarize"} <= set(catalogue)
    assert catalogue["arthur"]["source"] == "bundled"
    assert catalogue["arthur"]["engine"] == "arthur"
    assert client.refused("recipe-list", "not_found", projectId="no-such-project")


@covers("recipe-create", SUCCESS, REFUSAL)
@covers("recipe-update", SUCCESS, REFUSAL)
@covers("recipe-delete", SUCCESS, REFUSAL)
def test_recipe_create_update_delete_through_the_cascade(emb, client):
    stored = client.ok("recipe-create", recipe=RECIPE)
    assert stored["recipe"]["name"] == "frames-analyst" and stored["projectId"] is None
    assert "exists" in client.refused("recipe-create", "conflict", recipe=RECIPE)

    client.ok("recipe-create", projectId="default",
              recipe={**RECIPE, "description": "project analyst"})
    in_project = _catalogue(client, projectId="default")["frames-analyst"]
    assert (in_project["source"], in_project["description"]) == ("project", "project analyst")
    assert in_project["shadows"] == ["tenant"]
    assert _catalogue(client)["frames-analyst"]["description"] == "tenant analyst"

    client.ok("recipe-update", recipe={**RECIPE, "description": "tenant analyst v2"})
    assert _catalogue(client)["frames-analyst"]["description"] == "tenant analyst v2"
    client.refused("recipe-update", "not_found", recipe={**RECIPE, "name": "never-made"})
    message = client.refused("recipe-update", "invalid_input",
                             recipe={**RECIPE, "allowedToolsAdd": "not-a-list"})
    assert "allowedToolsAdd" in message
    assert "engine" in client.refused("recipe-create", "invalid_input",
                                      recipe={"name": "no-engine", "description": "x"})
    assert "unknown variable(s) goal" in client.refused(
        "recipe-create", "invalid_input",
        recipe={**RECIPE, "name": "bad-template", "promptOverride": "{{ goal }}"})

    deleted = client.ok("recipe-delete", projectId="default", name="frames-analyst")
    assert deleted == {"projectId": "default", "name": "frames-analyst"}
    assert _catalogue(client, projectId="default")["frames-analyst"]["source"] == "tenant"
    client.refused("recipe-delete", "not_found", projectId="default", name="frames-analyst")
    client.ok("recipe-delete", name="frames-analyst")
    assert "frames-analyst" not in _catalogue(client)


def test_another_tenant_neither_sees_nor_deletes_the_recipes(emb, client):
    brain = emb.brain
    if "initech" not in {t.id for t in brain.store.port(IdentityStore).list_tenants()}:
        brain.identity.create_tenant("initech", "initech")
        brain.identity.create_user("initech", "milton", "milton")
    client.ok("recipe-create", recipe={**RECIPE, "name": "acme-only"})
    other = Client(emb, Principal("initech", "milton"))
    try:
        assert "acme-only" not in _catalogue(other)
        other.refused("recipe-delete", "not_found", name="acme-only")
        other.refused("recipe-list", "not_found", projectId="nope")
    finally:
        other.close()
    assert "acme-only" in _catalogue(client)
    client.ok("recipe-delete", name="acme-only")


def test_a_users_recipe_may_not_grant_itself_engine_roles(emb, client):
    """Engine roles unlock tools (agrajag's tool_health_write writes verdicts that hide an MCP
    server from the whole project): only the operator grants them (the admin CLI), so a
    recipe written over the protocol that names one is refused, and nothing is stored."""
    forged = {**RECIPE, "name": "health-writer", "roles": ["tool-health-writer"],
              "allowedToolsAdd": ["tool_health_write"]}
    message = client.refused("recipe-create", "operator_only", recipe=forged)
    assert message.startswith("recipe health-writer: roles: tool-health-writer: engine roles "
                              "unlock tools that other recipes do not see, so only the operator "
                              "grants them")
    assert "health-writer" not in _catalogue(client)
    client.refused("recipe-create", "operator_only", projectId="default",
                   recipe={**forged, "roles": ["any-role"]})
    client.ok("recipe-create", recipe={**RECIPE, "name": "plain-writer"})
    client.refused("recipe-update", "operator_only", recipe={**forged, "name": "plain-writer"})
    assert _catalogue(client)["plain-writer"]["roles"] == []
    client.ok("recipe-delete", name="plain-writer")


def test_a_recipe_naming_no_registered_engine_names_the_engines(emb, client):
    for engine, hint in (("Arthur", "; did you mean 'arthur'?"), ("nosuch", "")):
        message = client.refused("recipe-create", "unknown_engine",
                                 recipe={**RECIPE, "name": "wrong-engine", "engine": engine})
        assert message.startswith(f"recipe wrong-engine: engine: no think engine named "
                                  f"{engine!r}{hint} (engines: agrajag, arthur, ford, marvin,")
    assert "wrong-engine" not in _catalogue(client)
