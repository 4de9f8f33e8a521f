"""The rolling chat summary across OS processes (issue 29 item 6): Arthur on a real Celery
worker process whose model is the real ``openai`` client against a fake OpenAI-compatible
server on loopback, which answers by what it is asked and counts the summarising calls.

A chat passes its budget and gets a summary; the worker is SIGKILLed in that turn, and
another worker runs the turn again. The journal records a completion once it returned, so
what the rerun pays depends on when the kill came: after the summary was recorded (the
worker waits on the reply's call), the rerun replays it — one summarising call in all;
during the summarising call itself (nothing recorded yet), the rerun must ask again — two.
Either way the summary is then kept with the process, and after a restart (a new worker)
the next turn uses it without a new call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import Cluster
from tests.llm.fake_openai_server import Call, FakeOpenAiServer, Reply, Stall, Text, ToolCalls
from vancetope_brain.engines.history import SUMMARIZE, Summary
from vancetope_brain.models import ChatRole
from vancetope_brain.models.markup import tagged
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import SessionStore

LINE = "x" * 400  # about 100 tokens a message
SUMMARY = "The user sent numbered messages m0, m1 … full of x."
SUMMARY_MARK = SUMMARIZE.split("{")[0]
RECOVERY = 30.0  # seconds: lease TTL 2 s + sweep, a new worker's start, on a loaded machine


class Endpoint:
    """The fake server's answers: a summarising request (its system prompt) gets
    ``SUMMARY``, any other ``respond("ok")``; the armed ``kill_at`` request ("summary", or
    "reply": the first reply request after a summary) stalls instead, once, and sets
    ``stalled``."""

    def __init__(self, kill_at: str) -> None:
        self.kill_at: str | None = kill_at
        self.summaries = 0
        self.replies: list[list[dict[str, Any]]] = []
        self.stalled = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if messages[0]["content"].startswith(SUMMARY_MARK):
            self.summaries += 1
            kind = "summary"
        else:
            self.replies.append(messages)
            kind = "reply" if self.summaries else "before"
        if kind == self.kill_at:
            self.kill_at = None
            self.stalled.set()
            return Stall(120)
        if kind == "summary":
            return Text(SUMMARY)
        return ToolCalls((Call("r1", "respond", json.dumps(
            {"message": "ok", "awaiting_user_input": False})),))


@pytest.fixture
def server() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as fake:
        yield fake


@pytest.fixture
def openai_cluster(tmp_path: Path, redis_url: str, server: FakeOpenAiServer
                   ) -> Iterator[Cluster]:
    c = Cluster(tmp_path, redis_url, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="k",
                VANCETOPE_LLM_MODEL="fake-model")
    try:
        for key, value in (("session.defaultChatEngine", "arthur"),
                           ("arthur.maxContextTokens", 4096), ("chat.summaryThreshold", 0.5)):
            c.brain.settings.set("acme", SettingScope.tenant(), key, value)
        yield c
    finally:
        c.close()


def _answers(cluster: Cluster, pid: str) -> int:
    return sum(line.role is ChatRole.ASSISTANT and line.content == "ok"
               for line in cluster.chat(pid))


@pytest.mark.slow
@pytest.mark.parametrize(("kill_at", "summary_calls"), [("reply", 1), ("summary", 2)])
def test_a_killed_summarising_turn_pays_once_recorded_and_the_summary_outlives_restarts(
        openai_cluster, server, kill_at, summary_calls):
    cluster = openai_cluster
    endpoint = Endpoint(kill_at)
    server.respond_with(endpoint)
    [first] = cluster.start_workers("openai")
    cluster.start_sweeper()
    pid = cluster.new_chat()

    sent = 0
    while not endpoint.stalled.is_set():  # talk until the turn that summarises is cut
        assert sent < 40, "the chat never passed its threshold"
        cluster.steer(pid, f"m{sent} {LINE}")
        sent += 1
        wait_for(lambda sent=sent: endpoint.stalled.is_set() or _answers(cluster, pid) == sent,
                 timeout=RECOVERY, what=f"the answer to m{sent - 1}")
    first.kill_group()
    assert endpoint.summaries == 1
    processes = cluster.brain.store.port(SessionStore)
    assert Summary.of(processes.get_process("acme", pid).engine_state) is None  # not committed

    [second] = cluster.start_workers("openai")  # the turn runs again, here
    wait_for(lambda: _answers(cluster, pid) == sent, timeout=RECOVERY, what="the rerun")
    assert endpoint.summaries == summary_calls
    summary = Summary.of(processes.get_process("acme", pid).engine_state)
    assert summary is not None and summary.text == SUMMARY and summary.through_seq > 1
    shown = tagged("chat-history-summary", SUMMARY, lines=f"1-{summary.through_seq}")
    assert endpoint.replies[-1][1]["content"].endswith(shown)
    assert not any(m["content"].startswith("m0 ") for m in endpoint.replies[-1])

    # A restart: a new worker process, which holds nothing of the chat.
    second.stop()
    cluster.start_workers("openai")
    cluster.steer(pid, "and now?")
    wait_for(lambda: _answers(cluster, pid) == sent + 1, timeout=RECOVERY,
             what="the answer after the restart")
    assert endpoint.summaries == summary_calls  # no new summarising call: it was reused
    assert endpoint.replies[-1][1]["content"].endswith(shown)
    assert endpoint.replies[-1][-1]["content"] == "and now?"
