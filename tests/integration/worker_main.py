"""A Celery lane worker for the multi-process tests, with a test model and test hooks.

Run as ``python -m tests.integration.worker_main NAME`` from the repository root,
with the worker's configuration in ``VANCETOPE_*`` variables and these:

``VT_TEST_MODEL``
    ``echo`` (default) answers at once with ``"echo: <last user message>"``;
    ``block`` first touches ``VT_TEST_STARTED`` and then waits inside
    ``complete()`` until the file ``VT_TEST_RELEASE`` exists, so a test can
    SIGKILL or SIGSTOP the worker mid-turn; ``slow`` sleeps ``VT_TEST_DELAY``
    seconds per call; ``stream`` answers like ``echo`` but streams the answer word by
    word, ``VT_TEST_DELAY`` seconds between words, so a client can drop mid-stream
    (with ``VT_TEST_STREAM_HOLD=N`` it stops after the N-th word until ``VT_TEST_RELEASE``
    exists, so the reply is surely still streaming while the test acts);
    ``arthur-flow`` and ``inbox-flow`` script Arthur and one worker (see their functions);
    ``journal-flow`` a worker whose side-effecting tool kills it (``scripts_journal``);
    ``agrajag-flow`` user workers failing on an MCP tool and agrajag (``scripts_agrajag``).
    ``poison`` echoes, but SIGKILLs its worker on a user message ``POISON``.
    ``openai`` is no test model: the worker builds its models from its configuration as
    a deployed one does (``OPENAI_BASE_URL`` … naming a fake OpenAI-compatible server).
    ``demo`` is the offline demo model (``vancetope_brain/llm/demo.py``).
    ``tool-flow`` (Arthur) calls the tool a user message ``call <tool> <json args>`` names
    and responds ``tool said: <result>``, else responds ``echo: <message>``; it logs the
    MCP tools it was offered (``tools <names>``).
``VT_TEST_LOG``
    Lines ``<kind> <pid> <unix time> [detail]`` are appended here: ``ready``
    when the consumer is up, ``start``/``end`` around every model call,
    ``committed`` (see below) and ``postrun <outcome>`` after every lane turn
    (``committed``, ``busy``, ``fenced``, ...; a shard task's turns, one line each).
``VT_TEST_ECHO_ALL``
    Set: the echoing models answer every user message since their last answer, one
    ``echo: <message>`` line each (see ``_echo``).
``VT_TEST_POOL``, ``VT_TEST_CONCURRENCY``
    The Celery pool (default ``solo``, concurrency 1) — ``prefork`` as a worker pod runs.
``VT_TEST_HOLD_COMMIT``
    A file name. While it does not exist, a turn that drained messages stops
    right after its fenced commit, before the lane lease is released (the
    "turn is ending" window), logs ``committed`` and waits for the file.

The pool is ``solo`` by default: the worker process itself runs the turn, so SIGKILL
and SIGSTOP hit the turn, its lease heartbeat and the broker connection at once.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

from celery import signals

import workers.parts  # noqa: F401 - loaded at start, as workers.main does
from tests.integration import scripts_hier, scripts_nest, scripts_zaphod
from tests.integration.scripts_marvin import marvin_flow
from tests.integration.turnlog import log
from vancetope_brain.config import Config
from vancetope_brain.llm import ChatModel, LlmMessage, LlmResponse, TokenSink, ToolCall, ToolSpec
from vancetope_brain.llm.demo import split_words
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import Committed, TurnCommit
from vancetope_brain.store import LaneStore
from vancetope_brain.store.sqlite import SqliteBackend
from workers.celery_app import create_celery
from workers.tasks import LANE_SHARD, LANE_TURN

BLOCK_LIMIT = 120.0  # a forgotten release file must not hang a worker forever


def wait_for_file(path: str) -> None:
    deadline = time.monotonic() + BLOCK_LIMIT
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {BLOCK_LIMIT}s")
        time.sleep(0.005)


def _last_user(messages: list[LlmMessage]) -> str:
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


def _echo(messages: list[LlmMessage]) -> str:
    """``echo: <last user message>``; with ``VT_TEST_ECHO_ALL`` one ``echo: <message>`` line
    for every user message since the last answer (a turn that drained several answers
    each, so the chaos oracle can count answers per message)."""
    if not os.environ.get("VT_TEST_ECHO_ALL"):
        return f"echo: {_last_user(messages)}"
    since: list[str] = []
    for m in messages:
        if m.role == "assistant":
            since = []
        elif m.role == "user":
            since.append(m.content)
    return "\n".join(f"echo: {c}" for c in since)


class StreamingEcho:
    """``echo: <last user message>``, one token event per word, ``delay`` seconds apart,
    waiting for the file ``release`` after ``hold`` words when ``hold`` is set."""

    name = "test-stream"

    def __init__(self, delay: float, hold: int | None, release: str) -> None:
        self.delay = delay
        self.hold = hold
        self.release = release

    def complete(self, messages: list[LlmMessage], *, tools: list[ToolSpec] | None = None,
                 on_token: TokenSink | None = None) -> LlmResponse:
        last = _last_user(messages)
        log("start", last)
        text = _echo(messages)
        for i, word in enumerate(split_words(text)):
            if i == self.hold:
                wait_for_file(self.release)
            if i:
                time.sleep(self.delay)
            if on_token is not None:
                on_token(word)
        log("end", last)
        if tools and any(t.name == "respond" for t in tools):  # Arthur: respond is mandatory
            return LlmResponse(content=text, tool_calls=_respond(text).tool_calls, model=self.name)
        return LlmResponse(content=text, model=self.name)


def build_model(mode: str) -> ChatModel:
    if mode == "arthur-flow":
        return FunctionModel(arthur_flow, name="test-arthur-flow")
    if mode == "inbox-flow":
        return FunctionModel(inbox_flow, name="test-inbox-flow")
    if mode == "zaphod-flow":
        return FunctionModel(scripts_zaphod.zaphod_flow, name="test-zaphod-flow")
    if mode == "marvin-flow":
        return FunctionModel(marvin_flow, name="test-marvin-flow")
    if mode == "nest-flow":
        return FunctionModel(scripts_nest.nest_flow, name="test-nest-flow")
    if mode == "hier-flow":
        return FunctionModel(scripts_hier.hier_flow, name="test-hier-flow")
    if mode == "poison":
        from tests.integration.scripts_poison import poison_flow
        return FunctionModel(poison_flow, name="test-poison")
    if mode == "vogon-flow":
        from tests.integration.scripts_vogon import vogon_flow
        return FunctionModel(vogon_flow, name="test-vogon-flow")
    if mode == "agrajag-flow":
        from tests.integration.scripts_agrajag import agrajag_flow
        return FunctionModel(agrajag_flow, name="test-agrajag-flow")
    if mode == "journal-flow":  # importing it registers its server tools
        from tests.integration.scripts_journal import journal_flow
        return FunctionModel(journal_flow, name="test-journal-flow")
    if mode == "tool-flow":
        return FunctionModel(tool_flow, name="test-tool-flow")
    if mode == "demo":
        from vancetope_brain.llm.demo import DemoModel
        return DemoModel()
    if mode not in ("echo", "block", "slow", "stream"):
        raise SystemExit(f"VT_TEST_MODEL={mode!r}: use echo, block, slow, stream, arthur-flow "
                         f"or inbox-flow")
    delay = float(os.environ.get("VT_TEST_DELAY", "0.05"))
    if mode == "stream":
        hold = os.environ.get("VT_TEST_STREAM_HOLD")
        return StreamingEcho(delay, int(hold) if hold else None, os.environ["VT_TEST_RELEASE"])

    def answer(messages: list[LlmMessage], tools: list[ToolSpec]) -> str:
        last = _last_user(messages)
        log("start", last)
        if mode == "block":
            Path(os.environ["VT_TEST_STARTED"]).touch()
            wait_for_file(os.environ["VT_TEST_RELEASE"])
        elif mode == "slow":
            time.sleep(delay)
        log("end", last)
        return _echo(messages)

    return FunctionModel(answer, name=f"test-{mode}")


def _respond(message: str, awaiting: bool = False) -> LlmResponse:
    return LlmResponse("", (ToolCall("r", "respond", json.dumps(
        {"message": message, "awaiting_user_input": awaiting})),))


def tool_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    """See ``tool-flow`` in the module docstring."""
    last = messages[-1]
    if last.role == "tool":
        return _respond(f"tool said: {last.content}")
    log("tools", ",".join(sorted(t.name for t in tools if "__" in t.name)))
    text = _last_user(messages)
    if text.startswith("call "):
        name, _, args = text.removeprefix("call ").partition(" ")
        return LlmResponse("", (ToolCall("t", name, args or "{}"),))
    return _respond(f"echo: {text}")


def arthur_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    """arthur-engine §4 scripted, for Arthur (offered process_create) and its worker."""
    last = messages[-1]
    if not any(t.name == "process_create" for t in tools):  # the worker
        if "Vaswani2017 as baseline" in last.content:
            return _respond("3 contradictions found.")
        return _respond("May I assume the paper Vaswani2017 as baseline?", awaiting=True)
    if last.role == "tool":
        started = "processId" in (json.loads(last.content).get("result") or {})
        return _respond("Started paper-diff; I'll tell you when it reports back." if started
                        else "Forwarded.")
    if last.content.startswith("Analyze"):
        return LlmResponse("", (ToolCall("c", "process_create", json.dumps(
            {"recipe": "analyze", "name": "paper-diff",
             "goal": "Analyze 5 PDFs for contradictions"})),))
    if last.content == "Yes, do it.":
        asked = [re.search(r'sourceProcessId="([^"]+)"[^>]* type="blocked"', m.content)
                 for m in messages]
        worker = [m.group(1) for m in asked if m][-1]
        return LlmResponse("", (ToolCall("s", "process_steer", json.dumps(
            {"processId": worker, "message": "Yes, use Vaswani2017 as baseline"})),))
    if 'type="blocked"' in last.content:
        return _respond("paper-diff asks: may it assume Vaswani2017 as baseline?", awaiting=True)
    if 'type="done"' in last.content:
        return _respond("paper-diff is finished: 3 contradictions found.")
    return _respond("?")


def inbox_flow(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    """Arthur starts a deployer (the test's recipe ``deployer`` adds ``inbox_post``); the
    deployer asks for approval through the user's Inbox, waits (BLOCKED) and deploys once
    the answer arrives as an ``<inbox-answer>``."""
    last = messages[-1]
    if not any(t.name == "process_create" for t in tools):  # the deployer
        if "<inbox-answer" in last.content:
            return _respond("Deployed." if '"approved": true' in last.content
                            else "Not deployed.")
        if last.role == "tool":
            return _respond("Waiting for approval.")
        return LlmResponse("", (ToolCall("i", "inbox_post", json.dumps(
            {"type": "APPROVAL", "title": "Deploy build 42 to production?",
             "criticality": "CRITICAL", "tags": ["deploy"],
             "idempotency_key": "deploy-42"})),))
    if last.role == "tool":
        return _respond("Started deployer.")
    if last.content.startswith("Deploy"):
        return LlmResponse("", (ToolCall("c", "process_create", json.dumps(
            {"recipe": "deployer", "name": "deployer", "goal": "Deploy build 42"})),))
    if 'type="blocked"' in last.content:
        return _respond("deployer waits for your approval in the Inbox.")
    if 'type="done"' in last.content:
        return _respond("deployer: done.")
    return _respond("?")


def hold_commits(release: str) -> None:
    """Stop after a successful commit of drained messages until ``release`` exists."""
    lanes = SqliteBackend.adapters[LaneStore]
    commit_turn = lanes.commit_turn

    def held(self: LaneStore, tenant_id: str, process_id: str, epoch: int,
             commit: TurnCommit) -> Committed | None:
        written = commit_turn(self, tenant_id, process_id, epoch, commit)
        if written is not None and commit.drained_ids and not os.path.exists(release):
            log("committed", epoch)
            wait_for_file(release)
        return written

    lanes.commit_turn = held


@signals.worker_ready.connect
def _ready(**_: object) -> None:
    log("ready")


@signals.task_postrun.connect
def _postrun(task=None, retval=None, **_: object) -> None:  # type: ignore[no-untyped-def]
    if task is not None and task.name == LANE_TURN:
        log("postrun", retval)
    elif task is not None and task.name == LANE_SHARD and isinstance(retval, list):
        for outcome in retval:  # one line per turn the shard task ran
            log("postrun", outcome)


def main(argv: list[str]) -> None:
    name = argv[1] if len(argv) > 1 else f"vt-test-{os.getpid()}"
    mode = os.environ.get("VT_TEST_MODEL", "echo")
    model = None if mode == "openai" else build_model(mode)
    if os.environ.get("VT_TEST_HOLD_COMMIT"):
        hold_commits(os.environ["VT_TEST_HOLD_COMMIT"])
    if os.environ.get("VT_TEST_VOGON_HOLD"):
        from tests.integration.scripts_vogon import hold_vogon_turns
        hold_vogon_turns(os.environ["VT_TEST_VOGON_HOLD"])
    app = create_celery(Config.from_env(),
                        model_for=None if model is None else lambda process: model)
    # concurrency 1: prefetch is multiplier × concurrency, and a solo worker must not
    # reserve a second lane task while it runs (or is frozen in) one. VT_TEST_POOL=prefork
    # runs the pool of a worker pod instead (VT_TEST_CONCURRENCY children).
    pool = os.environ.get("VT_TEST_POOL", "solo")
    concurrency = os.environ.get("VT_TEST_CONCURRENCY", "1" if pool == "solo" else "2")
    app.worker_main(["worker", f"--pool={pool}", f"--concurrency={concurrency}",
                     "--loglevel=WARNING", "-n", f"{name}@localhost", "--without-mingle",
                     "--without-gossip", "--without-heartbeat"])


if __name__ == "__main__":
    main(sys.argv)
