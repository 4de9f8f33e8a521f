"""Setting values per scope (tenant, project, user): get / set (replaces) / delete / list,
isolated per tenant and per scope."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import SettingStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage

TENANT, P1, U1 = SettingScope.tenant(), SettingScope.project("p1"), SettingScope.user("u1")


def test_set_get_and_replace(settings: SettingStore) -> None:
    assert settings.setting_values("ten_a", [TENANT], "chat.historyLimit")[0] is None
    settings.set_setting("ten_a", TENANT, "chat.historyLimit", 50)
    settings.set_setting("ten_a", TENANT, "chat.historyLimit", 60)
    settings.set_setting("ten_a", TENANT, "notify.quietHours.exceptCritical", False)
    settings.set_setting("ten_a", TENANT, "llm.model", "gpt-x")
    assert settings.setting_values("ten_a", [TENANT], "chat.historyLimit")[0] == 60
    assert settings.setting_values("ten_a", [TENANT], "notify.quietHours.exceptCritical")[0] is False
    assert settings.list_settings("ten_a", TENANT) == {
        "chat.historyLimit": 60, "llm.model": "gpt-x", "notify.quietHours.exceptCritical": False}


def test_scopes_are_separate(settings: SettingStore) -> None:
    settings.set_setting("ten_a", TENANT, "llm.model", "t")
    settings.set_setting("ten_a", P1, "llm.model", "p")
    settings.set_setting("ten_a", U1, "llm.model", "u")
    settings.set_setting("ten_a", SettingScope.project("u1"), "chat.historyLimit", 7)
    assert [settings.setting_values("ten_a", [s], "llm.model")[0] for s in (TENANT, P1, U1)] == ["t", "p", "u"]
    assert settings.setting_values("ten_a", [SettingScope.project("p2")], "llm.model")[0] is None
    assert settings.setting_values("ten_a", [U1, SettingScope.project("p2"), P1, TENANT],
                                   "llm.model") == ["u", None, "p", "t"]
    assert settings.setting_values("ten_a", [], "llm.model") == []
    assert settings.list_settings("ten_a", U1) == {"llm.model": "u"}  # not the project named u1
    assert list(settings.list_settings("ten_a", SettingScope.project("u1"))) == ["chat.historyLimit"]


def test_delete_removes_one_scope_and_a_missing_value_is_not_found(settings: SettingStore) -> None:
    settings.set_setting("ten_a", TENANT, "llm.model", "t")
    settings.set_setting("ten_a", P1, "llm.model", "p")
    settings.delete_setting("ten_a", P1, "llm.model")
    assert settings.setting_values("ten_a", [P1], "llm.model")[0] is None
    assert settings.setting_values("ten_a", [TENANT], "llm.model")[0] == "t"
    with pytest.raises(NotFound, match="setting llm.model is not set for project p1"):
        settings.delete_setting("ten_a", P1, "llm.model")


def test_settings_are_tenant_isolated(settings: SettingStore) -> None:
    settings.set_setting("ten_a", TENANT, "llm.model", "a")
    settings.set_setting("ten_a", U1, "chat.historyLimit", 5)
    assert settings.setting_values("ten_b", [TENANT], "llm.model")[0] is None
    assert settings.list_settings("ten_b", U1) == {}
    with pytest.raises(NotFound):
        settings.delete_setting("ten_b", U1, "chat.historyLimit")
    settings.set_setting("ten_b", TENANT, "llm.model", "b")
    assert settings.setting_values("ten_a", [TENANT], "llm.model")[0] == "a"
    assert settings.setting_values("ten_a", [U1], "chat.historyLimit")[0] == 5


def test_values_survive_reopening(settings: SettingStore, storage: Storage) -> None:
    settings.set_setting("ten_a", U1, "notify.email.address", "ada@example.org")
    again = storage.open_backend().port(SettingStore)
    assert again.setting_values("ten_a", [U1], "notify.email.address")[0] == "ada@example.org"


def test_cascade_settings_reads_every_value_of_each_scope(settings: SettingStore) -> None:
    settings.set_setting("ten_a", TENANT, "llm.model", "t")
    settings.set_setting("ten_a", TENANT, "chat.historyLimit", 9)
    settings.set_setting("ten_a", U1, "llm.model", "u")
    settings.set_setting("ten_a", SettingScope.project("u1"), "rag.topK", 3)  # not the user u1
    settings.set_setting("ten_b", P1, "llm.model", "other tenant")
    assert settings.cascade_settings("ten_a", [U1, P1, TENANT]) == [
        {"llm.model": "u"}, {}, {"chat.historyLimit": 9, "llm.model": "t"}]
    assert settings.cascade_settings("ten_b", [P1, TENANT]) == [{"llm.model": "other tenant"}, {}]
    assert settings.cascade_settings("ten_a", []) == []
