"""Idle-socket benchmark: many open WebSockets on one gateway process, mostly idle.

    python benchmarks/idle_sockets.py --sockets 1000 --idle 60 --period 60 --active 60

The target (issue 16): 1,000 idle WebSockets on one gateway process take ≤ 300 MB RSS and
no CPU while idle; 1,000 clients each sending one message a minute do not raise the p99 of
an active client above 10 ms.

What runs is ``lane_turns.py``'s cluster (its ``Cluster``, ``WsConn`` and ``Bench`` are
imported, not copied): the gateway ``vancetope_gateway.wsgi:app`` under gunicorn
``gthread``, 1 worker process, ``--sockets + 17`` threads (``--gateway-threads``), and
``--workers`` real Celery worker processes with the zero-latency model; Redis is a
database claimed for the run and flushed at start and end; the store a fresh SQLite file;
the caps of the one benchmark user (connections, sessions) lifted as ``lane_turns.py``
does. The client is this process: one thread, a selector over ``--sockets + 1``
authenticated WebSockets, each bound to its own session (``session-create``; one chat
process each, whose INIT turn ends before anything is measured). It answers the
gateway's pings all along.

Phases:

1. idle: nobody sends for ``--idle`` seconds. Reported: the gateway worker process's RSS
   (``VmRSS``) and thread count at the end, its CPU over the window (and Redis's).
2. active alone: socket 0 sends ``process-steer`` in a closed loop (next message as soon
   as its turn ended) for ``--active`` seconds while the other sockets stay idle.
3. active + background: the same, while each of the ``--sockets`` background sockets
   sends one message every ``--period`` seconds, spread evenly (socket i at
   t0 + i·period/N, then every period), for ``--active`` seconds.

latency = from just before the client's ``send()`` of a ``process-steer`` to the
``recv()`` of the first ``event`` frame of that session after it (the turn's
``status-changed → RUNNING``), as in ``lane_turns.py``. Reported for the active client
in phases 2 and 3 (p50/p90/p99/max), and for the background sends of phase 3.

Comparison (``benchmarks/_compare.py``): after the phases, with the gateway and workers
stopped, the bare Celery round trip (same worker shape) and the LangGraph peer are measured
and printed beside ours as ratios: the active client alone as the sequential first event
and turn, and the active client's p99 among the background senders against the same
baselines' sequential p99 (``--no-celery``, ``--no-peer``, ``--peer-quick`` as there).

Stops by itself (``--timeout``); Ctrl-C and SIGTERM kill every child it started.
"""

from __future__ import annotations

import argparse
import heapq
import json
import selectors
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _compare  # noqa: E402
import lane_turns  # noqa: E402
from _redis import check_url, claimed_db  # noqa: E402
from lane_turns import (  # noqa: E402
    Bench,
    Cluster,
    Session,
    WsConn,
    bench_env,
    bench_token,
    clean_up,
    cpu_seconds,
    failed,
    pct,
    trap_signals,
)


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def rss_mb(pid: int) -> float:
    return int(_status(pid).get("VmRSS", "0 kB").split()[0]) / 1024


def threads(pid: int) -> int:
    return int(_status(pid).get("Threads", "0"))


@dataclass
class Window:
    """Latencies of one phase, split by who sent."""
    active: list[float] = field(default_factory=list)
    active_done: list[float] = field(default_factory=list)  # send → the turn ended
    background: list[float] = field(default_factory=list)
    sent: int = 0
    done: int = 0


class Driver:
    """Sends and times messages over ``Bench``'s sockets and selector."""

    def __init__(self, bench: Bench, deadline: float) -> None:
        self.bench = bench
        self.deadline = deadline
        self.active = bench.sessions[0]
        self.background = bench.sessions[1:]
        self.window = Window()
        self.timers: list[tuple[float, int, Session]] = []
        self.closed_loop = False
        self.errors: dict[str, int] = {}

    def send(self, s: Session) -> None:
        if s.content is not None:  # still in flight: skip this slot
            return
        s.sent += 1
        self.window.sent += 1
        s.content = f"{'a' if s is self.active else 'b'}{s.index} m{s.sent}"
        s.first_ns = None
        s.drained = False
        s.send_ns = time.perf_counter_ns()
        s.request("process-steer", {"targetThinkProcessId": s.pid, "content": s.content})

    def on_frame(self, s: Session, raw: str, t_ns: int) -> None:
        frame = json.loads(raw)
        kind = frame.get("type")
        if kind == "error":
            code = frame["data"].get("code", "?")
            self.errors[code] = self.errors.get(code, 0) + 1
            s.content = None  # refused: the slot is lost, the loop goes on
            if s is self.active and self.closed_loop:
                heapq.heappush(self.timers, (time.perf_counter() + 0.05, id(s), s))
            return
        if kind != "event" or s.content is None:
            return
        ev = frame["data"]
        if s.first_ns is None:
            s.first_ns = t_ns
            ms = (t_ns - s.send_ns) / 1e6
            (self.window.active if s is self.active else self.window.background).append(ms)
        if ev["processId"] != s.pid:
            return
        if ev["type"] == "chat-message" and ev["data"].get("role") == "user" and \
                ev["data"].get("content") == s.content:
            s.drained = True
        elif ev["type"] == "status-changed" and ev["data"].get("to") != "RUNNING" and s.drained:
            s.content = None
            self.window.done += 1
            if s is self.active:
                self.window.active_done.append((time.perf_counter_ns() - s.send_ns) / 1e6)
            if s is self.active and self.closed_loop:
                self.send(s)

    def run(self, label: str, seconds: float) -> Window:
        """Serve the sockets for ``seconds`` (timers and the active loop as set up), then
        let the messages in flight finish (at most 10 s more)."""
        self.window = Window()
        if self.closed_loop:
            self.send(self.active)
        end = time.monotonic() + seconds
        next_progress = time.monotonic() + 5
        sel = self.bench.sel
        while True:
            now = time.monotonic()
            if now >= end:
                self.closed_loop = False
                self.timers.clear()
                in_flight = [s for s in self.bench.sessions if s.content is not None]
                if not in_flight or now >= end + 10:
                    return self.window
            if now > self.deadline:
                raise RuntimeError("run deadline reached")
            wait = 0.2
            if self.timers:
                wait = max(0.0, min(wait, self.timers[0][0] - time.perf_counter()))
            for key, _ in sel.select(wait):
                s: Session = key.data
                alive = s.conn.feed()
                t = time.perf_counter_ns()
                for raw in s.conn.pending:
                    self.on_frame(s, raw, t)
                s.conn.pending.clear()
                if not alive:
                    raise RuntimeError(f"socket {s.index}: the gateway closed it")
            while self.timers and self.timers[0][0] <= time.perf_counter():
                _, _, s = heapq.heappop(self.timers)
                self.send(s)
            if now >= next_progress:
                next_progress = now + 5
                self.bench.cluster.check_alive()
                recent = self.window.active[-500:]
                p99 = f", active p99 {pct(recent, 99):.2f} ms" if recent else ""
                print(f"  {label}: {now - end + seconds:.0f}/{seconds:.0f} s, "
                      f"{self.window.sent} sent, {self.window.done} done{p99}", flush=True)

    def schedule_background(self, period: float, seconds: float) -> None:
        t0 = time.perf_counter()
        n = len(self.background)
        for i, s in enumerate(self.background):
            at = t0 + i * period / n
            while at < t0 + seconds:
                heapq.heappush(self.timers, (at, id(s) + int(at * 1e6), s))
                at += period


def connect(bench: Bench, count: int) -> None:
    """Open ``count`` sockets with a session each, answering the gateway's pings and
    taking replies in between (``Bench.connect`` opens them all first, which takes long
    enough at 1,000 for the first ones to miss a ping)."""
    for i in range(count):
        s = Session(i, WsConn(bench.cluster.port, bench.token))
        bench.sessions.append(s)
        bench.sel.register(s.conn.sock, selectors.EVENT_READ, s)
        s.create_rid = s.request("session-create", {"title": f"idle {i}"})
        poll(bench, s)
        if i % 20 == 19:
            for key, _ in bench.sel.select(0):
                poll(bench, key.data)
        if i % 100 == 99:
            print(f"  connect: {i + 1}/{count} sockets open", flush=True)
    bench.loop(lambda: all(s.ready for s in bench.sessions), "connect",
               bench.args.phase_timeout)


def poll(bench: Bench, s: Session) -> None:
    """What the socket holds, through ``Bench.on_frame`` (session-create, INIT turn)."""
    if not s.conn.pending and not s.conn.feed():
        raise RuntimeError(f"socket {s.index}: the gateway closed it")
    t = time.perf_counter_ns()
    for raw in s.conn.pending:
        bench.on_frame(s, raw, t)
    s.conn.pending.clear()


def _latency(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"n": len(values), **{f"p{p}": round(pct(values, p), 2) for p in (50, 90, 99)},
            "max": round(max(values), 2)}


def _fmt(name: str, stats: dict[str, float]) -> str:
    if not stats:
        return f"{name}: no samples"
    return (f"{name}: {stats['n']} messages, p50 {stats['p50']:.2f} ms, p90 {stats['p90']:.2f}"
            f" ms, p99 {stats['p99']:.2f} ms, max {stats['max']:.2f} ms")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sockets", type=int, default=1000, help="idle/background WebSockets "
                   "(default 1000), each bound to its own session; plus one active")
    p.add_argument("--idle", type=float, default=60, help="idle window, seconds (default 60)")
    p.add_argument("--active", type=float, default=60,
                   help="each of the two latency phases, seconds (default 60)")
    p.add_argument("--period", type=float, default=60,
                   help="seconds between two messages of one background socket (default 60)")
    p.add_argument("--workers", type=int, default=2, help="Celery worker OS processes")
    p.add_argument("--gateway-threads", type=int, default=0,
                   help="gunicorn threads (default sockets + 17: one per socket, as the "
                        "gthread worker holds a thread per open WebSocket)")
    p.add_argument("--redis-url", help="pin the Redis database (default: claim a free one)")
    p.add_argument("--timeout", type=float, default=600, help="whole run, seconds")
    p.add_argument("--source", help="run the product code from this directory (A/B)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs, SQLite)")
    _compare.add_arguments(p)
    args = p.parse_args(argv)
    if (problem := check_url(args.redis_url)):
        p.error(problem)
    return args


def cluster_args(args: argparse.Namespace) -> argparse.Namespace:
    """``lane_turns.py``'s options for its ``Cluster`` and ``Bench``: gunicorn, pool solo."""
    argv = ["--processes", str(args.sockets + 1), "--workers", str(args.workers),
            "--gateway-threads", str(args.gateway_threads or args.sockets + 17),
            "--phase-timeout", str(max(120.0, args.sockets / 5))]
    if args.source:
        argv += ["--source", args.source]
    lane = lane_turns.parse_args(argv)
    lane.redis_url = args.redis_url
    return lane


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with claimed_db(args.redis_url) as args.redis_url:
        return run(args)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    deadline = started + args.timeout
    lane = cluster_args(args)
    tmp = Path(tempfile.mkdtemp(prefix="vt-idle-"))
    db_path = tmp / "bench.db"
    env = bench_env(lane, tmp, db_path)
    if lane.source:
        sys.path.insert(0, lane.source)
    rclient = redis.Redis.from_url(args.redis_url)  # claimed empty; released flushed

    trap_signals()
    cluster = Cluster(lane, env, tmp)
    bench: Bench | None = None
    ok = False
    try:
        token = bench_token(env)
        print(f"starting gateway (gunicorn gthread, {lane.gateway_threads} threads) and "
              f"{args.workers} worker(s) [logs in {tmp}]", flush=True)
        cluster.start()
        cluster.wait_ready(60)
        print(f"ready; opening {args.sockets + 1} sockets, one session each", flush=True)
        bench = Bench(lane, cluster, token, db_path, rclient, deadline)
        connect(bench, args.sockets + 1)
        # The gunicorn worker: of the arbiter's process tree, the one holding the sockets.
        gateway_pid = max(cluster.pids("gateway"), key=rss_mb)
        rpid = int(rclient.info("server")["process_id"])
        driver = Driver(bench, deadline)
        driver.run("settle", 3)

        print(f"phase idle: {args.idle:g} s, nobody sends", flush=True)
        cpu0, r0, t0 = cpu_seconds([gateway_pid]), cpu_seconds([rpid]), time.monotonic()
        driver.run("idle", args.idle)
        wall = time.monotonic() - t0
        idle = {"seconds": round(wall, 1),
                "gateway_cpu_pct": round(100 * (cpu_seconds([gateway_pid]) - cpu0) / wall, 2),
                "redis_cpu_pct": round(100 * (cpu_seconds([rpid]) - r0) / wall, 2),
                "gateway_rss_mb": round(rss_mb(gateway_pid), 1),
                "gateway_threads": threads(gateway_pid)}

        print(f"phase active: socket 0 in a closed loop for {args.active:g} s, the rest idle",
              flush=True)
        driver.closed_loop = True
        alone = driver.run("active", args.active)

        print(f"phase loaded: the same, while {args.sockets} sockets send one message every "
              f"{args.period:g} s", flush=True)
        driver.closed_loop = True
        driver.schedule_background(args.period, args.active)
        c0 = cpu_seconds([gateway_pid])
        loaded = driver.run("loaded", args.active)
        loaded_cpu = cpu_seconds([gateway_pid]) - c0
        rss_end = round(rss_mb(gateway_pid), 1)

        bench.close()
        cluster.stop()
        base = _compare.measure(args, args.redis_url, tmp, _compare.Shape(
            workers=args.workers, pool="solo", concurrency=1, in_flight=args.sockets + 1))
        ours = _compare.Ours(
            first_event_p50_ms=_latency(alone.active).get("p50"),
            first_event_p99_ms=_latency(alone.active).get("p99"),
            done_p50_ms=round(pct(alone.active_done, 50), 2) if alone.active_done else None)
        extra = [_compare.Row(f"first event p99 ms among {args.sockets} background senders",
                              _latency(loaded.active).get("p99"), base.celery.seq_p99_ms,
                              base.peer.first_event_p99_ms)]
        results: dict[str, Any] = {
            "idle": idle,
            "active_alone_ms": _latency(alone.active),
            "active_loaded_ms": _latency(loaded.active),
            "background_ms": _latency(loaded.background),
            "loaded_gateway_cpu_ms_per_message": round(1000 * loaded_cpu / max(loaded.done, 1),
                                                       2),
            "gateway_rss_mb_end": rss_end,
            "errors": driver.errors,
            "comparison": _compare.as_dict(base, ours, extra),
        }
        print()
        print(f"configuration: {args.sockets} background sockets + 1 active, one session each; "
              f"gateway gunicorn gthread, 1 process, {lane.gateway_threads} threads; "
              f"{args.workers} worker process(es), pool solo; background period "
              f"{args.period:g} s")
        print(f"idle {idle['seconds']} s: gateway RSS {idle['gateway_rss_mb']} MB, "
              f"{idle['gateway_threads']} threads, CPU {idle['gateway_cpu_pct']} % of a core "
              f"(Redis {idle['redis_cpu_pct']} %)")
        print(_fmt("active client alone      ", results["active_alone_ms"]))
        print(_fmt("active client + background", results["active_loaded_ms"]))
        print(_fmt("background sends          ", results["background_ms"]))
        print(f"loaded phase: gateway CPU {results['loaded_gateway_cpu_ms_per_message']} ms per "
              f"message; RSS at the end {results['gateway_rss_mb_end']} MB"
              + (f"; error frames {driver.errors}" if driver.errors else ""))
        _compare.print_table(base, ours, extra)
        if args.json:
            Path(args.json).write_text(json.dumps({"config": vars(args) | {"redis_url": None},
                                                   "results": results}, indent=2))
        ok = True
        return 0
    except (KeyboardInterrupt, Exception) as e:
        return failed(cluster, e)
    finally:
        clean_up(args, tmp, ok, bench, cluster)
        rclient.close()


if __name__ == "__main__":
    sys.exit(main())
