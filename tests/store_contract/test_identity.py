"""Tenants, users and API tokens."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import Tenant, User
from vancetope_brain.store import Store

if TYPE_CHECKING:
    from .conftest import World


def test_duplicate_tenant_id_conflicts(store: Store) -> None:
    store.create_tenant(Tenant(id="ten_1", name="Acme"))
    with pytest.raises(Conflict):
        store.create_tenant(Tenant(id="ten_1", name="Other"))


def test_user_round_trips(store: Store) -> None:
    user = User(id="usr_1", tenant_id="ten_1", name="Ada")
    store.create_user(user)
    assert store.get_user("ten_1", "usr_1") == user


def test_duplicate_user_id_conflicts(store: Store) -> None:
    store.create_user(User(id="usr_1", tenant_id="ten_1", name="Ada"))
    with pytest.raises(Conflict):
        store.create_user(User(id="usr_1", tenant_id="ten_1", name="Bob"))


def test_missing_user_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.get_user("ten_1", "usr_missing")


def test_token_by_hash_finds_the_live_token(store: Store, world: World) -> None:
    token = world.token("ten_1", "a" * 64)
    assert store.token_by_hash("a" * 64) == token


def test_token_by_hash_ignores_revoked_and_unknown_hashes(store: Store, world: World) -> None:
    world.token("ten_1", "b" * 64, revoked=True)
    assert store.token_by_hash("b" * 64) is None
    assert store.token_by_hash("c" * 64) is None


def test_duplicate_token_id_conflicts(store: Store, world: World) -> None:
    token = world.token("ten_1", "d" * 64)
    with pytest.raises(Conflict):
        store.create_token(token.model_copy(update={"token_hash": "e" * 64}))
