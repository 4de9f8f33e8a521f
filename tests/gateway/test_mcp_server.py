"""Issue 33 part 4: Vancetope as an MCP server, driven by the official ``mcp`` SDK's client
over Streamable HTTP against a real gateway (served from a thread) and a real embedded Celery
worker: the tools listed, a marvin process started with a goal and its report read when done,
an Inbox question answered over MCP and its process getting the answer, and every refusal
(no token, a bad token, another user's process, a bad argument, the rate limit) with its
stable code (docs/interop.md "MCP server")."""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
import redis
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.engines.test_arthur import call, respond
from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.llm import LlmResponse
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus, SessionStatus, SessionType
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_gateway import mcp_server

TOOLS = {"recipe_list", "process_start", "process_steer", "process_status", "process_stop",
         "session_close", "inbox_list", "inbox_answer"}


@pytest.fixture
def token(emb) -> str:
    """A token of ada, whose minute of MCP requests starts afresh."""
    emb.brain.redis.delete(keys.mcp_requests("acme", "ada"))
    return emb.brain.identity.create_token("acme", "ada", "mcp")[1]


def _run(served: str, token: str | None,
         body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """``body`` with an initialized MCP client session against the served gateway."""
    async def main() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
                streamable_http_client(f"http://{served}/mcp", http_client=http) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            return await body(session)
    try:
        return _in_a_thread(lambda: anyio.run(main))
    except BaseExceptionGroup as group:  # the SDK's task groups wrap what its client raised
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        raise leaf from None


def _in_a_thread(run: Callable[[], Any]) -> Any:
    """``run()`` on a thread of its own (as an MCP client runs in its own process): on an
    xdist worker that ran a browser test first, the main thread holds Playwright's event
    loop, marked running for the rest of the session (its sync API runs the loop in a
    greenlet of the main thread), and ``anyio.run`` there fails (``Runner.run() cannot be
    called from a running event loop``)."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append((True, run()))
        except BaseException as e:  # noqa: BLE001 (handed back to the caller's thread)
            outcome.append((False, e))

    thread = threading.Thread(target=target, name="mcp-client")
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _call(served: str, token: str, name: str, **arguments: Any) -> Any:
    async def body(session: ClientSession) -> Any:
        return await session.call_tool(name, arguments)
    return _run(served, token, body)


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == data
    return data


def _refused(result: Any, code: str) -> str:
    assert result.is_error
    assert result.structured_content["code"] == code, result.structured_content
    message: str = result.structured_content["message"]
    assert result.content[0].text == f"{code}: {message}"
    return message


# ── the acceptance: list, start marvin, read its report ──────────────────────
def test_the_mcp_client_lists_the_tools_starts_marvin_and_reads_its_report(emb, served, token):
    emb.model = DemoModel()

    async def body(session: ClientSession) -> dict[str, Any]:
        listed = await session.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        start = next(t for t in listed.tools if t.name == "process_start")
        assert start.input_schema["required"] == ["recipe", "goal"]
        recipes = _ok(await session.call_tool("recipe_list", {}))["recipes"]
        assert {"marvin", "vogon", "zaphod", "ford"} <= {r["name"] for r in recipes}
        assert "arthur" not in {r["name"] for r in recipes}  # a chat recipe
        started = _ok(await session.call_tool(
            "process_start", {"recipe": "marvin", "goal": "Compare three databases"}))
        with anyio.fail_after(30):
            while not (status := _ok(await session.call_tool(
                    "process_status", {"process_id": started["processId"]})))["done"]:
                await anyio.sleep(0.1)
        return {"started": started, "status": status}

    found = _run(served, token, body)
    started, status = found["started"], found["status"]
    session = emb.brain.sessions.get(emb.who, started["sessionId"])
    assert session.type is SessionType.AUTONOMOUS and session.chat_process_id is None
    assert (status["status"], status["closeReason"], status["recipe"]) == (
        "CLOSED", "DONE", "marvin")
    report = status["report"]
    assert report["event"] == "done" and "Compare three databases" in report["summary"]
    assert report["data"]["result"] and report["data"]["tree"]
    assert status["chat"][-1]["role"] == "assistant"

    # The session is the caller's to close (sessions that are not CLOSED count).
    closed = _ok(_call(served, token, "session_close", session_id=started["sessionId"]))
    assert closed["status"] == "CLOSED"
    assert emb.brain.sessions.get(emb.who, started["sessionId"]).status is SessionStatus.CLOSED


# ── the Inbox: a question a process posts, answered over MCP ─────────────────
ASKER = """
name: mcp-asker
engine: ford
category: worker
description: A worker that asks the user through the Inbox.
allowedToolsAdd: [inbox_post]
"""


def _asking_worker(messages, tools):
    """Posts the question in its goal, then reports the answer it got."""
    last = messages[-1]
    if "<inbox-answer" in last.content:
        return respond("answer: " + last.content.split(">", 1)[1].split("</", 1)[0])
    if last.role == "tool":
        return respond("asked")
    goal = json.loads(next(m.content for m in messages if m.role == "user"))
    return LlmResponse("", (call("inbox_post", **goal),))


def test_an_inbox_question_is_listed_and_answered_over_mcp_and_the_process_gets_it(
        emb, served, token):
    emb.brain.recipe_admin.put("acme", None, parse_recipe(ASKER, "mcp-asker"))
    emb.model = FunctionModel(_asking_worker)
    question = {"type": "DECISION", "title": "Which baseline for MCP?",
                "payload": {"options": [{"value": "v2017", "label": "Vaswani 2017"},
                                        {"value": "d2019", "label": "Devlin 2019"}]}}
    try:
        started = _ok(_call(served, token, "process_start", recipe="mcp-asker",
                            goal=json.dumps(question)))
        pid = started["processId"]
        wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status
                 is ProcessStatus.BLOCKED, timeout=15)
        listed = _ok(_call(served, token, "inbox_list", status=["PENDING"]))
        [item] = [i for i in listed["items"] if i["originProcessId"] == pid]
        assert item["title"] == "Which baseline for MCP?" and listed["pending"]["totalPending"]
        # A wrong value is the service's refusal, with its code.
        _refused(_call(served, token, "inbox_answer", item_id=item["id"], outcome="DECIDED",
                       value={"chosen": "nope"}), "invalid_input")
        answered = _ok(_call(served, token, "inbox_answer", item_id=item["id"],
                             outcome="DECIDED", value={"chosen": "d2019"}))
        assert answered["item"]["status"] == "ANSWERED"
        wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status
                 is ProcessStatus.CLOSED, timeout=15)
        status = _ok(_call(served, token, "process_status", process_id=pid))
        assert status["report"]["event"] == "done"
        assert '"chosen": "d2019"' in status["report"]["summary"]
    finally:
        emb.brain.recipe_admin.delete("acme", None, "mcp-asker")


def test_a_process_is_steered_and_stopped_over_mcp(emb, served, token):
    seen: list[str] = []

    def worker(messages, tools):
        seen.append(messages[-1].content)
        return respond(f"heard {len(seen)}", awaiting=True)

    emb.model = FunctionModel(worker)
    started = _ok(_call(served, token, "process_start", recipe="ford", goal="Wait for me"))
    pid = started["processId"]
    wait_for(lambda: len(seen) == 1, timeout=15)
    steered = _ok(_call(served, token, "process_steer", process_id=pid, message="Go on"))
    assert steered["messageId"].startswith("msg")
    wait_for(lambda: "Go on" in seen[-1], timeout=15)
    status = _ok(_call(served, token, "process_status", process_id=pid, chat_lines=2))
    assert [line["content"] for line in status["chat"]][-1].startswith("heard")
    _ok(_call(served, token, "process_stop", process_id=pid))
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).close_reason is not None,
             timeout=15)
    status = _ok(_call(served, token, "process_status", process_id=pid, chat_lines=0))
    assert (status["status"], status["closeReason"], status["chat"]) == (
        "CLOSED", "STOPPED", [])
    _ok(_call(served, token, "session_close", session_id=started["sessionId"]))


# ── refusals ─────────────────────────────────────────────────────────────────
def _raw(served: str, token: str | None) -> tuple[int, dict[str, Any], dict[str, str]]:
    """A ``tools/list`` POSTed by hand: status, JSON body, headers."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               **({"Authorization": f"Bearer {token}"} if token is not None else {})}
    request = urllib.request.Request(f"http://{served}/mcp", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


@pytest.mark.parametrize("bad", [None, "vt_not-a-token"])
def test_no_token_or_a_bad_one_is_401_as_a_json_rpc_error(served, bad):
    status, body, headers = _raw(served, bad)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    assert body["error"]["code"] == mcp_server.PROTOCOL_ERROR
    assert body["error"]["data"] == {"code": "unauthorized", "status": 401}

    with pytest.raises(MCPError) as refused:  # the SDK's client surfaces it as MCPError
        _run(served, bad, lambda session: session.list_tools())
    assert refused.value.error.data["code"] == "unauthorized"


def test_another_users_process_and_session_look_missing(emb, served, token):
    emb.brain.identity.create_user("acme", "bob", "bob")
    bob = emb.brain.identity.create_token("acme", "bob", "mcp")[1]
    emb.model = FunctionModel(lambda messages, tools: respond("done"))
    started = _ok(_call(served, token, "process_start", recipe="ford", goal="Mine"))
    pid = started["processId"]
    for name, arguments in (("process_status", {"process_id": pid}),
                            ("process_steer", {"process_id": pid, "message": "hi"}),
                            ("process_stop", {"process_id": pid}),
                            ("session_close", {"session_id": started["sessionId"]}),
                            ("process_start", {"recipe": "ford", "goal": "x",
                                               "session_id": started["sessionId"]})):
        _refused(_call(served, bob, name, **arguments), "not_found")
    assert emb.brain.sessions.get(emb.who, started["sessionId"]).status is SessionStatus.OPEN
    _ok(_call(served, token, "session_close", session_id=started["sessionId"]))


def test_bad_arguments_and_unknown_names_are_tool_errors_with_a_stable_code(served, token):
    async def body(session: ClientSession) -> list[Any]:
        return [await session.call_tool("process_start", {"recipe": "marvin"}),  # no goal
                await session.call_tool("process_status", {"process_id": 7}),
                await session.call_tool("process_status", {"process_id": "x",
                                                           "chat_lines": 500}),
                await session.call_tool("process_start", {"recipe": "arthur", "goal": "g"}),
                await session.call_tool("process_start", {"recipe": "marvin", "goal": "g",
                                                           "project": "nowhere"}),
                await session.call_tool("inbox_answer", {"item_id": "x", "outcome": "MAYBE"}),
                await session.call_tool("no_such_tool", {})]

    missing_goal, wrong_type, too_many, chat_recipe, no_project, bad_enum, unknown = \
        _run(served, token, body)
    assert "goal" in _refused(missing_goal, "invalid_input")
    assert "process_id" in _refused(wrong_type, "invalid_input")
    assert "chat_lines" in _refused(too_many, "invalid_input")
    assert "recipe_list" in _refused(chat_recipe, "not_found")
    _refused(no_project, "not_found")
    assert "outcome" in _refused(bad_enum, "invalid_input")
    assert "no_such_tool" in _refused(unknown, "not_found")


def test_over_the_rate_limit_is_429_rate_limited(emb, served, token, monkeypatch):
    monkeypatch.setattr(mcp_server, "REQUESTS_PER_MINUTE", 3)
    for _ in range(3):
        assert _raw(served, token)[0] == 200
    status, body, _ = _raw(served, token)
    assert status == 429 and body["error"]["data"] == {"code": "rate_limited", "status": 429}
    with pytest.raises(MCPError) as refused:
        _run(served, token, lambda session: session.list_tools())
    assert refused.value.error.data["code"] == "rate_limited"


def test_requests_under_way_are_capped_per_user(emb, served, token, monkeypatch):
    """The user's cap on requests under way: with it full, the next is 429
    ``limit_exceeded``; once they end, requests pass again. (The cap is lowered once the two
    held calls are inside: a request's slot is freed after its response is sent, so a
    client's next request may briefly meet its previous one still counted; and it is raised
    back before the held calls are let go, because the SDK's ``call_tool`` follows its
    result with a ``tools/list`` of its own, which a cap of 2 could refuse while the other
    held call still counts — a 429 the client reads as a closed connection.)"""
    release, inside = threading.Event(), threading.Semaphore(0)
    cap = mcp_server.MAX_CALLS_PER_USER
    real = emb.brain.recipes.list

    def held(*args, **kwargs):
        inside.release()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(emb.brain.recipes, "list", held)
    results: list[Any] = []
    callers = [threading.Thread(target=lambda: results.append(
        _call(served, token, "recipe_list"))) for _ in range(2)]
    for caller in callers:
        caller.start()
    try:
        assert inside.acquire(timeout=10) and inside.acquire(timeout=10)
        monkeypatch.setattr(mcp_server, "MAX_CALLS_PER_USER", 2)
        status, body, _ = _raw(served, token)
        assert status == 429 and body["error"]["data"]["code"] == "limit_exceeded"
    finally:
        monkeypatch.setattr(mcp_server, "MAX_CALLS_PER_USER", cap)
        release.set()
        for caller in callers:
            caller.join(10)
    assert len(results) == 2 and all(not r.is_error for r in results)
    wait_for(lambda: _raw(served, token)[0] == 200, timeout=10)


def test_building_the_server_leaves_the_root_logger_as_it_was(monkeypatch):
    """The SDK's constructor would install rich's handler on a root logger without one."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", logging.WARNING)
    mcp_server.build_server()
    assert root.handlers == [] and root.level == logging.WARNING


def test_a_failure_below_a_tool_tells_its_code_and_nothing_of_our_internals(
        emb, served, token, monkeypatch):
    def down(*args, **kwargs):
        raise redis.ConnectionError("redis://10.0.0.7:6379 refused")

    monkeypatch.setattr(emb.brain.sessions, "process", down)
    message = _refused(_call(served, token, "process_status", process_id="p1"),
                       "runtime_failure")
    assert message == "the server failed to answer; try again in a moment"
