"""Where a lane turn's time goes: the parts of one turn, timed in-process, many times.

    python benchmarks/turn_breakdown.py [--iterations 2000] [--processes 100] [--cprofile]

Runs against the real Redis (a database claimed for the run, see ``benchmarks/_redis.py``;
``--redis-url`` pins one; FLUSHED at start and end) and a fresh SQLite file (``--store postgres``:
a PostgreSQL database of the run's own, as ``lane_turns.py``'s; the server backend's CPU per
turn is then printed too), with the product's own objects:
``create_celery(config, model_for=<zero-latency model>)``'s worker parts and a gateway's on one store — so ``wake``
really publishes a Celery task to Redis (nobody consumes it; the queues are dropped at the
end) — and the gateway's ``Connection`` on a fake socket.

Each iteration, for chat process ``i mod --processes`` (``--processes`` sessions, so the chat
history grows as in ``lane_turns.py``):

1. ``steer``: ``Connection.handle`` of a ``process-steer`` frame (JSON, envelope and frame
   validation, ``sessions.steer`` → ``store.get_process``, ``store.append_message``,
   ``waker.wake`` = the wake script (one EVALSHA) + Celery ``send_task`` when it queues a
   shard task — rarely here, as nobody consumes them: ``lane_turns.py`` measures a real
   producer's share —, the untitled-session check, reply serialisation).
2. ``turn``: ``LaneRunner.run`` — what the Celery task body does: ``waker.clear`` (DEL),
   lease ``try_acquire`` (SET NX PX), ``get_process``, ``pending_messages(limit=1)``,
   ``acquire_epoch``, ``events.publish`` (RUNNING), the engine (``ford.steer``: drain =
   ``pending_messages``, ``chat_history``, model, one token ``publish``), ``commit_turn``,
   3 × ``publish`` (2 chat-message, status IDLE), lease ``release`` (Lua), and the
   post-release ``pending_messages(limit=1)``.
3. ``fanout``: what the gateway does with the turn's 5 events: ``events.read_live`` (XRANGE
   into ``LiveEvent``s, undecoded, as the listener thread reads a log after XREAD; news
   carries the same bodies without the read) and ``Connection._on_event`` per event (the
   logged JSON framed as it is → the connection's outbound queue; the hub sends).

The parts are timed by wrapping the runner's and the services' collaborators in timing
proxies (no product code is changed); nested calls are listed under their caller.
"(own)" is a caller's time not spent in a timed callee (pydantic models, context, …).
Not included: the Celery worker's own overhead (receive, ack, task events) and the
network hops between OS processes — ``lane_turns.py`` measures the whole path.

Comparison (``benchmarks/_compare.py``), measured after the iterations: our CPU and wall time
per turn (steer + turn + fan-out, in this thread) next to the bare Celery round trip (a no-op
task to 2 solo Celery workers through the same Redis database: CPU per task, round trip p50)
and the LangGraph peer (CPU per run, the server's own execution time of a run), as ratios.
``--no-peer``/``--peer-quick``/``--no-celery``.

``--statements`` also counts the store's statements and pool checkouts (and, on PostgreSQL,
the server backend's CPU per statement) per part and store call (``_statements.py``).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# ``--source DIR`` goes first on the path before the helpers below are imported: ``_redis``
# imports the product (``tests.redis_claim``), and a module imported once stays the one
# every later import gets (before, A/B runs with ``--source`` ran this checkout's code).
if "--source" in sys.argv[1:-1]:
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--source") + 1]))

import _compare  # noqa: E402
import _store  # noqa: E402
from _redis import check_url, claimed_db, reset  # noqa: E402
from _statements import StatementCounter  # noqa: E402
from _timing import Timed, Timer, format_tree, instrument_worker  # noqa: E402


class FakeSocket:
    """The hub's side of a connection, without a socket: a thread of its own drains the
    connection's outbound queue whenever ``pump`` is called (called holding the
    connection's lock, so it cannot drain there), keeping the last frames in ``sent``."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.connection: Any = None
        self._pumped = threading.Event()
        threading.Thread(target=self._drain, name="bench-drain", daemon=True).start()

    def pump(self) -> None:
        self._pumped.set()

    def abort(self) -> None:
        pass

    def _drain(self) -> None:
        while self._pumped.wait():
            self._pumped.clear()
            while self.connection is not None and \
                    (item := self.connection.outbound.take()) is not None:
                if isinstance(item, str):
                    self.sent.append(item)
                    if len(self.sent) > 64:
                        del self.sent[:-8]


class NoListener:
    """The gateway's EventListener without its thread (fan-out is timed separately)."""

    def follow(self, session_id: str, after_seq: int, callback: Any,
               on_gap: Any = None) -> int:
        return 1

    def unfollow(self, handle: int) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--processes", type=int, default=100)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--redis-url", help="pin the Redis database (default: claim a free one)")
    p.add_argument("--cprofile", action="store_true",
                   help="also print the top functions (cumulative) of the timed iterations")
    p.add_argument("--cprofile-out", metavar="FILE",
                   help="with --cprofile, also write the stats to FILE (pstats format)")
    p.add_argument("--source", help="import the product code from this directory instead of "
                   "the installed one (A/B runs)")
    p.add_argument("--no-extras", action="store_true",
                   help="skip the comparison micro-benchmarks after the table")
    p.add_argument("--json", help="also write the results as JSON to this file")
    p.add_argument("--statements", action="store_true",
                   help="also count the store's statements and pool checkouts per part and "
                        "store call (``_statements.py``)")
    _compare.add_arguments(p)
    _store.add_arguments(p)
    args = p.parse_args(argv)
    args.store_from = None
    if (problem := check_url(args.redis_url)):
        p.error(problem)
    with claimed_db(args.redis_url) as args.redis_url:
        return _main(args)


def _main(args: argparse.Namespace) -> int:

    tmp = Path(tempfile.mkdtemp(prefix="vt-breakdown-"))
    args.bench_store = store = _store.BenchStore.create(args, tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VANCETOPE_", "OPENAI_"))}
    env.update(VANCETOPE_REDIS_URL=args.redis_url,
               VANCETOPE_STORE_URL=store.url, VANCETOPE_DATA_DIR=str(tmp),
               # One user holds every session of the run: lift its cap.
               VANCETOPE_MAX_SESSIONS_PER_USER=str(2 * args.processes))
    reset(args.redis_url)
    try:
        return run(args, env, tmp)
    finally:
        reset(args.redis_url)
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, env: dict[str, str], tmp: Path) -> int:
    # Imported here, after --source went onto sys.path: they import the product.
    from _inproc import bench_user, in_process

    from vancetope_gateway.protocol import Connection

    product = in_process(env)
    config, store, app, brain = product.config, product.store, product.app, product.brain
    worker = product.worker
    who = bench_user(brain)

    timer = Timer()
    timer.enabled = False
    runner = worker.runner
    instrument_worker(worker, timer)
    sessions = brain.sessions
    sessions._sessions = Timed(sessions._sessions, "store", timer)
    sessions._lanes = Timed(sessions._lanes, "store", timer)
    brain = dataclasses.replace(brain, sessions=Timed(sessions, "sessions", timer))

    counter = StatementCounter.install(store) if args.statements else None
    conns, procs, socks = [], [], []
    for i in range(args.processes):
        sock = FakeSocket()
        conn = Connection(sock, who, brain, NoListener(), llm="bench",  # type: ignore[arg-type]
                          max_frame_bytes=config.max_frame_bytes,
                          frame_rate=1e9)  # steers as fast as the turns run
        sock.connection = conn
        conn.handle(json.dumps({"type": "session-create", "id": "c", "data": {"title": f"b{i}"}}))
        session = conn.session
        if session is None or not session.chat_process_id:
            raise RuntimeError(f"session-create failed: {sock.sent[-1:]}")
        conns.append(conn)
        socks.append(sock)
        procs.append(session.chat_process_id)
        runner.run("bench", session.chat_process_id)  # the INIT turn
    last_seq = {c.session.id: brain.events.last_seq(c.session.id) for c in conns}

    profiler = cProfile.Profile(time.thread_time) if args.cprofile else None
    total = args.warmup + args.iterations
    print(f"{args.processes} processes, {args.warmup} warm-up + {args.iterations} timed "
          f"iterations (steer → turn → fan-out), real Redis + {args.bench_store.describe()}", flush=True)
    server_cpu = 0.0
    for it in range(total):
        timing = it >= args.warmup
        timer.enabled = timing
        if counter is not None:
            counter.enabled = timing
        if timing and it == args.warmup:
            server_cpu = -args.bench_store.cpu_seconds().get("postgres", 0.0)
            if profiler is not None:
                profiler.enable()
        k = it % args.processes
        conn, pid = conns[k], procs[k]
        sid = conn.session.id
        frame = json.dumps({"type": "process-steer", "id": str(it), "data": {
            "targetThinkProcessId": pid, "content": f"message {it}"}})
        _phase(counter, "steer")
        timer.call("steer", conn.handle, frame)
        _phase(counter, "turn")
        outcome = runner.run("bench", pid)  # timed as "turn" by instrument_worker
        if outcome.value != "committed":
            raise RuntimeError(f"turn {it}: {outcome}; the steer got {socks[k].sent[-1:]}")
        _phase(counter, "fanout")
        events = timer.call("fanout", _fanout, brain, conn, sid, last_seq, timer)
        if events != 5:
            raise RuntimeError(f"turn {it}: {events} events, expected 5")
        # The steer's Celery message is not consumed here; keep the queues short.
        if it % 200 == 199:
            for q in range(config.lane_shards):
                brain.redis.delete(f"lanes.{q}")
    if profiler is not None:
        profiler.disable()
    server_cpu += args.bench_store.cpu_seconds().get("postgres", 0.0)

    if counter is not None:
        counter.enabled = False
    report(timer, args.iterations)
    if counter is not None:
        print(counter.report(args.iterations))
    if args.bench_store.kind == "postgres":
        print(f"PostgreSQL server backends: {server_cpu * 1000 / args.iterations:.3f} ms CPU "
              "per iteration (steer + turn + fan-out), not in the figures above")
    extras = {} if args.no_extras else measure_extras(brain, app, config, conns)
    # The in-process turn against the distributed baselines: our CPU and wall time per turn
    # (steer + turn + fan-out, in this thread) next to a whole bare Celery round trip and the
    # peer's server-side execution of a run.
    top = ("steer", "turn", "fanout")
    ours = _compare.Ours(cpu_ms=sum(timer.cpu_ns[k] for k in top) / args.iterations / 1e6)
    wall_ms = sum(sum(timer.samples[k]) for k in top) / args.iterations / 1e6
    base = _compare.measure(args, args.redis_url, tmp, _compare.Shape(in_flight=args.processes))
    extra = [_compare.Row("in-process steer+turn+fan-out ms (Celery: round trip p50, "
                          "peer: server exec p50)", wall_ms, base.celery.seq_p50_ms,
                          base.peer.exec_p50_ms)]
    _compare.print_table(base, ours, extra)
    if args.json:
        Path(args.json).write_text(json.dumps({"parts": {
            path: {"calls_per_turn": len(v) / args.iterations,
                   "p50_us": statistics.median(v) / 1000,
                   "mean_per_turn_us": sum(v) / 1000 / args.iterations}
            for path, v in timer.samples.items()}, "extras": extras,
            "comparison": _compare.as_dict(base, ours, extra)}, indent=2))
    if profiler is not None:
        print("\ncProfile (CPU time of this thread) of the timed iterations, top 35 by own time:")
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(35)
        if args.cprofile_out:
            stats.dump_stats(args.cprofile_out)
    product.close()
    return 0


def _phase(counter: StatementCounter | None, name: str) -> None:
    if counter is not None:
        counter.phase = name


def _p50(fn: Any, n: int = 1000) -> tuple[float, float]:
    """p50 and p90 in µs of ``fn()`` over ``n`` calls (after 50 unmeasured ones)."""
    for _ in range(50):
        fn()
    xs = []
    for _ in range(n):
        start = time.perf_counter_ns()
        fn()
        xs.append(time.perf_counter_ns() - start)
    xs.sort()
    return xs[len(xs) // 2] / 1000, xs[int(len(xs) * .9)] / 1000


def measure_extras(brain: Any, app: Any, config: Any, conns: list[Any]) -> dict[str, Any]:
    """Micro-benchmarks that put the parts above in proportion (what could a change save?)."""
    import redis as redis_lib

    from vancetope_brain import keys
    from workers.tasks import LANE_TURN

    client = brain.redis
    out: dict[str, Any] = {}
    rows: list[tuple[str, float, float]] = []

    def row(name: str, fn: Any, n: int = 1000) -> None:
        p50, p90 = _p50(fn, n)
        rows.append((name, p50, p90))
        out[name] = {"p50_us": p50, "p90_us": p90}

    row("Redis PING (one round trip)", client.ping)
    row("Redis SET NX PX + DEL (wake flag set, then cleared: 2 round trips)",
        lambda: client.set("bench:x", 1, nx=True, px=1000) and client.delete("bench:x"))
    row("raw LPUSH of a Celery-sized message (~1.3 kB)",
        lambda: client.lpush("bench:q", b"x" * 1300))
    client.delete("bench:q")
    row("Celery send_task to a lane queue (kombu, as wake does)",
        lambda: app.send_task(LANE_TURN, args=["bench", "proc_x"], queue="lanes.0"))
    client.delete("lanes.0")
    pool = client.connection_pool
    row("redis.Redis(connection_pool=…) — kombu builds one per publish/ack",
        lambda: redis_lib.Redis(connection_pool=pool))
    from vancetope_brain.events import EventType

    bus = brain.events
    script = bus._publish

    def three_publishes() -> None:
        for _ in range(3):
            bus.publish("bench", "p", EventType.TOKEN, {"text": "x"})

    def three_publishes_pipelined() -> None:
        # The bus's own publish() builds keys and args; only the round trips are batched.
        captured: list[tuple[list[Any], list[Any]]] = []
        bus._publish = lambda keys, args: captured.append((keys, args)) or [0]
        try:
            for _ in range(3):
                bus.publish("bench", "p", EventType.TOKEN, {"text": "x"})
        finally:
            bus._publish = script
        pipe = client.pipeline(transaction=False)
        for k, a in captured:
            pipe.evalsha(script.sha, len(k), *k, *a)
        pipe.execute()

    row("3 × events.publish, one after the other (as after commit_turn)", three_publishes)
    row("the same 3 publishes as EVALSHAs in one pipeline (one round trip)",
        three_publishes_pipelined)
    # An XREAD over every followed session's stream: what the gateway listener did on
    # every round before it read only the logs named in news.
    for n in (1, 100, 1000):
        streams = {keys.events(f"bench{i}"): "0-0" for i in range(n)}
        client.xadd(keys.events("bench0"), {"e": "{}"}, maxlen=1)
        row(f"listener XREAD over {n} followed stream(s), one has an event",
            lambda streams=streams: client.xread(streams, count=500), 300)
    conn = conns[0]
    event = brain.events.read_live(conn.session.id, 0)[-1]
    row("Connection._on_event (one logged event → frame → queue)", lambda: conn._on_event(event))
    row("EventBus.read: XRANGE, decode + StreamEvent (one event)",
        lambda: brain.events.read(conn.session.id, event.seq - 1))
    for key in client.scan_iter("bench*"):
        client.delete(key)
    client.delete(keys.events("bench"), keys.event_seq("bench"))

    print(f"\n{'comparison micro-benchmarks (same Redis, same process)':<72} {'p50 µs':>8} "
          f"{'p90 µs':>8}")
    print("-" * 90)
    for name, p50, p90 in rows:
        print(f"{name:<72} {p50:>8.0f} {p90:>8.0f}")
    return out


def _fanout(brain: Any, conn: Any, sid: str, last_seq: dict[str, int], timer: Timer) -> int:
    events = timer.call("events.read_live (listener: XRANGE, no decode)",
                        brain.events.read_live, sid, last_seq[sid])
    for event in events:
        timer.call("connection._on_event (frame → JSON → queue)", conn._on_event, event)
    if events:
        last_seq[sid] = events[-1].seq
    return len(events)


def report(timer: Timer, iterations: int) -> None:
    print()
    print(format_tree(timer.snapshot(), iterations, cpu_ns=dict(timer.cpu_ns)))
    print("p50/p90 are per call (wall); µs/turn = mean wall time per iteration (calls × mean); "
          "(own) = the caller's time outside its timed callees; CPU = this thread's CPU time "
          "(the rest of the wall time is waiting for Redis and SQLite).")


if __name__ == "__main__":
    sys.exit(main())
