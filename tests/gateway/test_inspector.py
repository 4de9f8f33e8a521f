"""The inspector's doors (issue 32, part 2) on a real turn: Arthur, on the scripted demo
model, delegates a piece of work; the turn that did it shows its exact model input (system
prompt, messages, tools offered), its output and its tool call with arguments, result and
outcome — through the ``turn-list`` / ``turn-get`` frames, ``vancetope admin inspect`` and
the ``/admin/`` route. The chat line the turn wrote names it (``meta.turn``). An API key set
in an LLM profile never appears, even where the user typed it into the chat."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Embedded
from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers
from tests.helpers import inspected, server_env, wait_for
from vancetope_brain.identity import Principal
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.models import ChatRole, Role
from vancetope_brain.models.inspector import REDACTED, TURN_META
from vancetope_brain.store import LaneStore, SessionStore
from vancetope_gateway.app import create_app
from vancetope_gateway.cli import main

KEY = "profile-key-SECRET-7731"
"""The API key of the profile ``strong`` (also in ``tests/log_secrets.py``'s known secrets)."""
DATA: dict[str, Path] = {}
"""The embedded shape's data directory (its SQLite store), for the admin CLI."""
ASKED = f"Please analyze the quarterly numbers (the vendor key is {KEY})"


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    """The embedded shape whose workers know the LLM profile ``strong`` and its key."""
    data = tmp_path_factory.mktemp("inspector")
    profiles = data / "profiles.yaml"
    profiles.write_text("profiles:\n  strong:\n    baseUrl: http://127.0.0.1:9/v1\n"
                        "    model: strong-model\n    apiKeyEnv: VT_INSPECTOR_TEST_KEY\n")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VT_INSPECTOR_TEST_KEY", KEY)
        emb = Embedded(data / "run", VANCETOPE_LLM_PROFILES=str(profiles))
        DATA["dir"] = data / "run"
        yield emb
        emb.stop()


@pytest.fixture(scope="module")
def delegated(embedded: Embedded) -> dict[str, Any]:
    """Arthur's turn that started a worker: the process, the turn's id, the worker's id."""
    embedded.model = DemoModel()
    session = embedded.brain.sessions.create(embedded.who)
    pid = session.chat_process_id
    embedded.brain.sessions.steer(embedded.who, pid, ASKED)
    lanes = embedded.brain.store.port(LaneStore)

    def started() -> list[Any]:
        return [m for m in lanes.chat_history("acme", pid) if m.role is ChatRole.ASSISTANT
                and m.content.startswith("I started a worker")]

    [line] = wait_for(started, timeout=20, what="Arthur starting a worker")
    inspected(embedded.brain.store, "acme", line.meta[TURN_META])  # written after the commit
    worker = next(p for p in embedded.brain.store.port(SessionStore).list_processes(
        "acme", session.id) if p.name == "demo-worker")
    return {"process": pid, "turn": line.meta[TURN_META], "worker": worker.id,
            "session": session.id}


@pytest.fixture
def client(embedded: Embedded) -> Iterator[Client]:
    c = Client(embedded, embedded.who)
    yield c
    c.close()


def _check_turn(turn: dict[str, Any], delegated: dict[str, Any]) -> None:
    """The delegating turn as every door shows it."""
    assert turn["id"] == delegated["turn"] and turn["processId"] == delegated["process"]
    assert turn["engine"] == "arthur" and turn["lifecycle"] == "steer"
    model = next(s for s in turn["steps"] if s["kind"] == "model")
    system, *rest = model["messages"]
    assert "tool" not in [m["role"] for m in rest]  # as it was sent: before the call ran
    assert system["role"] == "system" and "Arthur" in system["content"]
    asked = [m["content"] for m in rest if m["role"] == "user"]
    assert asked and asked[-1] == ASKED.replace(KEY, REDACTED)
    assert "process_create" in model["tools"]
    assert "process_create" in [t["name"] for t in turn["tools"]]
    [call] = model["output"]["toolCalls"]
    assert call["name"] == "process_create"
    assert json.loads(call["arguments"])["recipe"] == "analyze"
    tool = next(s for s in turn["steps"] if s["kind"] == "tool")
    assert (tool["name"], tool["outcome"]) == ("process_create", "SUCCESS")
    assert json.loads(tool["arguments"])["recipe"] == "analyze"
    assert delegated["worker"] in tool["result"]
    assert model["tokensIn"] > 0 and turn["tokensIn"] >= model["tokensIn"]
    assert delegated["turn"] and KEY not in json.dumps(turn)


@covers("turn-list", SUCCESS)
@covers("turn-get", SUCCESS)
def test_the_owner_sees_the_delegating_turn_through_the_frames(client, delegated):
    listed = client.ok("turn-list", processId=delegated["process"])
    assert delegated["turn"] in [t["id"] for t in listed["turns"]]
    assert all(t["steps"] == [] and t["tools"] == [] for t in listed["turns"])
    history = client.ok("chat-history", processId=delegated["process"])
    line = next(m for m in history["messages"] if m["content"].startswith("I started a worker"))
    assert line["meta"][TURN_META] == delegated["turn"]  # the chat line's link to its turn
    turn = client.ok("turn-get", turnId=delegated["turn"])["turn"]
    _check_turn(turn, delegated)
    assert line["id"] in turn["chatIds"]
    # The worker's own turns are inspectable too, the key redacted in its goal.
    worker = wait_for(lambda: client.ok("turn-list", processId=delegated["worker"])["turns"],
                      what="a turn of the worker")
    assert KEY not in json.dumps(client.ok("turn-get", turnId=worker[-1]["id"]))


def test_turns_page_newest_first(client, delegated):
    everything = client.ok("turn-list", processId=delegated["process"], limit=100)["turns"]
    first = client.ok("turn-list", processId=delegated["process"], limit=1)
    assert [t["id"] for t in first["turns"]] == [everything[0]["id"]]
    if len(everything) > 1:
        rest = client.ok("turn-list", processId=delegated["process"], limit=100,
                         cursor=first["nextCursor"])
        assert [t["id"] for t in first["turns"] + rest["turns"]] == \
            [t["id"] for t in everything]
    started = [t["startedAt"] for t in everything]
    assert started == sorted(started, reverse=True)


@covers("turn-list", REFUSAL)
@covers("turn-get", REFUSAL)
def test_another_users_turns_read_as_missing(embedded, client, delegated):
    embedded.brain.identity.create_user("acme", "bob", "bob")
    bob = Client(embedded, Principal("acme", "bob"))
    try:
        bob.refused("turn-list", "not_found", processId=delegated["process"])
        assert bob.refused("turn-get", "not_found", turnId=delegated["turn"]) == \
            f"turn {delegated['turn']} not found"
    finally:
        bob.close()
    client.refused("turn-get", "not_found", turnId="turn_missing")
    client.refused("turn-list", "invalid_input", processId=delegated["process"], cursor="x")
    client.refused("turn-list", "invalid_input", processId=delegated["process"], limit=101)


def test_an_operator_sees_it_through_the_admin_route(embedded, delegated):
    operator = embedded.brain.identity.create_token("acme", "ada", role=Role.OPERATOR)[1]
    http = create_app(embedded.brain, llm_description="test").test_client()
    auth = {"Authorization": f"Bearer {operator}"}
    listed = http.get(f"/admin/tenants/acme/processes/{delegated['process']}/turns",
                      headers=auth)
    assert listed.status_code == 200
    assert delegated["turn"] in [t["id"] for t in listed.get_json()["turns"]]
    got = http.get(f"/admin/tenants/acme/turns/{delegated['turn']}", headers=auth)
    assert got.status_code == 200
    _check_turn(got.get_json()["turn"], delegated)


def test_the_admin_cli_inspects_the_process_and_the_turn(embedded, delegated, capsys,
                                                         monkeypatch):
    for name, value in server_env(DATA["dir"]).items():
        monkeypatch.setenv(name, value)
    assert main(["admin", "inspect", delegated["process"], "--tenant", "acme"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["TURN", "STARTED", "LIFECYCLE"]
    assert delegated["turn"] in [row.split()[0] for row in table[1:]]
    assert main(["admin", "inspect", delegated["process"], delegated["turn"], "--tenant",
                 "acme"]) == 0
    shown = capsys.readouterr().out
    assert f"turn {delegated['turn']} of process {delegated['process']}" in shown
    assert "tools offered: " in shown and "process_create" in shown
    assert "    system:" in shown and ASKED.replace(KEY, REDACTED) in shown
    assert "tool process_create at +" in shown and ": SUCCESS" in shown
    assert KEY not in shown
    assert main(["admin", "inspect", delegated["process"], delegated["turn"], "--tenant",
                 "acme", "--json"]) == 0
    _check_turn(json.loads(capsys.readouterr().out), delegated)
