"""The ``usage`` frame over a real OpenAI-compatible endpoint (issue 32, part 3): what the
fake server reports for a turn's completions is what the caller's usage shows, summed per
model and priced by the tenant's ``llm.prices``; a model that reports nothing is counted
from the characters, and says so."""

from __future__ import annotations

import json

import pytest

from tests.gateway.test_streamed_respond import _events_until_reply
from tests.gateway.wire import REFUSAL, SUCCESS, covers
from tests.llm.fake_openai_server import Call, FakeOpenAiServer, Text, ToolCalls
from vancetope_brain.errors import VancetopeError
from vancetope_brain.identity import Principal
from vancetope_brain.llm.openai_provider import OpenAiChatModel
from vancetope_brain.models import utcnow
from vancetope_brain.models.settings import SettingScope
from vancetope_gateway.chat_client import ChatClient

PRICES = {"fake-model": {"in": 2.0, "out": 8.0}}


@pytest.fixture
def terminal(emb, served):
    client = ChatClient(f"ws://{served}/ws", emb.brain.identity.issue_token("acme", "ada"))
    yield client
    client.close()


@pytest.fixture
def prices(emb):
    emb.brain.settings.set("acme", SettingScope.tenant(), "llm.prices", PRICES)
    yield
    emb.brain.settings.unset("acme", SettingScope.tenant(), "llm.prices")


def _turn(emb, terminal, *replies) -> str:
    """A session whose chat answers ``hello`` with the scripted replies; its id."""
    with FakeOpenAiServer() as server:
        server.script(*replies)
        emb.model = OpenAiChatModel("fake-model", api_key="sk-fake-0123456789",
                                    base_url=server.base_url, max_retries=0, timeout=5)
        created = terminal.request("session-create", title="usage")
        terminal.request("process-steer", targetThinkProcessId=created["chatProcessId"],
                         content="hello")
        _events_until_reply(terminal, created["chatProcessId"], "hello")
        assert len(server.requests) == len(replies)
    return created["session"]["id"]


def test_the_usage_the_endpoint_reports_is_the_usage_shown_and_priced(emb, terminal, prices):
    before = terminal.request("usage")["thisMonth"]
    respond = json.dumps({"message": "Hi Ada.", "awaiting_user_input": False})
    session_id = _turn(emb, terminal,
                       Text("Plain text first.", usage={"prompt_tokens": 1200,
                                                        "completion_tokens": 40}),
                       ToolCalls((Call("c1", "respond", respond),),
                                 usage={"prompt_tokens": 1300, "completion_tokens": 60}))
    report = terminal.request("usage", sessionId=session_id)
    cost = (2500 * 2.0 + 100 * 8.0) / 1_000_000
    model = {"model": "fake-model", "tokensIn": 2500, "tokensOut": 100, "calls": 2,
             "estimatedCalls": 0, "cost": pytest.approx(cost)}
    assert report["session"] == {"tokensIn": 2500, "tokensOut": 100, "calls": 2,
                                 "cost": pytest.approx(cost), "models": [model]}
    month = report["thisMonth"]
    assert (month["tokensIn"], month["tokensOut"], month["calls"]) == (
        before["tokensIn"] + 2500, before["tokensOut"] + 100, before["calls"] + 2)
    assert report["month"] == f"{utcnow():%Y-%m}"


def test_a_model_that_reports_no_usage_is_counted_from_the_characters(emb, terminal):
    respond = json.dumps({"message": "Hi.", "awaiting_user_input": False})
    session_id = _turn(emb, terminal, Text("Plain."),
                       ToolCalls((Call("c1", "respond", respond),)))
    report = terminal.request("usage", sessionId=session_id)["session"]
    (model,) = report["models"]
    assert (model["calls"], model["estimatedCalls"], model["cost"]) == (2, 2, None)
    assert model["tokensIn"] > 100 and 0 < model["tokensOut"] < 30


def test_another_users_session_reads_as_missing(emb, terminal):
    emb.brain.identity.create_user("acme", "bob", "bob")
    theirs = emb.brain.sessions.create(Principal("acme", "bob"))
    with pytest.raises(VancetopeError) as refused:
        terminal.request("usage", sessionId=theirs.id)
    assert refused.value.code == "not_found"


@covers("usage", SUCCESS, REFUSAL)
def test_usage_frame_answers_the_callers_month_and_refuses_bad_input(emb, client):
    created = client.ok("session-create", title="usage frame")
    report = client.ok("usage", sessionId=created["session"]["id"])
    assert report["month"] == f"{utcnow():%Y-%m}"
    assert report["session"] == {"tokensIn": 0, "tokensOut": 0, "calls": 0, "cost": None,
                                 "models": []}
    assert client.ok("usage")["session"] is None
    client.refused("usage", "invalid_input", sessionId="")
    client.refused("usage", "invalid_input", sessionId="s" * 65)
    client.refused("usage", "not_found", sessionId="ses_missing")
