"""A Celery worker process for the benchmarks: the product's app with a zero-latency model.

    python benchmarks/bench_worker.py --name bench1 [--pool solo] [--concurrency 1]
                                      [--ready-file PATH] [--no-task-events]

``--pool gevent`` monkey-patches the process first thing, before the product, Celery's worker,
kombu and redis-py are imported, with Celery's own ``maybe_patch_concurrency`` (what the
``celery`` command runs before it imports ``-A workers.main``).

Configuration comes from the environment exactly as for a worker pod
(``VANCETOPE_REDIS_URL``, ``VANCETOPE_STORE_URL``, …); ``lane_turns.py`` sets it.

The worker is ``create_celery(Config.from_env(), model_for=…)`` + ``app.worker_main``,
i.e. the same tasks, queues, acks and prefetch as production; only the model differs
(``ZeroLatencyModel``: answers at once, streams its answer as one token). With
``BENCH_MODEL=paced:TOKENS:SECONDS`` in the environment (``llm_load.py`` sets it) the model
is ``vancetope_brain.llm.testing.PacedModel``: TOKENS numbered, time-stamped tokens streamed
over SECONDS, waiting between them on the turn's thread; with ``BENCH_MODEL=endpoint:URL``
it is the product's ``OpenAiChatModel`` against ``paced_endpoint.py`` at URL.

Instrumentation (cheap, outside the product code): Celery's ``task_prerun`` /
``task_postrun`` signals count lane-turn outcomes (committed, busy, nothing, …) and
time each task body and the gap between two lane tasks; with ``--parts`` the runner's
collaborators are wrapped in timing proxies (``_timing.py``) so every part of every
turn is timed in situ; with ``--waits`` every take of a ready process records how long it
waited in its shard's ready set (its wake → the take, found by peeking at the set's head just
before the take: a take that another worker raced is skipped) and how long of that inside the
task that took it (the task's start → the take). Every 0.5 s the figures are written to the Redis hash
``bench:worker:{name}:{pid}`` of the benchmark database, where ``lane_turns.py`` reads them.
"""

from __future__ import annotations

from celery import maybe_patch_concurrency

maybe_patch_concurrency()  # reads --pool from sys.argv; gevent: patch before anything else

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _compare import POOLS  # noqa: E402
from _timing import Timer, instrument_worker  # noqa: E402

from vancetope_brain.llm.base import (  # noqa: E402
    ChatModel,
    LlmMessage,
    LlmResponse,
    TokenSink,
    ToolCall,
    ToolSpec,
)

REPLY = "pong"
RESPOND_CALL = ToolCall("bench-1", "respond",
                        json.dumps({"message": REPLY, "awaiting_user_input": False}))


class ZeroLatencyModel:
    """A ChatModel that answers immediately with a fixed reply, streamed as one token: through
    the ``respond`` tool when it is offered (a chat engine's turn requires it; a plain-text
    answer would be sent back once and cost a second model step and a stream-reset event),
    else as text."""

    name = "bench-zero-latency"

    def complete(self, messages: list[LlmMessage], *, tools: list[ToolSpec] | None = None,
                 on_token: TokenSink | None = None) -> LlmResponse:
        if on_token is not None:
            on_token(REPLY)
        if any(t.name == RESPOND_CALL.name for t in tools or ()):
            return LlmResponse(content="", tool_calls=(RESPOND_CALL,),
                               finish_reason="tool_calls", model=self.name)
        return LlmResponse(content=REPLY, model=self.name)


MODEL = ZeroLatencyModel()


def _model() -> ChatModel:
    """The model of this worker: ``BENCH_MODEL`` = ``zero`` (default),
    ``paced:TOKENS:SECONDS`` or ``endpoint:BASE_URL`` (the product's ``OpenAiChatModel``
    against that endpoint, ``paced_endpoint.py``)."""
    spec = os.environ.get("BENCH_MODEL", "zero")
    if spec == "zero":
        return MODEL
    if spec.startswith("endpoint:"):
        from vancetope_brain.llm.openai_provider import OpenAiChatModel
        return OpenAiChatModel("bench-paced", base_url=spec.removeprefix("endpoint:"))
    kind, _, shape = spec.partition(":")
    tokens, _, seconds = shape.partition(":")
    if kind != "paced" or not tokens.isdigit():
        raise SystemExit(f"BENCH_MODEL={spec!r}: expected zero or paced:TOKENS:SECONDS")
    from vancetope_brain.llm.testing import PacedModel
    return PacedModel(int(tokens), float(seconds or 2.0), name="bench-paced")


class _Stats:
    """Outcome counts and timings of this OS process (prefork: of each child)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()
        self.timer = Timer(cap=20000)
        self.started: dict[str, int] = {}
        self.last_end: int | None = None
        self.pid = 0
        self.task_start = threading.local()  # perf_counter_ns of the task this thread runs


STATS = _Stats()
_NAME = ["worker"]


def _time_waits(worker) -> None:  # type: ignore[no-untyped-def]
    """Record, per take of a ready process, its wait in the ready set and in the task."""
    from vancetope_brain import keys

    waker = worker.waker
    real_next = waker.next_ready

    def next_ready(shard, *args, **kwargs):  # type: ignore[no-untyped-def]
        head = waker._redis.zrange(keys.ready(shard), 0, 0, withscores=True)
        ready = real_next(shard, *args, **kwargs)
        now_ns, wall_us = time.perf_counter_ns(), time.time_ns() // 1000
        if hasattr(ready, "process_id") and head and \
                head[0][0].decode() == f"{ready.tenant_id}/{ready.process_id}":
            STATS.timer.record("(wait: wake → take)", int(wall_us - head[0][1]) * 1000)
            started = getattr(STATS.task_start, "ns", None)
            if started is not None:
                STATS.timer.record("(wait: task start or linger end → take)", now_ns - started)
        return ready

    waker.next_ready = next_ready
    real_await = getattr(waker, "await_wake", None)  # absent before the linger

    def await_wake(shard, timeout):  # type: ignore[no-untyped-def]
        started = time.perf_counter_ns()
        rung = real_await(shard, timeout)
        ended = time.perf_counter_ns()
        STATS.timer.record("(wait: linger, rung)" if rung else "(wait: linger, not rung)",
                           ended - started)
        STATS.task_start.ns = ended  # the next take's wait in the task counts from here
        return rung

    if real_await is not None:
        waker.await_wake = await_wake


def _install_instrumentation(app, redis_url: str, parts: bool, waits: bool) -> None:  # type: ignore[no-untyped-def]
    import redis
    from celery import signals

    # By name, not imported: ``--source`` may run a checkout from before the shard task.
    lane_tasks = {"vancetope.lane_shard", "vancetope.lane_turn"}

    def flush_loop(key: str) -> None:
        client = redis.Redis.from_url(redis_url)
        while True:
            time.sleep(0.5)
            with STATS.lock:
                outcomes = dict(STATS.outcomes)
            client.hset(key, mapping={"outcomes": json.dumps(outcomes),
                                      "parts": json.dumps(STATS.timer.counted_snapshot())})

    def ensure_started() -> None:
        # In the OS process that runs the tasks (the prefork child, if any), once.
        if STATS.pid != os.getpid():
            STATS.pid = os.getpid()
            if parts:
                instrument_worker(app.vancetope_worker(), STATS.timer)
            if waits:
                _time_waits(app.vancetope_worker())
            key = f"bench:worker:{_NAME[0]}:{os.getpid()}"
            threading.Thread(target=flush_loop, args=(key,), daemon=True).start()

    @signals.task_prerun.connect(weak=False)
    def _prerun(task_id=None, task=None, **_):  # type: ignore[no-untyped-def]
        if task is not None and task.name in lane_tasks:
            ensure_started()
            now = time.perf_counter_ns()
            STATS.task_start.ns = now
            with STATS.lock:
                STATS.started[task_id] = now
                if STATS.last_end is not None:
                    STATS.timer.record("(between lane tasks)", now - STATS.last_end)

    @signals.task_postrun.connect(weak=False)
    def _postrun(task_id=None, task=None, retval=None, state=None, **_):  # type: ignore[no-untyped-def]
        if task is not None and task.name in lane_tasks:
            end = time.perf_counter_ns()
            with STATS.lock:
                start = STATS.started.pop(task_id, None)
                if state != "SUCCESS":
                    STATS.outcomes[f"state:{state}"] += 1
                else:  # a shard task returns the outcomes of its turns
                    for outcome in retval if isinstance(retval, list) else [retval]:
                        STATS.outcomes[str(outcome)] += 1
                STATS.outcomes["(lane tasks)"] += 1
                STATS.last_end = end
            if start is not None:
                STATS.timer.record("(lane task body)", end - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="bench", help="worker node name (before the @)")
    parser.add_argument("--pool", default="solo", choices=POOLS)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--ready-file", help="touched when the worker consumes")
    parser.add_argument("--no-task-events", action="store_true",
                        help="turn off worker_send_task_events (an experiment, not the product "
                             "setting)")
    parser.add_argument("--parts", action="store_true",
                        help="time the parts of every turn (timing proxies, see _timing.py)")
    parser.add_argument("--waits", action="store_true",
                        help="record each take's wait in the ready set and in its task")
    parser.add_argument("--cprofile-out", help="profile every thread (gevent: the main one, "
                        "where the greenlets run) and write the merged pstats here at exit")
    parser.add_argument("--loglevel", default="WARNING")
    args = parser.parse_args(argv)

    from celery import signals

    from vancetope_brain.config import Config
    from workers.celery_app import create_celery

    config = Config.from_env()
    model = _model()
    app = create_celery(config, model_for=lambda process: model)
    if args.no_task_events:
        app.conf.worker_send_task_events = False
    _NAME[0] = args.name
    if config.redis_url:
        _install_instrumentation(app, config.redis_url, args.parts, args.waits)

    if args.ready_file:
        ready = Path(args.ready_file)

        @signals.worker_ready.connect(weak=False)
        def _ready(**_):  # type: ignore[no-untyped-def]
            ready.write_text(str(os.getpid()))

    worker_args = [
        "worker", f"--pool={args.pool}", f"--concurrency={args.concurrency}",
        f"--hostname={args.name}@%h", f"--loglevel={args.loglevel}",
        "--prefetch-multiplier=1",
        # Mingle only syncs revoked ids at start-up (costs ~1 s per start); gossip stays on.
        "--without-mingle",
    ]
    if not args.cprofile_out:
        app.worker_main(worker_args)
        return 0
    import cProfile
    import pstats

    # CPU time of each thread, so time spent waiting for Redis/SQLite/the broker is not
    # counted (the wall-clock split is what --parts measures). A threads pool's tasks run in
    # its threads, each profiled on its own as gunicorn_cprofile.py does; gevent's greenlets
    # share the main thread and its profile (a greenlet switch does not change the hook).
    profiles = [cProfile.Profile(time.thread_time)]
    if args.pool == "threads":
        original_run = threading.Thread.run

        def profiled_run(self: threading.Thread) -> None:
            profile = cProfile.Profile(time.thread_time)
            profiles.append(profile)
            profile.enable()
            try:
                original_run(self)
            finally:
                profile.disable()

        threading.Thread.run = profiled_run  # type: ignore[method-assign]
    profiles[0].enable()
    try:
        app.worker_main(worker_args)
    finally:
        profiles[0].disable()
        stats = pstats.Stats(profiles[0])
        for profile in profiles[1:]:
            profile.create_stats()
            stats.add(profile)
        stats.dump_stats(args.cprofile_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
