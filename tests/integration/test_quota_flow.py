"""Usage and quotas across OS processes (issue 32, part 3, acceptance): a chat on a real
Celery worker process whose model is the real ``openai`` client against a fake
OpenAI-compatible server on loopback, which reports a usage of its own for every answer.

The tenant's usage per model is the sum of what the server reported over a scripted run
with two models. Then the tenant's daily token quota is set at what it used: the next
message is refused with ``quota_exceeded`` (a chat line, one Inbox notice however many
messages wait, the process PAUSED, its messages pending with no attempt spent, no model
call), and once the quota is raised through the settings write path the process runs
again and answers every waiting message.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import Cluster
from tests.llm.fake_openai_server import FakeOpenAiServer, Reply, Text
from vancetope_brain.models import ChatRole, ProcessStatus, utcnow
from vancetope_brain.models.inbox import InboxQuery
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import (
    DeadLetterStore,
    LaneStore,
    SessionStore,
    UsageStore,
    UserInboxStore,
)

RECOVERY = 30.0


class Endpoint:
    """Answers ``re: <last message>`` and reports a usage that grows with every call,
    summed per model as it was reported (``reported``)."""

    def __init__(self) -> None:
        self.reported: dict[str, Counter[str]] = {}
        self.calls = 0
        self.last: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.calls += 1
            self.last = body["messages"]
            usage = {"prompt_tokens": 100 * self.calls + 7, "completion_tokens": 10 + self.calls}
            self.reported.setdefault(body["model"], Counter()).update(usage)
        return Text(f"re: {body['messages'][-1]['content']}", usage=usage)


@pytest.fixture
def server() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as fake:
        yield fake


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str, server: FakeOpenAiServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path, redis_url, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="k",
                VANCETOPE_LLM_MODEL="model-a")
    try:
        yield c
    finally:
        c.close()


def _answered(cluster: Cluster, pid: str, content: str) -> bool:
    return any(line.role is ChatRole.ASSISTANT and line.content == f"re: {content}"
               for line in cluster.chat(pid))


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_usage_sums_what_the_server_reported_and_a_quota_holds_then_releases_the_chat(
        cluster, server):
    endpoint = Endpoint()
    server.respond_with(endpoint)
    cluster.start_workers("openai")
    cluster.start_sweeper()
    settings, store = cluster.brain.settings, cluster.brain.store
    pid = cluster.new_chat()

    # A scripted run: three turns on the deployment's model, two on another.
    for n in range(5):
        if n == 3:
            settings.set("acme", SettingScope.user("ada"), "llm.model", "model-b")
        cluster.steer(pid, f"m{n}")
        wait_for(lambda n=n: _answered(cluster, pid, f"m{n}"), timeout=RECOVERY,
                 what=f"the answer to m{n}")
    today = utcnow().date()
    rows = store.port(UsageStore).read_usage("acme", today, today)
    shown = {m: Counter() for m in {row.key.model for row in rows}}
    for row in rows:
        shown[row.key.model].update({"prompt_tokens": row.tokens_in,
                                     "completion_tokens": row.tokens_out})
    assert shown == endpoint.reported and set(shown) == {"model-a", "model-b"}
    assert sum(row.calls for row in rows) == 5 and not any(r.estimated_calls for r in rows)

    # The tenant's daily tokens are used up: the next messages wait, told once.
    used = sum(row.tokens_in + row.tokens_out for row in rows)
    settings.set("acme", SettingScope.tenant(), "quota.tenant.tokensPerDay", used)
    processes, lanes = store.port(SessionStore), store.port(LaneStore)
    cluster.steer(pid, "over 1")
    wait_for(lambda: processes.get_process("acme", pid).status is ProcessStatus.PAUSED,
             timeout=RECOVERY, what="the chat held by its quota")
    cluster.steer(pid, "over 2")
    held = processes.get_process("acme", pid)
    assert held.last_error is not None and held.last_error.startswith("quota_exceeded:")
    [notice] = [line for line in cluster.chat(pid) if line.meta.get("code") == "quota_exceeded"]
    assert notice.role is ChatRole.EVENT and "quota is used up" in notice.content
    assert notice.meta["quota"] == "quota.tenant.tokensPerDay"
    pending = lanes.pending_messages("acme", pid)
    assert [m.message.content for m in pending] == ["over 1", "over 2"]  # type: ignore[union-attr]
    assert all(m.attempts == 0 for m in pending)
    assert endpoint.calls == 5
    assert store.port(DeadLetterStore).dead_letters("acme") == []
    items = store.port(UserInboxStore).list_inbox_items("acme", InboxQuery(
        origin_process_id=pid, limit=100))
    assert [i.title for i in items] == [f"LLM quota used up: {held.name} waits"]

    # Raised by an operator (the settings write path): the chat goes on by itself.
    settings.set("acme", SettingScope.tenant(), "quota.tenant.tokensPerDay", used * 10)
    wait_for(lambda: _answered(cluster, pid, "over 2"), timeout=RECOVERY,
             what="the answer after the raise")
    asked = [m["content"] for m in endpoint.last if m["role"] == "user"]
    assert asked[-2:] == ["over 1", "over 2"]  # both waiting messages, in one turn
    assert processes.get_process("acme", pid).status is ProcessStatus.IDLE
    assert lanes.pending_messages("acme", pid) == []
    assert len(store.port(UserInboxStore).list_inbox_items("acme", InboxQuery(
        origin_process_id=pid, limit=100))) == 1
