"""The settings cascade user → project → tenant → default, typed keys, and the engines' view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vancetope_brain.errors import InvalidInput, NotFound
from vancetope_brain.models import ThinkProcess
from vancetope_brain.models.settings import SettingLevel, SettingScope, StoredSetting
from vancetope_brain.settings import KEYS, SettingsApi, SettingsService, setting_key
from vancetope_brain.store import Backend, IdentityStore, SettingStore

TENANT = SettingScope.tenant()


@pytest.fixture
def service(acme_store: Backend) -> SettingsService:
    return SettingsService(acme_store.port(SettingStore), acme_store.port(IdentityStore))


def test_innermost_wins_user_then_project_then_tenant_then_default(
    service: SettingsService
) -> None:
    key = "chat.historyLimit"

    def resolved() -> tuple[Any, SettingScope | None]:
        return service.resolve_with_source("acme", "p1", "ada", key)

    assert resolved() == (200, None)
    service.set("acme", TENANT, key, 100)
    assert resolved() == (100, TENANT)
    service.set("acme", SettingScope.project("p1"), key, 50)
    assert resolved() == (50, SettingScope.project("p1"))
    service.set("acme", SettingScope.user("ada"), key, 20)
    assert resolved() == (20, SettingScope.user("ada"))
    # Outside the project, or for another user, the outer values apply.
    assert service.resolve("acme", "default", None, key) == 100
    assert service.resolve("acme", None, "ada", key) == 20
    assert service.resolve("globex", "p1", "ada", key) == 200
    service.unset("acme", SettingScope.user("ada"), key)
    assert resolved() == (50, SettingScope.project("p1"))
    with pytest.raises(NotFound, match="setting chat.historyLimit is not set for user ada"):
        service.unset("acme", SettingScope.user("ada"), key)


def test_required_keys_and_defaults() -> None:
    expected = {
        "session.defaultChatEngine": "arthur", "chat.historyLimit": 200,
        "arthur.maxContextTokens": 65536, "llm.model": None, "session.idleTimeoutSec": 1800,
        "notify.email.address": None, "notify.email.minCriticality": "NORMAL",
        "notify.email.batchIntervalSec": 300, "notify.quietHours.start": None,
        "notify.quietHours.end": None, "notify.quietHours.exceptCritical": True,
        "inbox.autoArchiveAfterDays": 30,
    }
    assert {name: KEYS[name].default for name in expected} == expected
    assert all(key.description for key in KEYS.values())


@pytest.mark.parametrize(("key", "value", "message"), [
    ("chat.historyLimit", "200", "setting chat.historyLimit takes an int, not '200'"),
    ("chat.historyLimit", True, "takes an int, not True"),
    ("chat.historyLimit", 0, "setting chat.historyLimit is at least 1, not 0"),
    ("notify.quietHours.exceptCritical", 1, "takes a bool, not 1"),
    ("notify.email.minCriticality", "HIGH", "is one of LOW, NORMAL, CRITICAL, not 'HIGH'"),
    ("notify.quietHours.start", "25:00", "must be HH:MM, not '25:00'"),
    ("notify.email.address", "ada", "must be an e-mail address"),
    ("session.defaultChatEngine", "Arthur", "must be an engine name (lowercase-kebab)"),
    ("llm.model", None, "takes a str, not None"),
])
def test_a_bad_value_is_refused_naming_the_key(service: SettingsService, key: str, value: Any,
                                               message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        service.set("acme", TENANT, key, value)
    assert service.stored("acme", TENANT) == {}


def test_an_unknown_key_suggests_the_closest(service: SettingsService) -> None:
    with pytest.raises(InvalidInput, match="unknown setting 'chat.histroyLimit'; did you mean "
                                           "'chat.historyLimit'"):
        service.set("acme", TENANT, "chat.histroyLimit", 5)
    with pytest.raises(InvalidInput, match="unknown setting 'chat.model'"):
        setting_key("chat.model")
    with pytest.raises(InvalidInput, match="unknown setting"):
        SettingsApi.defaults().get("nope")


def test_a_project_or_user_scope_must_exist(service: SettingsService) -> None:
    with pytest.raises(NotFound, match="project nope not found"):
        service.set("acme", SettingScope.project("nope"), "llm.model", "m")
    with pytest.raises(NotFound, match="user bob not found"):
        service.set("acme", SettingScope.user("bob"), "llm.model", "m")


def test_a_retention_setting_is_the_whole_tenants_and_unset_keeps_forever(
        service: SettingsService) -> None:
    for key in ("retention.closedSessionDays", "retention.deliveryLogDays"):
        assert KEYS[key].tenant_only and KEYS[key].default is None
        assert service.set("acme", SettingScope.tenant(), key, 30) == 30
        for scope in (SettingScope.project("default"), SettingScope.user("ada")):
            with pytest.raises(InvalidInput, match=f"{key} applies to the whole tenant"):
                service.set("acme", scope, key, 1)
        with pytest.raises(InvalidInput, match="at least 1"):
            service.set("acme", SettingScope.tenant(), key, 0)


def test_the_audit_log_is_capped_by_default_at_the_tenants_level(
        service: SettingsService) -> None:
    key = KEYS["retention.auditLogDays"]
    assert key.tenant_only and key.default == 400
    assert service.resolve("acme", None, None, key.name) == 400
    with pytest.raises(InvalidInput, match="applies to the whole tenant"):
        service.set("acme", SettingScope.project("default"), key.name, 30)
    with pytest.raises(InvalidInput, match="at most 36500"):
        service.set("acme", SettingScope.tenant(), key.name, 36_501)
    assert service.set("acme", SettingScope.tenant(), key.name, 36_500) == 36_500


def test_values_typed_on_a_command_line_are_parsed() -> None:
    assert setting_key("chat.historyLimit").parse("50") == 50
    assert setting_key("notify.quietHours.exceptCritical").parse("no") is False
    assert setting_key("notify.quietHours.start").parse("22:00") == "22:00"
    with pytest.raises(InvalidInput, match="takes an int, not 'many'"):
        setting_key("chat.historyLimit").parse("many")
    with pytest.raises(InvalidInput, match="takes true or false"):
        setting_key("notify.quietHours.exceptCritical").parse("maybe")


def test_model_selection_per_engine(service: SettingsService, acme_store: Backend) -> None:
    def api() -> SettingsApi:
        return SettingsApi(service, "acme", "p1", "ada")

    assert api().model_for("arthur") is None  # the deployment's VANCETOPE_LLM_MODEL
    service.set("acme", SettingScope.user("ada"), "llm.model", "small")
    assert api().model_for("arthur") == "small"
    service.set("acme", TENANT, "arthur.model", "big")  # specific beats generic, at any level
    assert (api().model_for("arthur"), api().model_for("ford")) == ("big", "small")
    effective = service.effective("acme", "p1", "ada")
    assert effective["arthur.model"] == ("big", TENANT)
    assert effective["llm.model"] == ("small", SettingScope.user("ada"))
    assert effective["chat.historyLimit"] == (200, None)


def test_the_engines_view_is_scoped_to_the_process(service: SettingsService) -> None:
    process = ThinkProcess(id="proc_1", tenant_id="acme", session_id="ses_1", user_id="ada",
                           project_id="p1", name="chat", engine="arthur", engine_version="1.0.0")
    service.set("acme", SettingScope.project("p1"), "arthur.maxContextTokens", 4096)
    view = SettingsApi.for_process(service, process)
    assert view.get("arthur.maxContextTokens") == 4096
    service.set("acme", SettingScope.user("ada"), "arthur.maxContextTokens", 2048)
    assert view.get("arthur.maxContextTokens") == 4096  # read once per lifecycle call
    assert SettingsApi.for_process(service, process).get("arthur.maxContextTokens") == 2048
    assert SettingsApi.defaults().get("arthur.maxContextTokens") == 65536


def test_the_engines_view_reads_the_store_once_for_every_key(
        service: SettingsService, acme_store: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    store = acme_store.port(SettingStore)
    service.set("acme", SettingScope.user("ada"), "chat.historyLimit", 20)
    service.set("acme", TENANT, "arthur.model", "big")
    reads: list[str] = []

    def counting(name: str) -> Any:
        real = getattr(store, name)

        def counted(*args: Any) -> Any:
            reads.append(name)
            return real(*args)
        return counted

    for name in ("cascade_settings", "setting_values", "list_settings"):
        monkeypatch.setattr(store, name, counting(name))
    view = SettingsApi(service, "acme", "p1", "ada")
    service.set("acme", TENANT, "rag.topK", 7)
    assert (view.get("chat.historyLimit"), view.model_for("arthur"), view.get("rag.topK")) == (
        20, "big", 7)
    service.set("acme", TENANT, "rag.topK", 8)  # after the first read: the next call sees it
    assert (view.get("rag.topK"), view.get("zaphod.maxHeads")) == (7, 5)
    assert SettingsApi(service, "acme", "p1", "ada").get("rag.topK") == 8
    assert reads == ["cascade_settings", "cascade_settings"]
    with pytest.raises(InvalidInput, match="unknown setting"):
        view.get("nope")


def test_the_projects_view_resolves_from_the_engines_read(
        service: SettingsService, acme_store: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """``without_user``: what ``SettingsApi(service, tenant, project, None)`` would read,
    taken from the read the view already made (the turn's), never read again."""
    service.set("acme", TENANT, "rag.topK", 7)
    service.set("acme", SettingScope.project("p1"), "rag.minScore", 0.5)
    service.set("acme", SettingScope.user("ada"), "rag.topK", 3)
    service.set("acme", SettingScope.user("ada"), "rag.minScore", 0.9)
    reads: list[str] = []
    store = acme_store.port(SettingStore)
    real = store.cascade_settings
    monkeypatch.setattr(store, "cascade_settings",
                        lambda *args: reads.append("cascade_settings") or real(*args))
    view = SettingsApi(service, "acme", "p1", "ada")
    assert (view.get("rag.topK"), view.get("rag.minScore")) == (3, 0.9)
    project = view.without_user()
    service.set("acme", TENANT, "rag.topK", 8)  # after the read: neither view sees it
    assert (project.get("rag.topK"), project.get("rag.minScore")) == (7, 0.5)
    assert project.user_id is None and project.project_id == "p1"
    assert reads == ["cascade_settings"]
    assert SettingsApi(service, "acme", "p1", None).get("rag.topK") == 8
    assert SettingsApi().without_user().get("rag.topK") == KEYS["rag.topK"].default


def test_a_stored_value_that_no_longer_fits_its_key_is_skipped(
    service: SettingsService, acme_store: Backend
) -> None:
    acme_store.port(SettingStore).set_setting("acme", TENANT, "chat.historyLimit", 10)
    acme_store.port(SettingStore).set_setting("acme", SettingScope.user("ada"), "chat.historyLimit", "lots")
    assert service.resolve_with_source("acme", None, "ada", "chat.historyLimit") == (10, TENANT)
    assert SettingsApi(service, "acme", None, "ada").get("chat.historyLimit") == 10


def test_a_stored_setting_record_carries_a_schema_version() -> None:
    raw = {"schemaVersion": 1, "tenantId": "acme", "level": "user", "scopeId": "ada",
           "key": "notify.email.address", "value": "ada@example.org",
           "updatedAt": "2025-03-14T09:26:53.589Z"}
    record = StoredSetting.load(json.loads(json.dumps(raw)))
    assert (record.level, record.value, record.schema_version) == (
        SettingLevel.USER, "ada@example.org", 1)


def test_the_configuration_docs_list_every_key() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    assert [name for name in KEYS if f"| `{name}` |" not in docs] == []


def test_a_float_key_takes_numbers_within_its_bounds_only() -> None:
    key = setting_key("rag.minScore")
    assert key.parse("0.3") == 0.3 and key.validate(0) == 0.0 and key.validate(1) == 1.0
    for bad in ("nan", "inf", "1.5", "-0.1", "high"):
        with pytest.raises(InvalidInput, match="rag.minScore"):
            key.parse(bad)
    with pytest.raises(InvalidInput, match="takes a float"):
        key.validate(True)
    with pytest.raises(InvalidInput, match="at most 20"):
        setting_key("rag.topK").validate(21)


def test_a_price_table_takes_models_with_prices_in_and_out_only() -> None:
    key = setting_key("llm.prices")
    assert key.parse('{"m1": {"in": 1, "out": 2.5}}') == {"m1": {"in": 1.0, "out": 2.5}}
    for bad in ('{"m1": {"in": 1}}', '{"m1": {"in": -1, "out": 1}}', '{"m1": 3}', "[1]",
                '{"m1": {"in": true, "out": 1}}', "prices", '{"": {"in": 1, "out": 1}}'):
        with pytest.raises(InvalidInput, match="llm.prices"):
            key.parse(bad)
    assert key.tenant_only
