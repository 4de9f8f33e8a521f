"""A long chat's turn against a short one's: worker CPU of one Arthur turn, in-process.

    python benchmarks/long_chat.py [--processes 100] [--lines 1000] [--short 10]
                                   [--turns 300] [--cprofile]

Runs against the real Redis (a database claimed for the run, ``benchmarks/_redis.py``) and
a fresh SQLite file, with the product's own worker (``create_celery(config, model_for=<the
zero-latency model of bench_worker.py>)``, its ``LaneRunner``) and gateway services, all
in this process and at the default settings (``--env KEY=VALUE`` sets a worker variable,
e.g. ``VANCETOPE_CHAT_CACHE_LINES``).

``--processes`` Arthur chats are filled with about ``--lines`` committed lines each, and as
many others with about ``--short``, the way ``history.py`` fills its own processes: turns
of 1–19 user messages (15–195 characters of text) answered by one reply each — here
through the product (``sessions.steer`` then ``LaneRunner.run``), so the model answers
"pong" where ``history.py`` copies replies of 40–640 characters. Then ``--turns`` turns
(one steered message each) go round the long chats and as many round the short ones,
alternating in blocks of ``--block``; the figure is the CPU time of this thread per
``LaneRunner.run`` (the turn: lease, epoch, engine, commit, publish), and the ratio
long / short. ``--cprofile`` profiles the long chats' turns.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
SOURCE = os.path.abspath(sys.argv[sys.argv.index("--source") + 1]) \
    if "--source" in sys.argv[:-1] else None
if SOURCE:  # imported from there first: ``_redis`` imports it too
    sys.path.insert(0, SOURCE)
    import vancetope_brain  # noqa: F401

from _redis import check_url, claimed_db, reset  # noqa: E402

if SOURCE:  # ahead of the checkout ``_redis`` put first (``workers``, the gateway)
    sys.path.insert(0, SOURCE)

TEXT = ("the of and to in is that for it as was with be by on not he this are or his from at "
        "which but have an they you were her she there been one all we their has would when "
        "if so no will more can out up other into could time some them only do new about "
        "report process worker summary question answer project result file data plan ") * 4


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=100, help="long chats (and short ones)")
    p.add_argument("--lines", type=int, default=1000, help="lines of a long chat")
    p.add_argument("--short", type=int, default=10, help="lines of a short chat")
    p.add_argument("--turns", type=int, default=300, help="timed turns of each kind")
    p.add_argument("--block", type=int, default=50, help="turns of one kind in a row")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--redis-url", help="pin the Redis database (default: claim a free one)")
    p.add_argument("--source", help="import the product code from this directory instead of "
                                    "this checkout (A/B)")
    p.add_argument("--cprofile", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if (problem := check_url(args.redis_url)):
        p.error(problem)
    with claimed_db(args.redis_url) as url:
        tmp = Path(tempfile.mkdtemp(prefix="vt-long-chat-"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VANCETOPE_", "OPENAI_"))}
        env.update(VANCETOPE_REDIS_URL=url, VANCETOPE_STORE_URL=f"sqlite:///{tmp / 'bench.db'}",
                   VANCETOPE_DATA_DIR=str(tmp),
                   VANCETOPE_MAX_SESSIONS_PER_USER=str(2 * args.processes + 10))
        env.update(kv.split("=", 1) for kv in args.env)
        reset(url)
        try:
            return run(args, env)
        finally:
            reset(url)
            shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, env: dict[str, str]) -> int:
    # Imported here, after --source went onto sys.path: it imports the product.
    from _inproc import bench_user, in_process

    import vancetope_brain

    product = in_process(env)
    config, brain = product.config, product.brain
    who = bench_user(brain)
    runner, sessions = product.worker.runner, brain.sessions
    rng = random.Random(args.seed)
    print(f"product: {os.path.dirname(vancetope_brain.__file__)}", flush=True)

    def drop_queues() -> None:  # the steers' Celery messages are not consumed here
        for q in range(config.lane_shards):
            brain.redis.delete(f"lanes.{q}")

    def turn(pid: str, texts: list[str]) -> None:
        for text in texts:
            sessions.steer(who, pid, text)
        outcome = runner.run("bench", pid)
        if outcome.value != "committed":
            raise RuntimeError(f"{pid}: {outcome}")

    def text() -> str:
        start = rng.randrange(len(TEXT) - 200)
        return TEXT[start:start + rng.randint(15, 195)]

    def fill(lines: int) -> str:
        pid = sessions.create(who, title="b").chat_process_id
        runner.run("bench", pid)  # INIT: the welcome line
        count = 1
        while count < lines:
            n = min(rng.randint(1, 19), max(1, lines - count - 1))
            turn(pid, [text() for _ in range(n)])
            count += n + 1
        drop_queues()
        return pid

    started = time.monotonic()
    long = [fill(args.lines) for _ in range(args.processes)]
    short = [fill(args.short) for _ in range(args.processes)]
    print(f"{args.processes} chats of ~{args.lines} lines and {args.processes} of "
          f"~{args.short}, filled in {time.monotonic() - started:.0f} s", flush=True)

    cpu = {"long": 0.0, "short": 0.0}
    done = {"long": 0, "short": 0}
    profiler = cProfile.Profile(time.thread_time) if args.cprofile else None
    # One unmeasured round of each first: every chat's lines as a running worker holds them.
    for pid in long + short:
        turn(pid, [text()])
    drop_queues()
    while min(done.values()) < args.turns:
        for kind, pids in (("long", long), ("short", short)):
            for _ in range(args.block):
                pid = pids[done[kind] % len(pids)]
                sessions.steer(who, pid, text())
                if profiler is not None and kind == "long":
                    profiler.enable()
                t0 = time.thread_time()
                outcome = runner.run("bench", pid)
                cpu[kind] += time.thread_time() - t0
                if profiler is not None:
                    profiler.disable()
                if outcome.value != "committed":
                    raise RuntimeError(f"{pid}: {outcome}")
                done[kind] += 1
            drop_queues()
    per = {k: cpu[k] * 1000 / done[k] for k in cpu}
    print(f"worker CPU per turn: long {per['long']:.2f} ms, short {per['short']:.2f} ms, "
          f"ratio {per['long'] / per['short']:.2f}× ({done['long']} turns each)")
    if profiler is not None:
        print("\ncProfile (CPU time) of the long chats' turns, top 30 by own time:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    product.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
