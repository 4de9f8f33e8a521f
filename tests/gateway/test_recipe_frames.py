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
