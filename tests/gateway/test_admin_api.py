"""The operators' door, ``/admin/``: the app on a real SQLite store, through Flask's test
client. A user token gets 403 on every route (enumerated from the OpenAPI document, which
must name every rule of the blueprint), no token 401; an operator of tenant A finds
nothing of tenant B; a platform operator acts in both; each write leaves an audit record."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.helpers import server_env
from tests.store_contract.conftest import World
from tests.store_contract.inspector._build import inspection
from vancetope_brain import errors, runtime
from vancetope_brain.config import Config
from vancetope_brain.models import DeadLetter, Role, TurnCommit, TurnRecord, new_id, utcnow
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.models.tool_health import HealthState, ToolHealth
from vancetope_brain.models.usage import UsageKey, UsageRow
from vancetope_brain.services import SYSTEM_USER
from vancetope_brain.store import LaneStore, ToolHealthStore
from vancetope_gateway.admin_api import PAGE_LIMIT_MAX
from vancetope_gateway.app import create_app, http_status
from vancetope_gateway.parts import Gateway, build_gateway

TODAY = utcnow().date()


@dataclass
class Tenant:
    """A tenant's objects and tokens, as the tests reach them."""

    id: str
    user: str
    token: str
    operator: str
    process: str
    dead_letter: str
    system_session: str
    turn: str


@dataclass
class Door:
    gateway: Gateway
    app: Flask
    a: Tenant
    b: Tenant
    platform: str

    def call(self, method: str, path: str, token: str | None,
             json: dict[str, Any] | None = None) -> tuple[int, Any]:
        client: FlaskClient = self.app.test_client()
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        answer = client.open(path, method=method, headers=headers, json=json)
        return answer.status_code, answer.get_json()


def _tenant(gateway: Gateway, tenant_id: str) -> Tenant:
    identity = gateway.identity
    identity.create_tenant(tenant_id.upper(), tenant_id)
    user = identity.create_user(tenant_id, "Ada", f"{tenant_id}_ada").id
    world = World(gateway.store)
    session = world.session(tenant_id, user)
    process = world.process(tenant_id, session.id)
    lanes = gateway.store.port(LaneStore)
    message = world.append(tenant_id, process.id, "poison")
    epoch = lanes.acquire_epoch(tenant_id, process.id).epoch
    record = TurnRecord(id=new_id("turn"), tenant_id=tenant_id, process_id=process.id,
                        epoch=epoch, worker="w1", lifecycle="on_message", started_at=utcnow(),
                        status_after=process.status)
    assert lanes.commit_turn(tenant_id, process.id, epoch, TurnCommit(
        status=process.status, record=record,
        dead_letters={message.id: DeadLetter(reason="died", attempts=3)},
        usage=[UsageRow(UsageKey(tenant_id, user, "default", session.id, model, TODAY),
                        1000, 100, 2, 1) for model in ("m-big", "m-small")])) is not None
    gateway.store.port(ToolHealthStore).put_tool_health(
        ToolHealth(tenant_id=tenant_id, server="search", state=HealthState.DOWN),
        expected_revision=None)
    system = world.session(tenant_id, SYSTEM_USER, system=True, title="agrajag")
    inspected = inspection(process)
    world.inspector.put_inspection(inspected)
    return Tenant(tenant_id, user, identity.issue_token(tenant_id, user),
                  identity.create_token(tenant_id, user, role=Role.OPERATOR)[1], process.id,
                  message.id, system.id, inspected.id)


@pytest.fixture
def door(tmp_path: Path) -> Iterator[Door]:
    """Each test's own store and in-memory Redis: no test sees another's writes."""
    saved = runtime._embedded_server
    runtime._embedded_server = fakeredis.FakeServer()
    data = tmp_path
    gateway = build_gateway(Config.from_env(server_env(data)), lambda *task: None,
                            enqueue_index=lambda job: None)
    try:
        a, b = _tenant(gateway, "ta"), _tenant(gateway, "tb")
        platform = gateway.identity.create_token("ta", a.user, "ops", Role.PLATFORM)[1]
        yield Door(gateway, create_app(gateway, llm_description="test"), a, b, platform)
    finally:
        gateway.close()
        runtime._embedded_server = saved


def _routes(door: Door) -> list[tuple[str, str]]:
    """Every (method, path) of the OpenAPI document, path parameters filled with tenant A's
    ids, and the document's own route."""
    status, document = door.call("GET", "/admin/openapi.json", door.a.operator)
    assert status == 200
    values = {"tenant_id": door.a.id, "user_id": door.a.user, "token_id": "tok_x",
              "message_id": door.a.dead_letter, "process_id": door.a.process,
              "turn_id": door.a.turn}
    routes = [("GET", "/admin/openapi.json")]
    for path, operations in document["paths"].items():
        for method in operations:
            routes.append((method.upper(),
                           re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)))
    return routes


def test_the_document_names_every_rule_of_the_blueprint(door: Door) -> None:
    _, document = door.call("GET", "/admin/openapi.json", door.a.operator)
    documented = {(method.upper(), re.sub(r"\{(\w+)\}", r"<\1>", path))
                  for path, operations in document["paths"].items() for method in operations}
    rules = {(method, rule.rule) for rule in door.app.url_map.iter_rules()
             if rule.endpoint.startswith("admin.") and rule.endpoint != "admin.openapi"
             for method in rule.methods - {"HEAD", "OPTIONS"}}
    assert documented == rules
    assert len(rules) >= 13  # tenants, users, tokens, tool health, dead letters, …


def test_a_user_token_gets_403_and_no_token_401_on_every_route(door: Door) -> None:
    routes = _routes(door)
    for method, path in routes:
        body = {} if method == "POST" else None
        assert door.call(method, path, door.a.token, body)[0] == 403, (method, path)
        assert door.call(method, path, None, body)[0] == 401, (method, path)
        assert door.call(method, path, "vt_revoked-or-never-issued", body)[0] == 401
    gone = door.gateway.identity.create_token(door.a.id, door.a.user, role=Role.OPERATOR)
    door.gateway.identity.revoke_token(door.a.id, gone[0].id)
    assert door.call("GET", "/admin/tenants", gone[1])[0] == 401


def test_an_operator_of_one_tenant_finds_nothing_of_another(door: Door) -> None:
    a, b = door.a, door.b
    base = f"/admin/tenants/{b.id}"
    for method, path, body in (
            ("GET", f"{base}/users", None),
            ("POST", f"{base}/users", {"name": "Mallory"}),
            ("GET", f"{base}/users/{b.user}/tokens", None),
            ("POST", f"{base}/users/{b.user}/tokens", {"role": "operator"}),
            ("POST", f"{base}/tokens/{_token_id(door, b)}/revoke", None),
            ("GET", f"{base}/tool-health", None),
            ("POST", f"{base}/tool-health/reset", {}),
            ("GET", f"{base}/dead-letters", None),
            ("POST", f"{base}/dead-letters/{b.dead_letter}/requeue", None),
            ("GET", f"{base}/system-sessions", None),
            ("GET", f"{base}/usage", None),
            ("GET", f"{base}/quotas", None),
            ("POST", f"{base}/quotas", {"key": "quota.tenant.tokensPerDay", "value": 1}),
            ("GET", f"{base}/processes/{b.process}/turns", None),
            ("GET", f"{base}/turns/{b.turn}", None),
            ("GET", f"/admin/audit?tenant={b.id}", None)):
        status, answer = door.call(method, path, a.operator, body)
        assert (status, answer["code"]) == (404, "not_found"), (method, path)
    # B's objects through A's own tenant are not there either.
    mine = f"/admin/tenants/{a.id}"
    assert door.call("GET", f"{mine}/usage?user={b.user}", a.operator)[1]["rows"] == []
    assert door.call("GET", f"{mine}/quotas?user={b.user}", a.operator)[0] == 404
    assert door.call("POST", f"{mine}/quotas", a.operator, {
        "key": "quota.user.tokensPerDay", "value": 1, "user": b.user})[0] == 404
    assert door.call("GET", f"{mine}/users/{b.user}/tokens", a.operator)[0] == 404
    assert door.call("POST", f"{mine}/tokens/{_token_id(door, b)}/revoke", a.operator)[0] == 404
    assert door.call("POST", f"{mine}/dead-letters/{b.dead_letter}/requeue",
                     a.operator)[0] == 404
    assert door.call("GET", f"{mine}/processes/{b.process}/turns", a.operator)[0] == 404
    assert door.call("GET", f"{mine}/turns/{b.turn}", a.operator)[0] == 404
    status, tenants = door.call("GET", "/admin/tenants", a.operator)
    assert [t["id"] for t in tenants["tenants"]] == [a.id]
    assert door.call("POST", "/admin/tenants", a.operator, {"name": "New"})[0] == 403
    _, audit = door.call("GET", "/admin/audit", a.operator)
    assert {r["tenantId"] for r in audit["records"]} == {a.id}
    # B is untouched: still its one token, its dead letter, its tool-health record.
    assert len(door.gateway.identity.list_tokens(b.id, b.user)) == 2
    assert [m.id for m in door.gateway.operations.dead_letters.dead_letters(b.id)] == [b.dead_letter]
    assert door.gateway.store.port(ToolHealthStore).list_tool_health(b.id) != []


def _token_id(door: Door, tenant: Tenant) -> str:
    return door.gateway.identity.list_tokens(tenant.id, tenant.user)[0].id


def test_an_operator_reads_its_own_tenant(door: Door) -> None:
    a = door.a
    base = f"/admin/tenants/{a.id}"
    assert [u["id"] for u in door.call("GET", f"{base}/users", a.operator)[1]["users"]] \
        == [a.user]
    tokens = door.call("GET", f"{base}/users/{a.user}/tokens", a.operator)[1]["tokens"]
    assert [t["role"] for t in tokens][:2] == ["user", "operator"]
    assert all("tokenHash" not in t for t in tokens)
    assert [r["server"] for r in door.call("GET", f"{base}/tool-health",
                                           a.operator)[1]["records"]] == ["search"]
    assert [m["id"] for m in door.call("GET", f"{base}/dead-letters",
                                       a.operator)[1]["messages"]] == [a.dead_letter]
    listed = door.call("GET", f"{base}/processes/{a.process}/turns", a.operator)[1]
    assert [t["id"] for t in listed["turns"]] == [a.turn] and listed["nextCursor"] is None
    assert listed["turns"][0]["steps"] == []
    turn = door.call("GET", f"{base}/turns/{a.turn}", a.operator)[1]["turn"]
    assert [s["kind"] for s in turn["steps"]] == ["model", "tool"]
    assert door.call("GET", f"{base}/processes/{a.process}/turns?cursor=x",
                     a.operator)[1]["code"] == "invalid_input"
    sessions = door.call("GET", f"{base}/system-sessions", a.operator)[1]["sessions"]
    assert [s["session"]["id"] for s in sessions] == [a.system_session]


def test_a_platform_operator_acts_in_every_tenant_and_each_write_is_audited(
        door: Door) -> None:
    b = door.b
    base = f"/admin/tenants/{b.id}"
    status, tenant = door.call("POST", "/admin/tenants", door.platform,
                               {"name": "Gamma", "id": "tg"})
    assert (status, tenant["id"]) == (200, "tg")
    status, created = door.call("POST", f"{base}/users/{b.user}/tokens", door.platform,
                                {"role": "operator", "label": "night shift"})
    assert status == 200 and created["token"]["role"] == "operator"
    secret = created["secret"]
    assert door.gateway.identity.authenticate(secret).role is Role.OPERATOR
    assert door.call("GET", f"{base}/users", secret)[0] == 200  # B's new operator
    assert door.call("POST", f"{base}/tokens/{created['token']['id']}/revoke",
                     door.platform)[1] == {"revoked": created["token"]["id"]}
    assert door.call("GET", f"{base}/users", secret)[0] == 401
    assert door.call("POST", f"{base}/tool-health/reset", door.platform,
                     {"server": "search"})[1] == {"reset": 1}
    status, requeued = door.call("POST", f"{base}/dead-letters/{b.dead_letter}/requeue",
                                 door.platform)
    assert status == 200 and requeued["message"]["id"] == b.dead_letter
    assert door.call("POST", f"{base}/tool-health/reset", door.platform,
                     {"tool": "search__find"})[1]["code"] == "invalid_input"
    _, log = door.call("GET", f"/admin/audit?tenant={b.id}", door.platform)
    assert [(r["action"], r["outcome"]) for r in log["records"]][:5] == [
        ("tool-health.reset", "invalid_input"), ("dead-letter.requeue", "ok"),
        ("tool-health.reset", "ok"), ("token.revoke", "ok"), ("token.create", "ok")]
    assert all(secret not in str(r) for r in log["records"])
    assert log["records"][4]["target"].startswith(created["token"]["id"])
    assert log["records"][0]["actor"].startswith(f"user {door.a.user} token tok_")
    _, everything = door.call("GET", "/admin/audit", door.platform)
    assert {"ta", "tb", "tg"} >= {r["tenantId"] for r in everything["records"]} >= {"tb", "tg"}
    # B's operator sees B's records, written by the platform operator.
    _, seen = door.call("GET", "/admin/audit", b.operator)
    assert seen["records"] == log["records"]


def test_pages_and_bad_input_answer_with_stable_codes(door: Door) -> None:
    a = door.a
    base = f"/admin/tenants/{a.id}"
    for n in range(3):
        door.call("POST", f"{base}/users", a.operator, {"name": f"User {n}"})
    first = door.call("GET", f"{base}/users?limit=2", a.operator)[1]
    second = door.call("GET", f"{base}/users?limit=2&cursor={first['nextCursor']}",
                       a.operator)[1]
    assert len(first["users"]) == 2 and len(second["users"]) == 2
    assert second["nextCursor"] is None
    assert {u["id"] for u in first["users"]}.isdisjoint(u["id"] for u in second["users"])
    audit = door.call("GET", "/admin/audit?limit=2", a.operator)[1]
    older = door.call("GET", f"/admin/audit?limit=2&cursor={audit['nextCursor']}",
                      a.operator)[1]
    assert audit["records"][1]["at"] >= older["records"][0]["at"]
    for method, path, body in (
            ("GET", f"{base}/users?limit={PAGE_LIMIT_MAX + 1}", None),
            ("GET", f"{base}/users?limit=0", None),
            ("GET", f"{base}/users?cursor=x", None),
            ("GET", "/admin/audit?cursor=nonsense", None),
            ("POST", f"{base}/users", {"name": ""}),
            ("POST", f"{base}/users", {"name": "Eve", "id": "bad id"}),
            ("POST", f"{base}/users/{a.user}/tokens", {"role": "root"}),
            ("POST", f"{base}/users", {})):
        status, answer = door.call(method, path, a.operator, body)
        assert (status, answer["code"]) == (400, "invalid_input"), (path, body, answer)
    assert door.call("POST", f"{base}/users", a.operator,
                     {"name": "Ada", "id": a.user})[1]["code"] == "conflict"
    form = door.app.test_client().post(f"{base}/users", data={"name": "Form"},
                                       headers={"Authorization": f"Bearer {a.operator}"})
    assert (form.status_code, form.get_json()["code"]) == (400, "invalid_input")


def test_an_operator_token_is_also_its_users_token_on_the_user_doors(door: Door) -> None:
    a = door.a
    as_user = door.call("GET", "/sessions", a.token)
    assert as_user[0] == 200 and as_user[1]["sessions"] != []
    assert door.call("GET", "/sessions", a.operator) == as_user
    assert door.call("GET", "/sessions", door.platform) == as_user  # ada's, in tenant A only


@pytest.mark.parametrize(("error", "status"), [
    (errors.OperatorOnly("x"), 403), (errors.FingerprintMismatch("x"), 409),
    (errors.MemoryFull("x"), 429), (errors.DocumentTooLarge("x"), 413),
    (errors.UnknownEngine("x"), 400), (errors.BadJson("x"), 400),
    (errors.StoreError("x"), 503), (errors.EmbeddingInvalid("x"), 503),
    (errors.Fenced("x"), 500)])
def test_an_error_answers_with_its_nearest_ancestors_status(error: errors.VancetopeError,
                                                           status: int) -> None:
    """Every error class of ``errors.py`` has a status, from its own entry or its nearest
    ancestor's (``operator_only`` answered 500 when statuses were listed by code)."""
    assert http_status(error) == status


def test_an_operator_reads_usage_and_sets_quotas_audited(door: Door) -> None:
    a = door.a
    base = f"/admin/tenants/{a.id}"
    door.gateway.settings.set(a.id, SettingScope.tenant(), "llm.prices",
                              {"m-big": {"in": 10.0, "out": 20.0}})
    status, usage = door.call("GET", f"{base}/usage", a.operator)
    assert status == 200 and usage["truncated"] is False
    assert (usage["since"], usage["until"]) == (str(TODAY.replace(day=1)), str(TODAY))
    assert [(r["day"], r["userId"], r["model"], r["tokensIn"], r["tokensOut"], r["cost"])
            for r in usage["rows"]] == [
        (str(TODAY), a.user, "m-big", 1000, 100, pytest.approx(0.012)),
        (str(TODAY), a.user, "m-small", 1000, 100, 0.0)]
    assert (usage["totals"]["tokensIn"], usage["totals"]["calls"]) == (2000, 4)
    assert door.call("GET", f"{base}/usage?since=2020-01-01", a.operator)[1]["code"] == \
        "invalid_input"
    assert door.call("GET", f"{base}/usage?since={TODAY}&until={TODAY}&user=nobody",
                     a.operator)[1]["rows"] == []

    status, written = door.call("POST", f"{base}/quotas", a.operator,
                                {"key": "quota.tenant.tokensPerDay", "value": 5000})
    assert status == 200 and written["tenant"]["quota.tenant.tokensPerDay"] == 5000
    status, written = door.call("POST", f"{base}/quotas", a.operator, {
        "key": "quota.user.costPerMonth", "value": 2.5, "user": a.user})
    assert status == 200 and written["user"]["quota.user.costPerMonth"] == 2.5
    _, read = door.call("GET", f"{base}/quotas?user={a.user}", a.operator)
    assert read["tenant"]["quota.tenant.tokensPerDay"] == 5000
    assert read["user"] == {**{k: None for k in read["user"]}, "quota.user.costPerMonth": 2.5}
    for bad in ({"key": "quota.tenant.tokensPerWeek", "value": 1},
                {"key": "quota.tenant.tokensPerDay", "value": -1},
                {"key": "quota.tenant.tokensPerDay", "value": 1, "user": a.user}):
        assert door.call("POST", f"{base}/quotas", a.operator, bad)[1]["code"] == \
            "invalid_input", bad
    assert door.call("POST", f"{base}/quotas", a.operator,
                     {"key": "quota.tenant.tokensPerDay", "value": None})[0] == 200
    assert door.call("GET", f"{base}/quotas", a.operator)[1]["tenant"][
        "quota.tenant.tokensPerDay"] is None
    _, log = door.call("GET", "/admin/audit", a.operator)
    assert [(r["action"], r["outcome"]) for r in log["records"]][:5] == [
        ("quota.set", "ok"), ("quota.set", "invalid_input"), ("quota.set", "invalid_input"),
        ("quota.set", "ok"), ("quota.set", "ok")]
