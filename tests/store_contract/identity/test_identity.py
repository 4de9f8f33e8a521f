"""Tenants, projects, users and API tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import Project, Role, Tenant, User
from vancetope_brain.store import IdentityStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_duplicate_tenant_id_conflicts(identity: IdentityStore) -> None:
    identity.create_tenant(Tenant(id="ten_1", name="Acme"))
    with pytest.raises(Conflict):
        identity.create_tenant(Tenant(id="ten_1", name="Other"))


def test_list_tenants_is_every_tenant_oldest_first(identity: IdentityStore) -> None:
    newer = Tenant(id="ten_new", name="Globex", created_at=_at(5))
    older = Tenant(id="ten_old", name="Acme", created_at=_at(1))
    identity.create_tenant(newer)
    identity.create_tenant(older)
    assert identity.list_tenants() == [older, newer]


def test_project_round_trips(identity: IdentityStore) -> None:
    project = Project(id="default", tenant_id="ten_1", name="Default")
    grouped = Project(id="prj_2", tenant_id="ten_1", name="Research", group_id="grp_lab")
    identity.create_project(project)
    identity.create_project(grouped)
    assert identity.get_project("ten_1", "default") == project
    assert identity.get_project("ten_1", "prj_2") == grouped


def test_project_ids_are_unique_per_tenant(identity: IdentityStore) -> None:
    identity.create_project(Project(id="default", tenant_id="ten_1", name="Default"))
    with pytest.raises(Conflict):
        identity.create_project(Project(id="default", tenant_id="ten_1", name="Again"))
    other = Project(id="default", tenant_id="ten_2", name="Theirs")
    identity.create_project(other)  # the same id in another tenant is another project
    assert identity.get_project("ten_2", "default") == other
    assert identity.get_project("ten_1", "default").name == "Default"


def test_missing_project_is_not_found(identity: IdentityStore) -> None:
    with pytest.raises(NotFound, match="project prj_missing"):
        identity.get_project("ten_1", "prj_missing")


@pytest.mark.parametrize("kind", [Project, User])
def test_list_is_the_tenants_records_oldest_first(
    identity: IdentityStore, kind: type[Project | User]
) -> None:
    create, listed = ((identity.create_project, identity.list_projects) if kind is Project
                      else (identity.create_user, identity.list_users))
    newer = kind(id="usr_b", tenant_id="ten_1", name="B", created_at=_at(9))
    older = kind(id="usr_a", tenant_id="ten_1", name="A", created_at=_at(4))
    for record in (newer, older):
        create(record)
    assert listed("ten_1") == [older, newer]
    assert listed("ten_empty") == []


def test_user_round_trips(identity: IdentityStore) -> None:
    user = User(id="usr_1", tenant_id="ten_1", name="Ada")
    identity.create_user(user)
    assert identity.get_user("ten_1", "usr_1") == user


def test_duplicate_user_id_conflicts(identity: IdentityStore) -> None:
    identity.create_user(User(id="usr_1", tenant_id="ten_1", name="Ada"))
    with pytest.raises(Conflict):
        identity.create_user(User(id="usr_1", tenant_id="ten_1", name="Bob"))


def test_missing_user_is_not_found(identity: IdentityStore) -> None:
    with pytest.raises(NotFound):
        identity.get_user("ten_1", "usr_missing")


def test_token_by_hash_finds_the_live_token(identity: IdentityStore, world: World) -> None:
    token = world.token("ten_1", "a" * 64)
    assert identity.token_by_hash("a" * 64) == token


def test_token_by_hash_ignores_revoked_and_unknown_hashes(
    identity: IdentityStore, world: World
) -> None:
    world.token("ten_1", "b" * 64, revoked=True)
    assert identity.token_by_hash("b" * 64) is None
    assert identity.token_by_hash("c" * 64) is None


def test_duplicate_token_id_conflicts(identity: IdentityStore, world: World) -> None:
    token = world.token("ten_1", "d" * 64)
    with pytest.raises(Conflict):
        identity.create_token(token.model_copy(update={"token_hash": "e" * 64}))


def test_list_tokens_is_the_users_tokens_revoked_included_oldest_first(
    identity: IdentityStore, world: World
) -> None:
    newer = world.token("ten_1", "1" * 64, created_at=_at(7))
    older = world.token("ten_1", "2" * 64, revoked=True, created_at=_at(6))
    world.token("ten_1", "3" * 64, user_id="usr_2")
    assert identity.list_tokens("ten_1", "usr_1") == [older, newer]
    assert identity.list_tokens("ten_1", "usr_none") == []


def test_revoke_token_hides_it_from_authentication_and_is_idempotent(
    identity: IdentityStore, world: World
) -> None:
    token = world.token("ten_1", "4" * 64, created_at=_at(1))
    kept = world.token("ten_1", "5" * 64, created_at=_at(2))
    identity.revoke_token("ten_1", token.id)
    assert identity.token_by_hash("4" * 64) is None
    assert identity.token_by_hash("5" * 64) == kept
    identity.revoke_token("ten_1", token.id)
    assert identity.list_tokens("ten_1", "usr_1") == [
        token.model_copy(update={"revoked": True}), kept]


def test_revoke_of_a_missing_token_is_not_found(identity: IdentityStore) -> None:
    with pytest.raises(NotFound, match="token tok_missing"):
        identity.revoke_token("ten_1", "tok_missing")


def test_a_token_keeps_its_role_and_one_stored_before_roles_is_a_user_token(
    storage: Storage, identity: IdentityStore, world: World
) -> None:
    operator = world.token("ten_1", "6" * 64, role=Role.OPERATOR, created_at=_at(1))
    platform = world.token("ten_1", "7" * 64, role=Role.PLATFORM, created_at=_at(2))
    older = world.token("ten_1", "8" * 64, role=Role.OPERATOR, created_at=_at(3))
    storage.drop_raw("token", older.id, "role")  # as the version before roles wrote it
    assert identity.token_by_hash("6" * 64) == operator
    assert identity.list_tokens("ten_1", "usr_1") == [
        operator, platform, older.model_copy(update={"role": Role.USER})]
    again = storage.open_backend().port(IdentityStore)  # reopened: whatever a migration does
    found = again.token_by_hash("8" * 64)
    assert found is not None and found.role is Role.USER
