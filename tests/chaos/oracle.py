"""What every chaos scenario checks when the dust settles, over the store, the chat
history and every event frame the clients received.

- no loss: every accepted message has its user line and exactly one reply;
- no duplicate: no message has two user lines, no reply appears twice;
- order kept: user lines in the order they were accepted, each reply after its line;
- nothing pending: every inbox is drained (nothing waits past the scenario's bound);
- no process CLOSED that a scenario did not close;
- stream continuity: each client's event seqs rise by one, except across an
  ``events-gap`` it was sent; a client that got no gap got every committed chat line;
- only legal status transitions in the ``status-changed`` events.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import redis

from tests.integration.conftest import Cluster
from tests.integration.gateways import Client
from vancetope_brain.errors import RuntimeFailure
from vancetope_brain.models import ChatRole, ProcessStatus
from vancetope_brain.store import LaneStore, SessionStore

# think-engines §5 as the lane runner shows it (RUNNING for the duration of every turn).
LEGAL = {
    "INIT": {"RUNNING", "CLOSED", "SUSPENDED"},
    "RUNNING": {"IDLE", "BLOCKED", "PAUSED", "SUSPENDED", "CLOSED", "INIT"},
    "IDLE": {"RUNNING"},
    "BLOCKED": {"RUNNING"},
    "PAUSED": {"RUNNING", "IDLE", "BLOCKED", "SUSPENDED", "CLOSED"},
    "SUSPENDED": {"RUNNING", "IDLE", "BLOCKED", "PAUSED", "INIT", "CLOSED"},
}
STREAM_GRACE = 10.0
"""How long a committed line's event may still be on its way to the client (published after
the commit, through Redis and the gateway) before the oracle calls it lost."""


def _answers(chat: list[Any]) -> list[str]:
    """The messages the assistant lines answer (the chaos workers' ``VT_TEST_ECHO_ALL``)."""
    return [part.removeprefix("echo: ") for line in chat if line.role is ChatRole.ASSISTANT
            for part in line.content.split("\n") if part.startswith("echo: ")]


@dataclass
class Oracle:
    cluster: Cluster
    sent: dict[str, list[str]] = field(default_factory=dict)  # pid → contents, accepted order
    refused: int = 0  # sends that had to be retried (the fault was visible to the sender)

    def send(self, pid: str, content: str, timeout: float = 60) -> None:
        """Send like a careful client: with an idempotency key, retried until accepted."""
        key = f"chaos-{uuid.uuid4().hex}"
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.cluster.brain.sessions.steer(self.cluster.who, pid, content, key)
                break
            except (redis.RedisError, RuntimeFailure):
                self.refused += 1
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.sent.setdefault(pid, []).append(content)

    def answered(self) -> bool:
        """Whether every accepted message has its reply (cheap; poll it)."""
        return all(self._replies(pid) >= set(contents) for pid, contents in self.sent.items())

    def _replies(self, pid: str) -> set[str]:
        return set(_answers(self._chat(pid)))

    def _chat(self, pid: str) -> list[Any]:
        return self.cluster.brain.store.port(LaneStore).chat_history("acme", pid, limit=100_000)

    def check(self, clients: dict[str, Client] | None = None, *,
              closed_ok: frozenset[str] = frozenset()) -> None:
        """Everything in the module docstring; ``clients``: process id → the client bound
        to that process's session."""
        lanes = self.cluster.brain.store.port(LaneStore)
        processes = self.cluster.brain.store.port(SessionStore)
        for pid, contents in self.sent.items():
            chat = self._chat(pid)
            users = [line.content for line in chat if line.role is ChatRole.USER]
            replies = _answers(chat)
            assert users == contents, f"{pid}: user lines {users} != accepted {contents}"
            doubled = [c for c, n in Counter(replies).items() if n > 1]
            assert not doubled, f"{pid}: replies given twice: {doubled}"
            assert replies == contents, f"{pid}: replies {replies} != accepted {contents}"
            asked = {line.content: line.seq for line in chat if line.role is ChatRole.USER}
            for line in chat:
                for answer in _answers([line]):
                    assert asked[answer] < line.seq, f"{pid}: {answer!r} answered before asked"
            assert not lanes.pending_messages("acme", pid), f"{pid}: messages still pending"
            process = processes.get_process("acme", pid)
            if pid not in closed_ok:
                assert process.status is not ProcessStatus.CLOSED, \
                    f"{pid} is CLOSED ({process.close_reason}): {process.last_error}"
        for pid, client in (clients or {}).items():
            self._check_stream(pid, client)

    def _check_stream(self, pid: str, client: Client) -> None:
        # A line's event is published after its turn committed, so a line already in the
        # store may still be on its way to the client: wait for it a while, then check.
        lines = self._chat(pid)

        def delivered(events: list[dict[str, Any]]) -> bool:
            seen = {e["data"]["id"] for e in events if e["type"] == "chat-message"}
            return bool(client.gaps) or all(line.id in seen for line in lines)

        with contextlib.suppress(AssertionError):  # what never came is named below
            client.until(delivered, timeout=STREAM_GRACE)
        client.drain()
        seqs = [e["seq"] for e in client.events]
        gapped = {g["firstAvailable"] for g in client.gaps}
        for before, after in zip(seqs, seqs[1:], strict=False):
            assert after > before, f"seq went back: {before} → {after}"
            assert after == before + 1 or after in gapped or client.gaps, \
                f"a hole in the stream {before} → {after} with no events-gap"
        for e in client.events:
            if e["type"] == "status-changed":
                assert e["data"]["to"] in LEGAL.get(e["data"]["from"], ()), \
                    f"illegal transition {e['data']} of {e['processId']}"
        if client.gaps:
            return  # it was told to re-read the history
        seen = {e["data"]["id"] for e in client.events if e["type"] == "chat-message"}
        for line in self._chat(pid):
            assert line.id in seen, f"{pid}: chat line {line.seq} never reached its client"
