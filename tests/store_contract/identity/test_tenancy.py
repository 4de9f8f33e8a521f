"""Identity records of another tenant look missing; the two system queries name the tenant."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.models import Project, Tenant, User
from vancetope_brain.store import IdentityStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World


def test_token_lookup_is_a_system_query_that_names_the_tenant(
    identity: IdentityStore, world: World
) -> None:
    world.token("ten_a", "f" * 64)
    token = identity.token_by_hash("f" * 64)
    assert token is not None and token.tenant_id == "ten_a"


def test_a_foreign_project_looks_missing_and_is_never_listed(identity: IdentityStore) -> None:
    mine = Project(id="prj_1", tenant_id="ten_a", name="Mine")
    identity.create_project(mine)
    with pytest.raises(NotFound):
        identity.get_project("ten_b", "prj_1")
    assert identity.list_projects("ten_b") == []
    assert identity.list_projects("ten_a") == [mine]


def test_foreign_users_and_tokens_are_never_listed(identity: IdentityStore, world: World) -> None:
    identity.create_user(User(id="usr_1", tenant_id="ten_a", name="Ada"))
    world.token("ten_a", "7" * 64, user_id="usr_1")
    assert identity.list_users("ten_b") == []
    assert identity.list_tokens("ten_b", "usr_1") == []
    assert [u.id for u in identity.list_users("ten_a")] == ["usr_1"]


def test_revoking_a_foreign_token_is_not_found_and_changes_nothing(
    identity: IdentityStore, world: World
) -> None:
    token = world.token("ten_a", "8" * 64)
    with pytest.raises(NotFound):
        identity.revoke_token("ten_b", token.id)
    assert identity.token_by_hash("8" * 64) == token
    assert identity.list_tokens("ten_a", token.user_id) == [token]


def test_list_tenants_is_a_system_query_over_every_tenant(identity: IdentityStore) -> None:
    identity.create_tenant(Tenant(id="ten_a", name="Acme"))
    identity.create_tenant(Tenant(id="ten_b", name="Globex"))
    assert {t.id for t in identity.list_tenants()} == {"ten_a", "ten_b"}
