"""`vancetope admin …` against a temporary SQLite store: the whole tenant → project → user →
token → revoke flow, script-friendly output, and one-line errors with exit code 2.

Most commands run in-process through ``main`` (fast); one smoke test runs the real CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from vancetope_brain.errors import Unauthorized
from vancetope_brain.identity import IdentityService, Principal
from vancetope_brain.models import Role
from vancetope_brain.store import (
    Backend,
    DeliveryStore,
    IdentityStore,
    LaneStore,
    RecipeStore,
    SessionStore,
    open_store,
)
from vancetope_brain.store.postgres._db import SCHEMA_VERSION as POSTGRES_VERSION
from vancetope_brain.store.sqlite._db import SCHEMA_VERSION as SQLITE_VERSION
from vancetope_gateway.cli import main


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def rows(self) -> list[list[str]]:
        """A list command's table without its header, split on whitespace."""
        return [line.split() for line in self.out.splitlines()[1:]]


@pytest.fixture
def store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in list(os.environ):
        if name.startswith("VANCETOPE_"):
            monkeypatch.delenv(name)
    url = f"sqlite:///{tmp_path / 'admin' / 'vancetope.db'}"
    monkeypatch.setenv("VANCETOPE_DATA_DIR", str(tmp_path / "admin"))
    monkeypatch.setenv("VANCETOPE_STORE_URL", url)
    return url


@pytest.fixture
def admin(store_url: str, capsys: pytest.CaptureFixture[str]):
    def run(*argv: str) -> Run:
        code = main(["admin", *argv])
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


@pytest.fixture
def store(store_url: str) -> Iterator[Backend]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def test_full_flow_tenant_project_user_token_revoke(admin, store: Backend) -> None:
    created = admin("tenant", "create", "Acme Corp", "--id", "acme")
    assert (created.code, created.out) == (0, "acme\n")
    assert "created tenant acme" in created.err

    project = admin("project", "create", "--tenant", "acme", "Research", "--group", "lab")
    assert project.code == 0 and project.out.strip().startswith("prj_")
    listed = admin("project", "list", "--tenant", "acme")
    assert listed.out.splitlines()[0].split() == ["ID", "NAME", "GROUP", "CREATED"]
    assert [row[:3] for row in listed.rows] == [
        ["default", "default", "-"], [project.out.strip(), "Research", "lab"]]

    assert admin("user", "create", "--tenant", "acme", "Ada", "--id", "ada").out == "ada\n"
    assert [row[:2] for row in admin("user", "list", "--tenant", "acme").rows] == [["ada", "Ada"]]

    token = admin("token", "create", "--tenant", "acme", "--user", "ada", "--label", "laptop")
    assert token.code == 0
    secret, = token.out.splitlines()  # the secret alone on stdout
    token_id = token.err.split("token id: ")[1].split()[0]
    identity = IdentityService(store.port(IdentityStore))
    assert identity.authenticate(secret) == Principal("acme", "ada")

    tokens = admin("token", "list", "--tenant", "acme", "--user", "ada")
    assert tokens.out.splitlines()[0].split() == ["ID", "ROLE", "LABEL", "CREATED", "REVOKED"]
    assert [(row[0], row[1], row[2], row[4]) for row in tokens.rows] == [
        (token_id, "user", "laptop", "no")]
    stored = store.port(IdentityStore).list_tokens("acme", "ada")[0]
    assert secret not in tokens.out and stored.token_hash not in tokens.out

    revoked = admin("token", "revoke", "--tenant", "acme", token_id)
    assert (revoked.code, revoked.out) == (0, "")
    with pytest.raises(Unauthorized):
        identity.authenticate(secret)
    assert admin("token", "list", "--tenant", "acme", "--user", "ada").rows[0][4] == "yes"

    assert [row[:2] for row in admin("tenant", "list").rows] == [["acme", "Acme"]]


def test_quiet_token_create_prints_only_the_secret(admin, store: Backend) -> None:
    admin("tenant", "create", "Acme", "--id", "acme")
    admin("user", "create", "--tenant", "acme", "Ada", "--id", "ada")
    token = admin("token", "create", "--tenant", "acme", "--user", "ada", "--quiet")
    assert (token.code, token.err) == (0, "")
    assert IdentityService(store.port(IdentityStore)).authenticate(token.out.strip()) == Principal("acme", "ada")


def test_a_token_of_a_role_and_every_write_in_the_audit_log(
        admin, store: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGNAME", "ops-on-call")
    admin("tenant", "create", "Acme", "--id", "acme")
    admin("user", "create", "--tenant", "acme", "Ada", "--id", "ada")
    identity = IdentityService(store.port(IdentityStore))
    for role in ("operator", "platform"):
        secret = admin("token", "create", "--tenant", "acme", "--user", "ada", "--role", role,
                       "-q").out.strip()
        assert identity.authenticate(secret) == Principal("acme", "ada", Role(role))
        assert secret not in admin("audit", "list").out
    with pytest.raises(SystemExit):  # argparse refuses it: nothing ran, nothing recorded
        admin("token", "create", "--tenant", "acme", "--user", "ada", "--role", "root")
    assert admin("token", "revoke", "--tenant", "acme", "tok_missing").code == 2
    admin("token", "list", "--tenant", "acme", "--user", "ada")  # a read: not recorded
    listed = admin("audit", "list", "--tenant", "acme")
    assert listed.out.splitlines()[0].split() == [
        "ID", "AT", "TENANT", "ACTOR", "ACTION", "OUTCOME", "TARGET"]
    assert [row[2:6] for row in listed.rows] == [
        ["acme", "cli:ops-on-call", "token.revoke", "not_found"],
        ["acme", "cli:ops-on-call", "token.create", "ok"],
        ["acme", "cli:ops-on-call", "token.create", "ok"],
        ["acme", "cli:ops-on-call", "user.create", "ok"],
        ["acme", "cli:ops-on-call", "tenant.create", "ok"]]
    assert listed.rows[1][6:] == ["user=ada", "role=platform"]
    first = admin("audit", "list", "--limit", "2")
    assert len(first.rows) == 2 and "--cursor" in first.err
    rest = admin("audit", "list", "--cursor", first.err.split("--cursor ")[1].strip())
    assert [row[0] for row in first.rows + rest.rows] == [row[0] for row in listed.rows]


@pytest.mark.parametrize(("argv", "message"), [
    (("user", "create", "--tenant", "nope", "Bob"), "tenant nope not found"),
    (("project", "create", "--tenant", "nope", "P"), "tenant nope not found"),
    (("user", "list", "--tenant", "nope"), "tenant nope not found"),
    (("token", "create", "--tenant", "acme", "--user", "nobody"), "user nobody not found"),
    (("token", "list", "--tenant", "acme", "--user", "nobody"), "user nobody not found"),
    (("token", "revoke", "--tenant", "acme", "tok_nope"), "token tok_nope not found"),
    (("tenant", "create", "Again", "--id", "acme"), "tenant acme already exists"),
    (("project", "create", "--tenant", "acme", "D", "--id", "default"),
     "project default already exists in tenant acme"),
    (("user", "create", "--tenant", "acme", "Ada 2", "--id", "ada"), "user id ada is taken"),
    (("tenant", "create", "X", "--id", "has space"), "invalid tenant id 'has space'"),
    (("user", "create", "--tenant", "acme", "  "), "user name must not be empty"),
])
def test_bad_input_is_a_one_line_error_with_exit_code_2(admin, argv, message) -> None:
    admin("tenant", "create", "Acme", "--id", "acme")
    admin("user", "create", "--tenant", "acme", "Ada", "--id", "ada")
    failed = admin(*argv)
    assert (failed.code, failed.out) == (2, "")
    assert failed.err.startswith(f"vancetope: {message}") and failed.err.count("\n") == 1


def test_a_foreign_token_cannot_be_revoked(admin, store: Backend) -> None:
    for tenant in ("acme", "globex"):
        admin("tenant", "create", tenant.title(), "--id", tenant)
    admin("user", "create", "--tenant", "acme", "Ada", "--id", "ada")
    secret = admin("token", "create", "--tenant", "acme", "--user", "ada", "-q").out.strip()
    token_id = store.port(IdentityStore).list_tokens("acme", "ada")[0].id
    failed = admin("token", "revoke", "--tenant", "globex", token_id)
    assert (failed.code, failed.err) == (2, f"vancetope: token {token_id} not found\n")
    assert IdentityService(store.port(IdentityStore)).authenticate(secret) == Principal("acme", "ada")


def test_exist_ok_makes_create_rerunnable(admin) -> None:
    for _ in range(2):
        assert admin("tenant", "create", "L", "--id", "local", "--exist-ok", "-q").out == "local\n"
        assert admin("user", "create", "--tenant", "local", "L", "--id", "local",
                     "--exist-ok", "-q").out == "local\n"
    admin("tenant", "create", "Other", "--id", "other")
    taken = admin("user", "create", "--tenant", "other", "L", "--id", "local", "--exist-ok")
    assert (taken.code, taken.err) == (2, "vancetope: user id local is taken\n")


def test_the_installed_command_runs_as_a_subprocess(store_url: str, store: Backend) -> None:
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "vancetope_gateway.cli", "admin", *argv],
                              env=dict(os.environ), capture_output=True, text=True, timeout=60)

    IdentityService(store.port(IdentityStore)).create_tenant("Acme", "acme")
    IdentityService(store.port(IdentityStore)).create_user("acme", "Ada", "ada")
    token = run("token", "create", "--tenant", "acme", "--user", "ada", "--quiet")
    assert token.returncode == 0, token.stderr
    assert IdentityService(store.port(IdentityStore)).authenticate(token.stdout.strip()) == Principal("acme", "ada")
    missing = run("user", "create", "--tenant", "nope", "Bob")
    assert (missing.returncode, missing.stderr) == (2, "vancetope: tenant nope not found\n")


def test_recipe_put_list_show_delete_over_the_cascade(admin, store: Backend,
                                                      tmp_path: Path) -> None:
    admin("tenant", "create", "Acme", "--id", "acme")
    admin("project", "create", "--tenant", "acme", "Papers", "--id", "papers")
    recipe = tmp_path / "analyze.yaml"
    recipe.write_text("name: analyze\nengine: ford\ndescription: Tenant analysis\n"
                      "params: {depth: quick}\n")

    listed = admin("recipe", "list", "--tenant", "acme")
    assert listed.out.splitlines()[0].split() == ["NAME", "ENGINE", "CATEGORY", "SOURCE",
                                                  "DESCRIPTION"]
    assert ["analyze", "ford", "worker", "bundled"] in [row[:4] for row in listed.rows]
    put = admin("recipe", "put", "--tenant", "acme", str(recipe))
    assert (put.code, put.out) == (0, "analyze\n")
    assert "created recipe analyze (engine ford) in tenant acme" in put.err
    recipe.write_text("name: analyze\nengine: ford\ndescription: Project analysis\n")
    assert "created recipe analyze (engine ford) in project papers" in admin(
        "recipe", "put", "--tenant", "acme", "--project", "papers", str(recipe)).err
    assert "replaced recipe analyze" in admin(
        "recipe", "put", "--tenant", "acme", "--project", "papers", str(recipe)).err

    def source(*level: str) -> str:
        rows = admin("recipe", "list", "--tenant", "acme", *level).rows
        return next(row[3] for row in rows if row[0] == "analyze")

    assert (source(), source("--project", "papers"), source("--project", "default")) == (
        "tenant", "project", "tenant")
    shown = admin("recipe", "show", "--tenant", "acme", "--project", "papers", "analyze")
    assert shown.out.startswith("name: analyze\nengine: ford\n")
    assert "description: Project analysis" in shown.out
    assert shown.err == "source: project (overrides tenant, bundled)\n"

    deleted = admin("recipe", "delete", "--tenant", "acme", "--project", "papers", "analyze")
    assert (deleted.code, deleted.out) == (0, "")
    assert source("--project", "papers") == "tenant"
    admin("recipe", "delete", "--tenant", "acme", "analyze", "-q")
    assert source("--project", "papers") == "bundled"
    assert store.port(RecipeStore).list_recipes("acme", None) == []


@pytest.mark.parametrize(("argv", "message"), [
    (("recipe", "delete", "--tenant", "acme", "analyze"),
     "recipe analyze not found in tenant acme"),
    (("recipe", "show", "--tenant", "acme", "analyse"),
     "no recipe named 'analyse'; did you mean 'analyze'?"),
    (("recipe", "list", "--tenant", "nope"), "tenant nope not found"),
    (("recipe", "put", "--tenant", "acme", "--project", "nope", "{file}"),
     "project nope not found"),
    (("recipe", "put", "--tenant", "acme", "{bad}"), "{bad}: allowedToolsAdd.0: Input should"),
    (("recipe", "put", "--tenant", "acme", "missing.yaml"), "cannot read missing.yaml"),
    (("recipe", "put", "--tenant", "acme", "{arthur}"),
     "recipe analyze: engine: no think engine named 'Arthur'; did you mean 'arthur'? "
     "(engines: agrajag, arthur, ford,"),
    (("setting", "set", "--tenant", "acme", "chat.historyLimit", "many"),
     "setting chat.historyLimit takes an int, not 'many'"),
    (("setting", "set", "--tenant", "acme", "chat.histroyLimit", "5"),
     "unknown setting 'chat.histroyLimit'; did you mean 'chat.historyLimit'?"),
    (("setting", "set", "--tenant", "acme", "--user", "bob", "llm.model", "m"),
     "user bob not found"),
    (("setting", "unset", "--tenant", "acme", "llm.model"),
     "setting llm.model is not set for tenant"),
    (("setting", "get", "--tenant", "nope", "llm.model"), "tenant nope not found"),
])
def test_recipe_and_setting_errors_are_one_line(admin, tmp_path: Path, argv, message) -> None:
    admin("tenant", "create", "Acme", "--id", "acme")
    good, bad = tmp_path / "analyze.yaml", tmp_path / "bad.yaml"
    good.write_text("name: analyze\nengine: ford\n")
    bad.write_text("name: analyze\nengine: ford\nallowedToolsAdd: [3]\n")
    arthur = tmp_path / "arthur.yaml"
    arthur.write_text("name: analyze\nengine: Arthur\n")
    argv = tuple(a.format(file=good, bad=bad, arthur=arthur) for a in argv)
    failed = admin(*argv)
    assert (failed.code, failed.out) == (2, "")
    assert failed.err.startswith(f"vancetope: {message.format(bad=bad)}"), failed.err
    assert failed.err.count("\n") == 1


def test_the_operator_grants_engine_roles_with_recipe_put(admin, store: Backend,
                                                          tmp_path: Path) -> None:
    """The admin CLI writes as the operator: a recipe with roles is stored (over the
    protocol, a user's would be refused: tests/gateway/test_recipe_frames.py)."""
    admin("tenant", "create", "Acme", "--id", "acme")
    recipe = tmp_path / "auditor.yaml"
    recipe.write_text("name: auditor\nengine: ford\nroles: [tool-auditor]\n")
    assert admin("recipe", "put", "--tenant", "acme", str(recipe)).code == 0
    assert store.port(RecipeStore).get_recipe("acme", None, "auditor").roles == ["tool-auditor"]


def test_recipe_put_refuses_an_alias_bomb_and_the_tenant_cap(admin, store: Backend,
                                                              tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    from tests.recipes.attacks import BOMB

    admin("tenant", "create", "Acme", "--id", "acme")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    failed = admin("recipe", "put", "--tenant", "acme", str(bomb))
    assert failed.code == 2 and "YAML anchors and aliases (&a) are not allowed" in failed.err
    assert store.port(RecipeStore).list_recipes("acme", None) == []

    monkeypatch.setenv("VANCETOPE_MAX_DEFINITIONS", "1")
    recipe = tmp_path / "one.yaml"
    recipe.write_text("name: one\nengine: ford\n")
    assert admin("recipe", "put", "--tenant", "acme", str(recipe)).code == 0
    assert admin("recipe", "put", "--tenant", "acme", str(recipe)).code == 0  # replaces
    recipe.write_text("name: two\nengine: ford\n")
    failed = admin("recipe", "put", "--tenant", "acme", "--project", "default", str(recipe))
    assert failed.code == 2 and "already has 1 recipe definitions" in failed.err, failed.err
    assert [r.name for r in store.port(RecipeStore).list_recipes("acme", "default")] == []


def test_setting_set_get_unset_list_over_the_cascade(admin, store: Backend) -> None:
    admin("tenant", "create", "Acme", "--id", "acme")
    admin("user", "create", "--tenant", "acme", "Ada", "--id", "ada")
    scope = ("--tenant", "acme", "--project", "default", "--user", "ada")

    got = admin("setting", "get", *scope, "chat.historyLimit")
    assert (got.out, got.err) == ("200\n", "chat.historyLimit: from default\n")
    assert admin("setting", "set", "--tenant", "acme", "chat.historyLimit", "100").code == 0
    done = admin("setting", "set", "--tenant", "acme", "--project", "default",
                 "chat.historyLimit", "50")
    assert (done.out, done.err) == ("", "set chat.historyLimit = 50 for project default of "
                                        "tenant acme\n")
    admin("setting", "set", "--tenant", "acme", "--user", "ada", "notify.quietHours."
          "exceptCritical", "false")
    admin("setting", "set", "--tenant", "acme", "--user", "ada", "arthur.model", "big-model")
    assert admin("setting", "get", *scope, "chat.historyLimit").out == "50\n"
    assert admin("setting", "get", "--tenant", "acme", "chat.historyLimit").out == "100\n"
    got = admin("setting", "get", *scope, "notify.quietHours.exceptCritical")
    assert (got.out, got.err) == ("false\n", "notify.quietHours.exceptCritical: from user ada\n")
    unset = admin("setting", "get", *scope, "llm.model")
    assert (unset.out, unset.err) == ("", "llm.model: from default (unset)\n")

    listed = admin("setting", "list", *scope)
    assert listed.out.splitlines()[0].split() == ["KEY", "VALUE", "SOURCE"]
    rows = {row[0]: row[1:] for row in listed.rows}
    assert rows["chat.historyLimit"] == ["50", "project:default"]
    assert rows["arthur.model"] == ["big-model", "user:ada"]
    assert rows["session.defaultChatEngine"] == ["arthur", "default"]
    assert rows["llm.model"] == ["-", "default"]

    assert admin("setting", "unset", "--tenant", "acme", "--project", "default",
                 "chat.historyLimit", "-q").err == ""
    assert admin("setting", "get", *scope, "chat.historyLimit").out == "100\n"
    with pytest.raises(SystemExit) as refused:  # argparse: one level per write
        admin("setting", "set", "--tenant", "acme", "--project", "p", "--user", "ada",
              "llm.model", "m")
    assert refused.value.code == 2


def test_delivery_list_answers_why_nobody_was_told(admin, store: Backend) -> None:
    from vancetope_brain.models.inbox import (
        Criticality,
        DeliveryStatus,
        NotificationDelivery,
    )

    admin("tenant", "create", "Acme", "--id", "acme")
    for n, (user, channel, status, reason) in enumerate([
            ("ada", "ws", DeliveryStatus.SKIPPED, "no active WebSocket connection"),
            ("ada", "email", DeliveryStatus.SENT, None),
            ("bob", "ws", DeliveryStatus.SENT, None)]):
        store.port(DeliveryStore).add_delivery(NotificationDelivery(
            id=f"dlv_{n}", tenant_id="acme", item_id="item_1" if n < 2 else "item_2",
            user_id=user, channel=channel, status=status, reason=reason,
            criticality=Criticality.NORMAL))
    listed = admin("delivery", "list", "--tenant", "acme", "--item", "item_1")
    assert listed.out.splitlines()[0].split() == [
        "ID", "ITEM", "USER", "CHANNEL", "STATUS", "CREATED", "REASON"]
    assert [(r[0], r[3], r[4], " ".join(r[6:])) for r in listed.rows] == [
        ("dlv_0", "ws", "SKIPPED", "no active WebSocket connection"),
        ("dlv_1", "email", "SENT", "-")]
    assert [r[0] for r in admin("delivery", "list", "--tenant", "acme", "--user",
                                "bob").rows] == ["dlv_2"]
    missing = admin("delivery", "list", "--tenant", "nope")
    assert (missing.code, missing.err.count("\n")) == (2, 1)


def test_dead_letters_are_listed_and_requeued(admin, store: Backend) -> None:
    from vancetope_brain.models import (
        Committed,
        DeadLetter,
        InboxMessage,
        ProcessStatus,
        ThinkProcess,
        TurnCommit,
        TurnRecord,
        UserChatInput,
        utcnow,
    )

    admin("tenant", "create", "Acme", "--id", "acme")
    sessions, lanes = store.port(SessionStore), store.port(LaneStore)
    for pid in ("proc_1", "proc_2"):
        sessions.create_process(ThinkProcess(id=pid, tenant_id="acme", session_id="ses_1",
                                             user_id="ada", name="main", engine="ford",
                                             engine_version="1.0.0"))
    dead = {}
    for pid, text in (("proc_1", "POISON pill"), ("proc_2", "another one")):
        message, _ = lanes.append_message(InboxMessage(
            id=f"msg_{pid}", tenant_id="acme", target_process_id=pid,
            message=UserChatInput(from_user="ada", content=text)))
        for _ in range(3):  # three turns that died with it
            lanes.acquire_epoch("acme", pid, [message.id])
        epoch = lanes.acquire_epoch("acme", pid).epoch
        record = TurnRecord(id=f"turn_{pid}", tenant_id="acme", process_id=pid, epoch=epoch,
                            worker="w", lifecycle="dead-letter", started_at=utcnow(),
                            status_after=ProcessStatus.IDLE)
        assert lanes.commit_turn("acme", pid, epoch, TurnCommit(
            status=ProcessStatus.IDLE, record=record,
            dead_letters={message.id: DeadLetter(reason="died", attempts=3)})) == Committed([], [])
        dead[pid] = message.id

    listed = admin("dead-letter", "list", "--tenant", "acme")
    assert listed.out.splitlines()[0].split() == [
        "ID", "PROCESS", "KIND", "ATTEMPTS", "SET_ASIDE", "CONTENT"]
    assert [(r[0], r[1], r[2], r[3], " ".join(r[5:])) for r in listed.rows] == [
        ("msg_proc_1", "proc_1", "UserChatInput", "3", "POISON pill"),
        ("msg_proc_2", "proc_2", "UserChatInput", "3", "another one")]
    assert [r[0] for r in admin("dead-letter", "list", "--tenant", "acme", "--process",
                                "proc_2").rows] == ["msg_proc_2"]

    requeued = admin("dead-letter", "requeue", "--tenant", "acme", "msg_proc_1")
    assert (requeued.code, requeued.out) == (0, "msg_proc_1\n")
    assert "the sweeper wakes it" in requeued.err
    (back,) = lanes.pending_messages("acme", "proc_1")
    assert (back.id, back.attempts, back.dead_letter) == ("msg_proc_1", 0, None)
    assert [r[0] for r in admin("dead-letter", "list", "--tenant", "acme").rows] == [
        "msg_proc_2"]
    again = admin("dead-letter", "requeue", "--tenant", "acme", "msg_proc_1")
    assert again.code == 2 and "no dead letter msg_proc_1" in again.err
    assert admin("dead-letter", "list", "--tenant", "nope").code == 2


def test_tool_health_is_listed_and_reset(admin, store: Backend,
                                         caplog: pytest.LogCaptureFixture) -> None:
    from vancetope_brain.models.tool_health import HealthCause, HealthState, ToolHealth
    from vancetope_brain.store import ToolHealthStore

    assert admin("tenant", "create", "Acme", "--id", "acme").code == 0
    health = store.port(ToolHealthStore)
    for project, server, tool in (("default", "echo", None), ("default", "echo", "echo__add"),
                                  ("p2", "web", None)):
        health.put_tool_health(ToolHealth(
            tenant_id="acme", project_id=project, server=server, tool=tool,
            state=HealthState.DOWN, cause=HealthCause.UNREACHABLE,
            reason="connect: ConnectError: All connection attempts failed"),
            expected_revision=None)
    listed = admin("tool-health", "list", "--tenant", "acme")
    assert listed.out.split()[:10] == ["PROJECT", "SERVER", "TOOL", "STATE", "CAUSE", "SINCE",
                                       "NEXT_PROBE", "FAILURES", "SOURCE", "REASON"]
    assert [r[:5] for r in listed.rows] == [
        ["default", "echo", "-", "DOWN", "unreachable"],
        ["default", "echo", "echo__add", "DOWN", "unreachable"],
        ["p2", "web", "-", "DOWN", "unreachable"]]
    assert [r[1] for r in admin("tool-health", "list", "--tenant", "acme", "--project",
                                "p2").rows] == ["web"]
    refused = admin("tool-health", "reset", "--tenant", "acme", "--tool", "echo__add")
    assert refused.code == 2 and "--tool needs --server" in refused.err
    one = admin("tool-health", "reset", "--tenant", "acme", "--server", "echo", "--tool",
                "echo__add")
    assert (one.code, one.out.strip()) == (0, "1") and "reset 1 tool-health" in one.err
    assert any("operator reset 1 record" in r.message for r in caplog.records)
    assert admin("tool-health", "reset", "--tenant", "acme", "--project", "p2").out.strip() == "1"
    assert [r[1:3] for r in admin("tool-health", "list", "--tenant", "acme").rows] == [
        ["echo", "-"]]
    assert admin("tool-health", "reset", "-q", "--tenant", "acme").out.strip() == "1"
    assert admin("tool-health", "list", "--tenant", "acme").rows == []
    assert admin("tool-health", "list", "--tenant", "nope").code == 2


def test_purge_shows_then_deletes_what_the_tenants_retention_lets_go(
        admin, store: Backend, store_url: str) -> None:
    import sqlite3
    from datetime import timedelta

    from vancetope_brain.errors import NotFound
    from vancetope_brain.models import (
        ProcessStatus,
        Session,
        SessionStatus,
        ThinkProcess,
        new_id,
        utcnow,
    )
    from vancetope_brain.models.audit import AuditRecord
    from vancetope_brain.models.inbox import Criticality, DeliveryStatus, NotificationDelivery
    from vancetope_brain.store import AuditStore
    from vancetope_brain.store.sql import iso

    admin("tenant", "create", "Acme", "--id", "acme")
    admin("tenant", "create", "Other", "--id", "other")
    for key in ("retention.closedSessionDays", "retention.deliveryLogDays",
                "retention.auditLogDays"):
        assert admin("setting", "set", "--tenant", "acme", key, "30").code == 0
    refused = admin("setting", "set", "--tenant", "acme", "--project", "default",
                    "retention.closedSessionDays", "5")
    assert refused.code == 2 and "applies to the whole tenant" in refused.err
    sessions = store.port(SessionStore)
    made = {}
    for name, tenant in (("old", "acme"), ("recent", "acme"), ("other", "other")):
        session = Session(id=new_id("ses"), tenant_id=tenant, user_id="ada",
                          status=SessionStatus.CLOSED)
        sessions.create_session(session)
        sessions.create_process(ThinkProcess(
            id=new_id("proc"), tenant_id=tenant, session_id=session.id, user_id="ada",
            name="chat", engine="ford", engine_version="1", status=ProcessStatus.CLOSED))
        made[name] = session.id
    long_ago = utcnow() - timedelta(days=40)
    with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
        for table, column in (("sessions", "id"), ("processes", "session_id")):
            conn.execute(f"UPDATE {table} SET doc = json_set(doc, '$.updatedAt', ?), "
                         f"created_ms = created_ms - 40 * 86400000 WHERE {column} IN (?, ?)",
                         (iso(long_ago), made["old"], made["other"]))
    conn.close()
    for tenant, age in (("acme", 40), ("acme", 1), ("other", 40)):
        store.port(DeliveryStore).add_delivery(NotificationDelivery(
            id=new_id("dlv"), tenant_id=tenant, item_id="itm_1", user_id="ada", channel="ws",
            status=DeliveryStatus.SENT, criticality=Criticality.NORMAL,
            created_at=utcnow() - timedelta(days=age)))
    for tenant, age in (("acme", 40), ("other", 40), ("other", 401)):  # other: 400 by default
        store.port(AuditStore).append_audit(AuditRecord(
            id=new_id("aud"), tenant_id=tenant, at=utcnow() - timedelta(days=age),
            actor="cli aged", action="user.create", target="usr_1", outcome="ok"))

    dry = admin("purge", "--dry-run")
    assert dry.code == 0 and dry.out.splitlines()[0].split() == [
        "TENANT", "KIND", "DUE", "OLDEST", "BEFORE"]
    due = {(row[0], row[1]): row[2] for row in dry.rows}
    assert due[("acme", "sessions")] == "1" and due[("acme", "processes")] == "1"
    assert due[("acme", "deliveries")] == "1"
    assert due[("other", "sessions")] == "kept" and due[("other", "deliveries")] == "kept"
    assert due[("acme", "audit")] == "1" and due[("other", "audit")] == "1"
    assert [row[3] for row in dry.rows if row[:2] == ["acme", "sessions"]] == [
        long_ago.strftime("%Y-%m-%dT%H:%M:%SZ")]
    assert sessions.get_session("acme", made["old"])  # a dry run deletes nothing
    assert [r for r in admin("purge", "--dry-run", "--tenant", "other").rows
            if r[0] != "other"] == []

    done = admin("purge")
    assert done.code == 0 and "acme: deleted 1 sessions, 1 processes" in done.err
    assert {row[0]: row[1] for row in done.rows} == {
        "sessions": "1", "processes": "1", "messages": "0", "chat": "0", "turns": "0",
        "timers": "0", "journal": "0", "event_outbox": "0", "deliveries": "1", "audit": "2",
        "turn_inspections": "0", "inspections": "0"}
    with pytest.raises(NotFound):
        sessions.get_session("acme", made["old"])
    assert sessions.get_session("acme", made["recent"]).status is SessionStatus.CLOSED
    assert sessions.get_session("other", made["other"]).status is SessionStatus.CLOSED
    assert len(store.port(DeliveryStore).list_deliveries("acme")) == 1
    assert len(store.port(DeliveryStore).list_deliveries("other")) == 1
    assert [r.at < utcnow() - timedelta(days=30) for r in store.port(AuditStore).list_audit(
        "other") if r.actor == "cli aged"] == [True]  # 40 days old: within other's 400
    again = admin("purge", "--tenant", "acme")
    assert {row[0]: row[1] for row in again.rows}["sessions"] == "0"
    # The two purges are in the audit log; the three dry runs, which wrote nothing, are not.
    purges = [r for r in store.port(AuditStore).list_audit(None) if "purge" in r.action]
    assert [(r.action, r.tenant_id, r.target) for r in purges] == [
        ("purge", "acme", "tenant=acme"), ("purge", "", "")]


def test_migrate_brings_the_store_to_this_servers_schema_and_prints_it(
        admin, store_url: str, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    done = admin("migrate")
    assert (done.code, done.out) == (0, f"{SQLITE_VERSION}\n")
    assert "schema is at version" in done.err
    monkeypatch.setenv("VANCETOPE_STORE_URL", postgres_url)
    done = admin("migrate", "-q")
    assert (done.code, done.out, done.err) == (0, f"{POSTGRES_VERSION}\n", "")


def test_every_writing_command_is_audited_and_every_audited_one_exists() -> None:
    from vancetope_gateway.admin_audit import AUDITED
    from vancetope_gateway.admin_cli import _COMMANDS

    writes = {"create", "revoke", "put", "delete", "requeue", "reset", "add", "rm", "set",
              "unset", "enable", "disable", "rotate-secret", "redeliver", "pause", "resume"}
    assert set(AUDITED) <= set(_COMMANDS)
    assert {key for key in _COMMANDS if key[1] in writes} | {("purge", "")} == set(AUDITED)


def test_an_operator_lists_shows_pauses_resumes_and_deletes_a_tenants_schedules(
        admin, store: Backend) -> None:
    from vancetope_brain.models.schedule import Schedule
    from vancetope_brain.store import AuditStore, ScheduleStore

    assert admin("tenant", "create", "Acme", "--id", "acme", "-q").code == 0
    schedules = store.port(ScheduleStore)
    schedules.put_schedule(Schedule(id="sch_1", tenant_id="acme", project_id="default",
                                    user_id="ada", name="brief", cron="0 7 * * *",
                                    recipe="vogon-cron", next_run_at=None, paused=True))
    listed = admin("schedule", "list", "--tenant", "acme")
    assert listed.rows == [["sch_1", "default", "ada", "0_7_*_*_*", "UTC", "vogon-cron",
                            "paused", "-"]]
    assert admin("schedule", "resume", "--tenant", "acme", "sch_1").code == 0
    resumed = schedules.get_schedule("acme", "sch_1")
    assert not resumed.paused and resumed.next_run_at is not None
    assert resumed.next_run_at.hour == 7 and resumed.next_run_at.minute == 0
    assert "next 20" in admin("schedule", "show", "--tenant", "acme", "sch_1").out
    assert admin("schedule", "pause", "--tenant", "acme", "sch_1").code == 0
    assert schedules.get_schedule("acme", "sch_1").paused
    assert admin("schedule", "list", "--tenant", "globex").code == 2
    assert admin("schedule", "delete", "--tenant", "acme", "sch_missing").code == 2
    assert admin("schedule", "delete", "--tenant", "acme", "sch_1").code == 0
    assert schedules.list_schedules("acme") == []
    actions = [r.action for r in store.port(AuditStore).list_audit("acme")]
    assert {"schedule.resume", "schedule.pause", "schedule.delete"} <= set(actions)
