"""agrajag in the embedded shape: a real in-process Celery worker, the real echo MCP server
(stdio), the offline demo model or a scripted one. The checker's hook
(``ServiceJobs.on_ambiguous``) is called directly here; the acceptance flow through a user's
failing tool call, with worker processes, is tests/integration/test_agrajag_flow.py.
"""

from __future__ import annotations

import json
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from tests.conftest import Embedded
from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.errors import Conflict, LimitExceeded, NotFound
from vancetope_brain.llm import LlmResponse, ToolCall
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, SessionStatus, utcnow
from vancetope_brain.models.tool_health import HealthSource, HealthState
from vancetope_brain.services import SYSTEM_USER, ServiceJob
from vancetope_brain.services.jobs import QUEUED
from vancetope_brain.store import LaneStore, SessionStore, ToolHealthStore
from vancetope_brain.store.sessions import every_session
from vancetope_brain.tools.health import AmbiguousToolError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def emb(tmp_path_factory):
    data = tmp_path_factory.mktemp("agrajag")
    servers = data / "mcp.json"
    servers.write_text(json.dumps([{"name": "echo", "transport": "stdio",
                                    "command": sys.executable,
                                    "args": ["-m", "tests.tools.mcp_echo_server"],
                                    "cwd": str(ROOT)}]))
    embedded = Embedded(data / "data", VANCETOPE_MCP_SERVERS=str(servers))
    yield embedded
    embedded.stop()


def failure(emb, session_id: str, tool: str) -> AmbiguousToolError:
    return AmbiguousToolError(tenant_id="acme", project_id="default", user_id="ada",
                              session_id=session_id, process_id="proc_x", server="echo",
                              tool=tool, step="call", error="echo: something odd happened",
                              at=utcnow())


def agrajags(emb, tool: str):
    sessions = emb.brain.store.port(SessionStore)
    return [p for s in every_session(sessions, "acme", SYSTEM_USER)
            for p in sessions.list_processes("acme", s.id) if p.engine_params.get("tool") == tool]


def closed(emb, process_id: str):
    return wait_for(lambda: (p := emb.brain.store.port(SessionStore).get_process(
        "acme", process_id)).status is ProcessStatus.CLOSED and p, timeout=60,
        what="agrajag closed")


def test_the_demo_model_diagnoses_once_however_many_failures_come_at_once(emb):
    emb.model = DemoModel()
    user_session = emb.brain.sessions.create(emb.who)
    hits = [threading.Thread(target=emb.worker_parts.services.on_ambiguous,
                             args=(failure(emb, user_session.id, "echo__fail"),))
            for _ in range(8)]
    for hit in hits:
        hit.start()
    for hit in hits:
        hit.join()
    process = wait_for(lambda: agrajags(emb, "echo__fail"), what="an agrajag process")[0]
    done = closed(emb, process.id)
    assert len(agrajags(emb, "echo__fail")) == 1  # the other seven folded into it
    assert (done.close_reason, done.user_id, done.originating_user_id,
            done.originating_session_id) == (CloseReason.DONE, SYSTEM_USER, "ada",
                                             user_session.id)
    health = emb.brain.store.port(ToolHealthStore).get_tool_health(
        "acme", "default", "echo", "echo__fail")
    assert health is not None
    assert (health.state, health.source) == (HealthState.DEGRADED, HealthSource.AGRAJAG)
    assert "answers probes" in health.reason
    chat = emb.brain.store.port(LaneStore).chat_history("acme", done.id)
    assert any(line.role is ChatRole.TOOL and line.content.startswith("tool_probe(")
               and "echo__echo" in line.content and line.meta["status"] == "success" for line in chat)

    # The system session: hidden from the user, listed for operators, the lifecycle of the
    # recipe's systemSession.
    system = emb.brain.store.port(SessionStore).get_session("acme", done.session_id)
    assert (system.system, system.user_id, system.title, system.idle_timeout_sec) == (
        True, SYSTEM_USER, "_agrajag", 300)
    assert system.id not in {s.id for s in emb.brain.sessions.list_sessions(emb.who).sessions}
    # While the verdict holds (its nextProbeAt is ahead), the same failure is not diagnosed
    # again; once it is gone (an operator reset it), the next failure is, in the same session.
    assert health.next_probe_at is not None and health.next_probe_at > utcnow()
    emb.worker_parts.services.on_ambiguous(failure(emb, user_session.id, "echo__fail"))
    claim = emb.worker_parts.redis.get(keys.service_job("acme", "default", "agrajag",
                                                        "echo__fail"))
    assert claim in (None, done.id.encode())  # nothing was queued: no "queued", no new id
    emb.brain.store.port(ToolHealthStore).reset_tool_health("acme", "default", "echo",
                                                            "echo__fail")
    emb.worker_parts.services.on_ambiguous(failure(emb, user_session.id, "echo__fail"))
    again = wait_for(lambda: len(agrajags(emb, "echo__fail")) == 2 and agrajags(emb, "echo__fail"))
    assert {p.session_id for p in again} == {system.id}
    closed(emb, again[-1].id)


def test_a_mutating_probe_is_refused_by_the_dispatcher_not_by_the_prompt(emb):
    steps: list[list[str]] = []

    def agrajag(messages, tools):
        steps.append(sorted(t.name for t in tools))
        names = {t.name for t in tools}
        if "tool_health_write" in names:
            return LlmResponse("", (ToolCall("v", "tool_health_write", json.dumps({
                "server": "echo", "tool": "echo__add", "state": "DOWN",
                "reason": "scripted verdict", "recheckAfterSec": 60})),))
        done = [m for m in messages if m.role == "tool"]
        if not done:  # echo__add is MUTATING on the test server: refused
            return LlmResponse("", (ToolCall("p1", "tool_probe", json.dumps(
                {"tool": "echo__add", "arguments": {"a": 1, "b": 2}})),))
        if len(done) == 1:  # a direct call of it, past tool_probe, is refused as well
            return LlmResponse("", (ToolCall("p2", "echo__add", json.dumps({"a": 1, "b": 2})),))
        return LlmResponse("", (ToolCall("r", "respond", json.dumps(
            {"message": "add refused, as it should be"})),))

    emb.model = FunctionModel(agrajag)
    user_session = emb.brain.sessions.create(emb.who)
    emb.worker_parts.services.on_ambiguous(failure(emb, user_session.id, "echo__add"))
    done = closed(emb, wait_for(lambda: agrajags(emb, "echo__add"))[0].id)
    assert done.close_reason is CloseReason.DONE
    tool_lines = [line for line in emb.brain.store.port(LaneStore).chat_history(
        "acme", done.id) if line.role is ChatRole.TOOL]
    assert [line.meta["status"] for line in tool_lines] == ["error", "error"]
    assert "MUTATING and was not called" in tool_lines[0].content
    assert "MUTATING and was not called" in tool_lines[1].content
    # While probing, only SAFE_PROBE tools are offered (no tool_health_write, no echo__add).
    assert steps[0] == ["respond", "tool_probe", "tool_probe_as_user"]
    health = emb.brain.store.port(ToolHealthStore).get_tool_health(
        "acme", "default", "echo", "echo__add")
    assert health is not None and (health.state, health.reason) == (HealthState.DOWN,
                                                                     "scripted verdict")


def test_a_user_cannot_start_a_service_recipe_and_never_lists_service_processes(emb):
    session = emb.brain.sessions.create(emb.who)
    with pytest.raises(Conflict, match="service recipe; only the system starts it"):
        emb.brain.sessions.create_process(emb.who, session.id, recipe="agrajag")
    if not agrajags(emb, "echo__fail"):  # (the first test leaves one; run alone, start one)
        emb.model = DemoModel()
        emb.worker_parts.services.on_ambiguous(failure(emb, session.id, "echo__fail"))
    process = wait_for(lambda: agrajags(emb, "echo__fail"), what="an agrajag process")[0]
    closed(emb, process.id)
    with pytest.raises(Exception, match="no process"):
        emb.brain.sessions.process(emb.who, process.id)


def test_the_demo_user_worker_meets_the_failure_and_agrajag_follows(emb):
    """What `vancetope serve` without an API key does: a demo worker told to call the
    unclassifiable tool fails through the health checker, whose hook starts agrajag."""
    from vancetope_brain.recipes.loader import parse_recipe

    emb.model = DemoModel()
    emb.brain.recipe_admin.put("acme", None, parse_recipe(
        "name: echo-worker\nengine: ford\ncategory: worker\ndescription: echo tools\n"
        "allowedToolsAdd: ['echo__*']\n", "echo-worker"))
    before = {p.id for p in agrajags(emb, "echo__fail")}
    emb.brain.store.port(ToolHealthStore).reset_tool_health("acme", "default", "echo",
                                                            "echo__fail")  # earlier verdicts
    session = emb.brain.sessions.create(emb.who)
    user = emb.brain.sessions.create_process(emb.who, session.id, recipe="echo-worker",
                                             goal="call echo__fail")
    assert "this tool always fails" in closed(emb, user.id).engine_state["lastReply"]
    new = wait_for(lambda: [p for p in agrajags(emb, "echo__fail") if p.id not in before],
                   what="agrajag for the demo's failure")
    assert closed(emb, new[0].id).close_reason is CloseReason.DONE
    assert new[0].originating_session_id == session.id


def test_agrajag_on_the_openai_client_against_the_fake_server(emb):
    from tests.llm.fake_openai_server import Call, FakeOpenAiServer, ToolCalls
    from vancetope_brain.llm.openai_provider import OpenAiChatModel

    probe = json.dumps({"tool": "echo__echo", "arguments": {"text": "ping"}})
    verdict = json.dumps({"server": "echo", "tool": "echo__sleep", "state": "UP",
                          "reason": "echo answers; the failure was passing"})
    with FakeOpenAiServer() as server:
        server.script(ToolCalls((Call("c1", "tool_probe", probe),)),
                      ToolCalls((Call("c2", "respond", json.dumps(
                          {"message": "echo answers"})),)),
                      ToolCalls((Call("c3", "tool_health_write", verdict),)))
        emb.model = OpenAiChatModel("fake-model", api_key="sk-fake-0123456789",
                                    base_url=server.base_url, max_retries=0, timeout=10)
        user_session = emb.brain.sessions.create(emb.who)
        emb.worker_parts.services.on_ambiguous(failure(emb, user_session.id, "echo__sleep"))
        done = closed(emb, wait_for(lambda: agrajags(emb, "echo__sleep"))[0].id)
        requests = [r.body for r in server.requests]
    assert done.close_reason is CloseReason.DONE
    offered = [sorted(t["function"]["name"] for t in body.get("tools", [])) for body in requests]
    assert offered[0] == ["respond", "tool_probe", "tool_probe_as_user"]  # probing: no writer
    assert offered[2] == ["tool_health_write"]  # the structured verdict
    assert any("ping" in json.dumps(m) for m in requests[1]["messages"] if m["role"] == "tool")
    health = emb.brain.store.port(ToolHealthStore).get_tool_health(
        "acme", "default", "echo", "echo__sleep")
    assert health is not None and (health.state, health.source) == (HealthState.UP,
                                                                    HealthSource.AGRAJAG)


def test_an_idle_system_session_is_suspended_and_the_next_job_resumes_it(emb):
    emb.model = DemoModel()
    user_session = emb.brain.sessions.create(emb.who)
    sessions = emb.brain.store.port(SessionStore)
    emb.worker_parts.services.on_ambiguous(failure(emb, user_session.id, "echo__first"))
    system = sessions.get_session("acme", closed(
        emb, wait_for(lambda: agrajags(emb, "echo__first"))[0].id).session_id)
    # Its idle deadline passes (the recipe's 300 s, moved to now); the session sweep suspends it.
    emb.worker_parts.presence.touch("acme", system.id, -1)
    emb.worker_parts.lifecycle.sweep()
    assert sessions.get_session("acme", system.id).status is SessionStatus.SUSPENDED
    emb.worker_parts.services.on_ambiguous(failure(emb, user_session.id, "echo__idle"))
    resumed = closed(emb, wait_for(lambda: agrajags(emb, "echo__idle"))[0].id)
    assert resumed.session_id == system.id and resumed.close_reason is CloseReason.DONE
    assert sessions.get_session("acme", system.id).status is SessionStatus.OPEN


class _Died(BaseException):
    """A worker killed mid-job: nothing after this point of the job runs."""


def queued_job(emb, subject: str, session_id: str) -> ServiceJob:
    """A diagnosis job as ``submit`` leaves it: claimed (``queued``), not yet run."""
    job = ServiceJob(service="agrajag", tenant_id="acme", project_id="default",
                     subject=subject, goal=f"Diagnose {subject}",
                     params={"server": "echo", "tool": subject, "step": "call",
                             "error": "echo: something odd happened"},
                     originating_user_id="ada", originating_session_id=session_id)
    emb.worker_parts.redis.set(claim_of(job), QUEUED, ex=600)
    return job


def claim_of(job: ServiceJob) -> str:
    return keys.service_job(job.tenant_id, job.project_id, job.service, job.subject)


def run_dying_after_create(emb, monkeypatch, job: ServiceJob) -> None:
    """Run ``job`` with its worker killed right after it created the process, before the
    process id reached the claim."""
    client = emb.worker_parts.redis
    real_set = client.set

    def dies_recording_the_process(name, value, *args, **kwargs):
        if name == claim_of(job) and kwargs.get("xx"):
            raise _Died
        return real_set(name, value, *args, **kwargs)

    monkeypatch.setattr(client, "set", dies_recording_the_process)
    try:
        with pytest.raises(_Died):
            emb.worker_parts.services.run(job)
    finally:
        monkeypatch.setattr(client, "set", real_set)


def test_a_job_redelivered_after_its_worker_died_starts_no_second_diagnosis(emb, monkeypatch):
    emb.model = DemoModel()
    job = queued_job(emb, "echo__crash", emb.brain.sessions.create(emb.who).id)
    client = emb.worker_parts.redis
    run_dying_after_create(emb, monkeypatch, job)
    assert [p.id for p in agrajags(emb, "echo__crash")] == [job.process_id]
    assert client.get(claim_of(job)) == QUEUED.encode()

    # The broker redelivers the same job (same token): it finds the process and goes on.
    redelivered = ServiceJob.model_validate(job.dump())
    started = emb.worker_parts.services.run(redelivered)
    assert started is not None and started.id == job.process_id
    assert client.get(claim_of(job)) == job.process_id.encode()
    assert emb.worker_parts.services.run(redelivered) is None  # ran already
    done = closed(emb, job.process_id)
    assert done.close_reason is CloseReason.DONE
    assert [p.id for p in agrajags(emb, "echo__crash")] == [job.process_id]
    # A new job for the subject draws a new token, so a new process id.
    fresh = {k: v for k, v in job.dump().items() if k != "token"}
    assert ServiceJob.model_validate(fresh).process_id != job.process_id


def test_the_cap_counts_open_service_processes_only_and_closed_ones_expire(emb, monkeypatch):
    emb.model = DemoModel()
    services, session_id = emb.worker_parts.services, emb.brain.sessions.create(emb.who).id
    first = queued_job(emb, "echo__old", session_id)
    services.run(first)
    closed(emb, first.process_id)
    lanes = emb.brain.store.port(LaneStore)
    assert lanes.chat_history("acme", first.process_id)

    # One open process at most: the CLOSED ones in the system session do not count ...
    monkeypatch.setattr(emb.worker_parts.process_factory, "max_open_per_session", 1)
    held = queued_job(emb, "echo__held", session_id)
    run_dying_after_create(emb, monkeypatch, held)  # leaves its process open (INIT)
    # ... an open one does: the next job is refused and gives its claim back.
    refused = queued_job(emb, "echo__refused", session_id)
    with pytest.raises(LimitExceeded):
        services.run(refused)
    assert emb.worker_parts.redis.get(claim_of(refused)) is None
    monkeypatch.undo()
    services.run(held)
    closed(emb, held.process_id)

    # Retention: kept while younger than VANCETOPE_SERVICE_RETENTION (7 days), then the
    # housekeeping beat's purge deletes them with their chat (a user's process: the store
    # contract test).
    system = emb.worker_parts.system_sessions
    assert emb.worker_parts.housekeeping() >= 0
    assert emb.brain.store.port(SessionStore).get_process("acme", first.process_id)
    assert system.purge(utcnow()) == 0
    assert system.purge(utcnow() + timedelta(days=7, seconds=1)) >= 2
    for gone in (first, held):
        with pytest.raises(NotFound):
            emb.brain.store.port(SessionStore).get_process("acme", gone.process_id)
        assert lanes.chat_history("acme", gone.process_id) == []
    assert agrajags(emb, "echo__old") == [] and agrajags(emb, "echo__held") == []
