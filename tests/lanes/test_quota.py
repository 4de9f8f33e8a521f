"""Quotas (issue 32, part 3): which quota a turn would start over (``QuotaService.over``),
read from the settings cascade and the stored usage rows; when a held process goes on."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from vancetope_brain.errors import InvalidInput
from vancetope_brain.lanes.quota import QuotaService, period_end, quota_held
from vancetope_brain.models import ProcessStatus, ThinkProcess, User
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.models.usage import UsageKey, UsageRow
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import IdentityStore, SettingStore, UsageStore

TODAY = date(2026, 12, 4)


class Rows(UsageStore):
    """Usage rows as a store would hold them; counts its reads and remembers the last."""

    def __init__(self, rows: list[UsageRow]) -> None:
        self.rows, self.reads, self.asked = rows, 0, None

    def read_usage(self, tenant_id, first_day, last_day, *, user_id=None, session_id=None):
        self.reads += 1
        self.asked = (first_day, last_day, user_id)
        return [r for r in self.rows if r.key.tenant_id == tenant_id
                and first_day <= r.key.day <= last_day
                and user_id in (None, r.key.user_id)]


def _row(user: str, day: int, tokens_in: int, tokens_out: int, model: str = "m1") -> UsageRow:
    return UsageRow(UsageKey("acme", user, "p1", "ses_1", model, TODAY.replace(day=day)),
                    tokens_in, tokens_out, 1)


ROWS = [_row("ada", 4, 600, 100), _row("ada", 1, 2000, 0), _row("bob", 4, 300, 0, "m2")]


@pytest.fixture
def settings(acme_store):
    acme_store.port(IdentityStore).create_user(User(id="bob", tenant_id="acme", name="Bob"))
    return SettingsService(acme_store.port(SettingStore), acme_store.port(IdentityStore))


def _over(settings: SettingsService, rows: Rows, user: str = "ada"):
    process = ThinkProcess(id="proc_1", tenant_id="acme", session_id="ses_1", user_id=user,
                           project_id="p1", name="chat", engine="ford", engine_version="1")
    return QuotaService(rows, settings).over(process, today=TODAY)


def test_no_quota_set_reads_no_usage(settings):
    rows = Rows(ROWS)
    assert _over(settings, rows) is None and rows.reads == 0


@pytest.mark.parametrize(("key", "limit", "over"), [
    ("quota.user.tokensPerDay", 700, True),      # ada today: 600 + 100
    ("quota.user.tokensPerDay", 701, False),
    ("quota.user.tokensPerMonth", 2700, True),   # ada this month: + 2000 on the 1st
    ("quota.user.tokensPerMonth", 2701, False),
    ("quota.tenant.tokensPerDay", 1000, True),   # ada's and bob's today
    ("quota.tenant.tokensPerDay", 1001, False),
    ("quota.tenant.tokensPerMonth", 3000, True),
])
def test_a_quota_is_reached_at_its_limit_over_its_period_and_scope(settings, key, limit, over):
    settings.set("acme", SettingScope.tenant(), key, limit)
    overrun = _over(settings, Rows(ROWS))
    assert (overrun is not None) is over
    if overrun is not None:
        assert (overrun.key, overrun.limit) == (key, limit)
        assert overrun.until == period_end(TODAY, overrun.period)
        assert overrun.error.startswith("quota_exceeded: " + key)


def test_one_read_of_the_narrowest_rows_that_answer(settings):
    settings.set("acme", SettingScope.tenant(), "quota.user.tokensPerDay", 10**6)
    rows = Rows(ROWS)
    assert _over(settings, rows) is None
    assert (rows.reads, rows.asked) == (1, (TODAY, TODAY, "ada"))
    settings.set("acme", SettingScope.tenant(), "quota.tenant.costPerMonth", 5.0)
    assert _over(settings, rows) is None  # no price table: no cost, never over
    assert (rows.reads, rows.asked) == (2, (TODAY.replace(day=1), TODAY, None))


def test_a_users_own_quota_beats_the_tenants_default_for_users(settings):
    settings.set("acme", SettingScope.tenant(), "quota.user.tokensPerDay", 200)
    settings.set("acme", SettingScope.user("ada"), "quota.user.tokensPerDay", 10**6)
    assert _over(settings, Rows(ROWS)) is None
    overrun = _over(settings, Rows(ROWS), user="bob")
    assert overrun is not None and overrun.used == 300


def test_a_cost_quota_prices_the_tokens_by_the_tenants_price_table(settings):
    settings.set("acme", SettingScope.tenant(), "llm.prices",
                 {"m1": {"in": 1000.0, "out": 2000.0}})
    settings.set("acme", SettingScope.tenant(), "quota.user.costPerDay", 0.8)
    overrun = _over(settings, Rows(ROWS))  # (600 × 1000 + 100 × 2000) / 1M = 0.8
    assert overrun is not None and overrun.used == pytest.approx(0.8)
    assert "0.8000" in overrun.text()
    assert _over(settings, Rows(ROWS), user="bob") is None  # m2 is not priced: free


def test_tenant_quotas_are_the_tenants_to_set_and_bounded(settings):
    with pytest.raises(InvalidInput, match="whole tenant"):
        settings.set("acme", SettingScope.user("ada"), "quota.tenant.tokensPerDay", 5)
    with pytest.raises(InvalidInput, match="at least 0"):
        settings.set("acme", SettingScope.tenant(), "quota.user.costPerMonth", -1)


def test_a_quota_write_calls_back_with_the_tenant_other_writes_do_not(acme_store):
    written: list[str] = []
    settings = SettingsService(acme_store.port(SettingStore), acme_store.port(IdentityStore),
                               quota_written=written.append)
    settings.set("acme", SettingScope.tenant(), "chat.historyLimit", 50)
    settings.set("acme", SettingScope.tenant(), "quota.tenant.tokensPerDay", 5)
    settings.unset("acme", SettingScope.tenant(), "quota.tenant.tokensPerDay")
    settings.set("acme", SettingScope.tenant(), "llm.prices", {})
    assert written == ["acme"] * 3


def test_periods_end_at_the_next_utc_day_and_month():
    assert period_end(date(2026, 12, 31), "day") == datetime(2027, 1, 1, tzinfo=UTC)
    assert period_end(date(2026, 12, 4), "month") == datetime(2027, 1, 1, tzinfo=UTC)
    assert period_end(date(2027, 1, 31), "month") == datetime(2027, 2, 1, tzinfo=UTC)


def test_only_a_process_paused_by_a_quota_is_held_by_one():
    base = ThinkProcess(id="p", tenant_id="acme", session_id="s", user_id="ada", name="c",
                        engine="ford", engine_version="1", status=ProcessStatus.PAUSED)
    assert not quota_held(base)
    assert quota_held(base.model_copy(update={"last_error": "quota_exceeded: x 1 of 1"}))
    assert not quota_held(base.model_copy(update={"last_error": "quota_exceeded: x",
                                                  "status": ProcessStatus.IDLE}))


def test_an_engine_may_not_arm_the_systems_timer_keys(acme_store):
    from tests.engines.test_memory_api import context, process

    timers = context(acme_store, process(acme_store)).timers()
    with pytest.raises(ValueError, match="the system's"):
        timers.after(60, "vt.quota")
    assert timers.after(60, "quota").key == "quota"
