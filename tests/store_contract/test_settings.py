"""Setting values per scope (tenant, project, user): get / set (replaces) / delete / list,
isolated per tenant and per scope."""

from __future__ import annotations

from typing import Any

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.settings import SettingScope
from vancetope_brain.store import Store

TENANT, P1, U1 = SettingScope.tenant(), SettingScope.project("p1"), SettingScope.user("u1")


def test_set_get_and_replace(store: Store) -> None:
    assert store.get_setting("ten_a", TENANT, "chat.historyLimit") is None
    store.set_setting("ten_a", TENANT, "chat.historyLimit", 50)
    store.set_setting("ten_a", TENANT, "chat.historyLimit", 60)
    store.set_setting("ten_a", TENANT, "notify.quietHours.exceptCritical", False)
    store.set_setting("ten_a", TENANT, "llm.model", "gpt-x")
    assert store.get_setting("ten_a", TENANT, "chat.historyLimit") == 60
    assert store.get_setting("ten_a", TENANT, "notify.quietHours.exceptCritical") is False
    assert store.list_settings("ten_a", TENANT) == {
        "chat.historyLimit": 60, "llm.model": "gpt-x", "notify.quietHours.exceptCritical": False}


def test_scopes_are_separate(store: Store) -> None:
    store.set_setting("ten_a", TENANT, "llm.model", "t")
    store.set_setting("ten_a", P1, "llm.model", "p")
    store.set_setting("ten_a", U1, "llm.model", "u")
    store.set_setting("ten_a", SettingScope.project("u1"), "chat.historyLimit", 7)
    assert [store.get_setting("ten_a", s, "llm.model") for s in (TENANT, P1, U1)] == ["t", "p", "u"]
    assert store.get_setting("ten_a", SettingScope.project("p2"), "llm.model") is None
    assert store.list_settings("ten_a", U1) == {"llm.model": "u"}  # not the project named u1
    assert list(store.list_settings("ten_a", SettingScope.project("u1"))) == ["chat.historyLimit"]


def test_delete_removes_one_scope_and_a_missing_value_is_not_found(store: Store) -> None:
    store.set_setting("ten_a", TENANT, "llm.model", "t")
    store.set_setting("ten_a", P1, "llm.model", "p")
    store.delete_setting("ten_a", P1, "llm.model")
    assert store.get_setting("ten_a", P1, "llm.model") is None
    assert store.get_setting("ten_a", TENANT, "llm.model") == "t"
    with pytest.raises(NotFound, match="setting llm.model is not set for project p1"):
        store.delete_setting("ten_a", P1, "llm.model")


def test_settings_are_tenant_isolated(store: Store) -> None:
    store.set_setting("ten_a", TENANT, "llm.model", "a")
    store.set_setting("ten_a", U1, "chat.historyLimit", 5)
    assert store.get_setting("ten_b", TENANT, "llm.model") is None
    assert store.list_settings("ten_b", U1) == {}
    with pytest.raises(NotFound):
        store.delete_setting("ten_b", U1, "chat.historyLimit")
    store.set_setting("ten_b", TENANT, "llm.model", "b")
    assert store.get_setting("ten_a", TENANT, "llm.model") == "a"
    assert store.get_setting("ten_a", U1, "chat.historyLimit") == 5


def test_values_survive_reopening(store: Store, backend: Any) -> None:
    store.set_setting("ten_a", U1, "notify.email.address", "ada@example.org")
    assert backend.open_store().get_setting("ten_a", U1, "notify.email.address") == \
        "ada@example.org"
