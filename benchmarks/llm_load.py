"""LLM-shaped load: every process streams a long reply at once, token by token.

    python benchmarks/llm_load.py --processes 500 --rounds 3 --workers 2 --concurrency 250

What runs is ``lane_turns.py``'s cluster (its ``Cluster`` and ``WsConn`` are imported, not
copied): a gunicorn gateway, ``--workers`` Celery worker OS processes
(``bench_worker.py``), Redis (a claimed database, empty at start and flushed at the end: see
``benchmarks/_redis.py``), a fresh SQLite file, and this process as the WebSocket client —
one socket per session, one ``ford`` chat process per session.

The chat engine is ``ford`` (the tenant's ``session.defaultChatEngine``): it streams the
model's text as it comes. The model (``--model``) is by default the product's
``OpenAiChatModel`` against ``paced_endpoint.py``, an OpenAI-compatible endpoint started with
the cluster (the workers get ``BENCH_MODEL=endpoint:URL``), which streams ``--tokens`` tokens
over ``--seconds`` seconds per turn, each carrying its index and its emission time (µs, taken
when the endpoint writes it): the worker's real model path, its HTTP client and the model
loop included, with the endpoint's CPU reported apart and left out of the total.
``--model paced`` is ``PacedModel`` (``vancetope_brain.llm.testing``;
``BENCH_MODEL=paced:TOKENS:SECONDS``) inside the worker instead, sleeping between tokens on
the turn's thread (emission time taken in the worker right before ``on_token``): the shape of
the runs before the model loop. The worker pool is ``threads`` with ``--concurrency`` threads per worker process, so the turns of one
worker wait for their model side by side; ``--pool``/``--concurrency`` try other shapes.

Each round, every session sends one ``process-steer`` at once, so ``--processes`` turns
are in flight together; the round ends when every turn has ended (the user's chat line,
then the status out of RUNNING, arrived). The client checks that every session received
exactly its tokens 0..N-1, in order, each once, before its turn's ``chat-message``s (a
``token`` event may hold several tokens when the product merges them); any deviation is
counted and makes the run fail.

Reported per round and over all rounds:

- tokens/s delivered = tokens received ÷ (first send → last turn ended);
- delay = a token's arrival at the client (``time.time_ns()`` right after the ``recv`` that
  held it) − its emission (same machine, same clock): p50/p90/p99/max;
- CPU per token (µs) of each OS process (from ``/proc``, as ``lane_turns.py``), and in
  total (without the endpoint); "other processes" is the rest of the machine;
- the turn time (send → turn ended) p50/p99, and event frames received per token;
- at the end: RSS, threads and open file descriptors of each OS process, and the Redis
  connections to the run's database.

Comparison (``benchmarks/_compare.py``): after the rounds, with the gateway and workers
stopped, the bare Celery round trip (2 worker processes, the same pool and concurrency,
``--processes`` tasks in flight) and the LangGraph peer are measured and printed next to
ours as ratios: turns/s with every process's turn in flight, CPU ms per turn (all
processes), and the token delay p50/p99 beside a sequential Celery round trip and the
peer's sequential first event — the floor of one hop through a broker, and the peer's own
first-event latency (``--no-celery``/``--no-peer``/``--peer-quick``).

Stops by itself (``--timeout``, and a deadline per round); Ctrl-C or SIGTERM kill every
child it started.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
import _compare  # noqa: E402
from _proc import cpu_seconds, machine_busy, own_cpu, pct  # noqa: E402
from _redis import check_url, claimed_db  # noqa: E402
from lane_turns import Cluster, WsConn, bench_env, clean_up, failed, trap_signals  # noqa: E402

from vancetope_brain.events.bus import database  # noqa: E402
from vancetope_brain.llm.testing import paced_tokens  # noqa: E402


@dataclass
class Stream:
    """One session: its socket, and what arrived of the turn in flight."""

    index: int
    conn: WsConn
    session_id: str = ""
    pid: str = ""
    create_rid: str = ""
    ready: bool = False
    req_ids: int = 0
    content: str | None = None      # the message in flight
    send_ns: int = 0
    next_token: int = 0             # the index the next token must have
    drained: bool = False
    done: bool = True
    errors: list[str] = field(default_factory=list)

    def request(self, type: str, data: dict[str, Any]) -> str:
        self.req_ids += 1
        rid = str(self.req_ids)
        self.conn.send_text(json.dumps({"type": type, "id": rid, "data": data},
                                       separators=(",", ":")))
        return rid


@dataclass
class Round:
    name: str
    start: float = 0.0
    end: float = 0.0
    tokens: int = 0
    token_events: int = 0
    frames: int = 0
    delays_us: list[int] = field(default_factory=list)
    published_us: list[int] = field(default_factory=list)  # emission → the event's ``at``
    turn_ms: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    cpu_wall: float = 0.0
    errors: list[str] = field(default_factory=list)
    completed: bool = False


class LlmBench:
    def __init__(self, args: argparse.Namespace, cluster: Cluster, token: str,
                 rclient: redis.Redis, deadline: float) -> None:
        self.args, self.cluster, self.token, self.redis = args, cluster, token, rclient
        self.deadline = deadline
        self.sel = selectors.DefaultSelector()
        self.streams: list[Stream] = []
        self.round: Round | None = None

    def connect(self) -> None:
        for i in range(self.args.processes):
            s = Stream(i, WsConn(self.cluster.port, self.token))
            self.streams.append(s)
            self.sel.register(s.conn.sock, selectors.EVENT_READ, s)
            s.create_rid = s.request("session-create", {"title": f"llm {i}"})
            self._consume(s, time.time_ns())
        self.loop(lambda: all(s.ready for s in self.streams), "connect", 120)

    # ── the loop ──────────────────────────────────────────────────────────
    def loop(self, finished: Any, label: str, timeout: float) -> bool:
        until = min(self.deadline, time.monotonic() + timeout)
        next_progress = time.monotonic() + 1.0
        last_tokens = 0
        while not finished():
            now = time.monotonic()
            if now > until:
                print(f"  {label}: deadline reached; stopping", flush=True)
                return False
            for key, _ in self.sel.select(0.2):
                s: Stream = key.data
                try:
                    alive = s.conn.feed()
                except OSError as e:
                    raise RuntimeError(f"session {s.index}: socket error {e}") from e
                self._consume(s, time.time_ns())
                if not alive:
                    raise RuntimeError(f"session {s.index}: the gateway closed the socket")
            if now >= next_progress:
                next_progress = now + 1.0
                self.cluster.check_alive()
                r = self.round
                if r is None:
                    print(f"  {label}: {sum(s.ready for s in self.streams)}/"
                          f"{len(self.streams)} sessions ready", flush=True)
                else:
                    recent = r.delays_us[-20000:]
                    p99 = f"{pct(recent, 99) / 1000:.1f} ms" if recent else "-"
                    print(f"  {label}: {r.tokens - last_tokens} tokens/s, "
                          f"{sum(s.done for s in self.streams)}/{len(self.streams)} turns done, "
                          f"recent delay p99 {p99}", flush=True)
                    last_tokens = r.tokens
        return True

    def _consume(self, s: Stream, t_ns: int) -> None:
        for raw in s.conn.pending:
            self.on_frame(s, raw, t_ns)
        s.conn.pending.clear()

    def on_frame(self, s: Stream, raw: str, t_ns: int) -> None:
        frame = json.loads(raw)
        kind = frame.get("type")
        r = self.round
        if r is not None:
            r.frames += 1
        if kind == "error":
            if frame.get("replyTo") == s.create_rid:
                raise RuntimeError(f"session-create failed: {frame['data']}")
            self._fail(s, f"error frame {frame['data']}")
            return
        if frame.get("replyTo") == s.create_rid and s.create_rid:
            s.session_id = frame["data"]["session"]["id"]
            s.pid = frame["data"]["chatProcessId"]
            return
        if kind != "event":
            return
        ev = frame["data"]
        if ev["processId"] != s.pid:
            return
        etype = ev["type"]
        if etype == "token":
            if s.content is None or s.drained:
                self._fail(s, f"token outside a turn's stream: {ev['data']['text'][:40]!r}")
                return
            now_us = t_ns // 1000
            assert r is not None
            r.token_events += 1
            at_us = int(datetime.fromisoformat(ev["at"]).timestamp() * 1e6)
            for index, emitted_us in paced_tokens(ev["data"]["text"]):
                r.published_us.append(at_us - emitted_us)
                if index != s.next_token:
                    self._fail(s, f"token {index} where {s.next_token} was due")
                s.next_token = index + 1
                r.tokens += 1
                r.delays_us.append(now_us - emitted_us)
        elif etype == "chat-message" and ev["data"].get("role") == "user":
            s.drained = ev["data"].get("content") == s.content or s.drained
        elif etype == "status-changed" and ev["data"].get("to") != "RUNNING":
            if not s.ready:
                s.ready = True
            elif s.content is not None and s.drained:
                if s.next_token != self.args.tokens:
                    self._fail(s, f"turn ended after {s.next_token} of {self.args.tokens} "
                               "tokens")
                assert r is not None
                r.turn_ms.append((time.perf_counter_ns() - s.send_ns) / 1e6)
                r.end = time.perf_counter()
                s.content = None
                s.done = True
        elif etype in ("stream-reset", "turn-restarted"):
            self._fail(s, f"{etype} {ev['data']}")

    def _fail(self, s: Stream, what: str) -> None:
        message = f"session {s.index}: {what}"
        if self.round is not None and len(self.round.errors) < 50:
            self.round.errors.append(message)

    # ── rounds ────────────────────────────────────────────────────────────
    def run_round(self, name: str) -> Round:
        r = self.round = Round(name)
        r.cpu = {k: -v for k, v in self.cpu_snapshot().items()}
        r.start = r.end = time.perf_counter()
        for s in self.streams:
            s.content = f"{name} s{s.index}"
            s.next_token = 0
            s.drained = s.done = False
            s.send_ns = time.perf_counter_ns()
            s.request("process-steer", {"targetThinkProcessId": s.pid, "content": s.content})
        timeout = self.args.seconds * 4 + 30
        r.completed = self.loop(lambda: all(s.done for s in self.streams), name, timeout)
        r.cpu = {k: r.cpu[k] + v for k, v in self.cpu_snapshot().items() if k in r.cpu}
        r.cpu_wall = time.perf_counter() - r.start
        self.round = None
        return r

    def cpu_snapshot(self) -> dict[str, float]:
        snap = {name: cpu_seconds(self.cluster.pids(name)) for name in self.cluster.procs}
        snap["client"] = own_cpu()
        rpid = self.redis.info("server").get("process_id")
        if rpid:
            snap["redis-server"] = cpu_seconds([int(rpid)])
        snap["other processes"] = machine_busy() - sum(snap.values())
        return snap

    def footprint(self) -> dict[str, dict[str, int]]:
        """Per OS process (with its children): RSS MB, threads, open file descriptors, and
        Redis connections of the benchmark's database (by client address → pid is not
        known to Redis, so only the total)."""
        out = {}
        for name in self.cluster.procs:
            rss = threads = fds = 0
            for pid in self.cluster.pids(name):
                with contextlib.suppress(OSError):
                    status = Path(f"/proc/{pid}/status").read_text()
                    fields = dict(line.split(":", 1) for line in status.splitlines()
                                  if ":" in line)
                    rss += int(fields["VmRSS"].split()[0]) // 1024
                    threads += int(fields["Threads"])
                    fds += len(os.listdir(f"/proc/{pid}/fd"))
            out[name] = {"rss_mb": rss, "threads": threads, "fds": fds}
        db = database(self.redis)
        clients = self.redis.client_list()
        out["redis"] = {"connections_to_this_db": sum(int(c.get("db", -1)) == db
                                                      for c in clients)}
        return out

    def close(self) -> None:
        for s in self.streams:
            s.conn.close()


# ── reporting ───────────────────────────────────────────────────────────────────────────

NOT_OURS = ("other processes", "endpoint")
"""Left out of the total CPU: the rest of the machine, and the model endpoint (a real one
runs elsewhere)."""


def summarize(rounds: list[Round], name: str) -> dict[str, Any]:
    tokens = sum(r.tokens for r in rounds)
    wall = sum(max(r.end - r.start, 1e-9) for r in rounds)
    delays = [d for r in rounds for d in r.delays_us]
    published = [d for r in rounds for d in r.published_us]
    turns = [t for r in rounds for t in r.turn_ms]
    cpu: dict[str, float] = {}
    for r in rounds:
        for k, v in r.cpu.items():
            cpu[k] = cpu.get(k, 0.0) + v
    cpu_wall = sum(r.cpu_wall for r in rounds)
    out: dict[str, Any] = {
        "round": name, "completed": all(r.completed for r in rounds), "tokens": tokens,
        "turns": len(turns), "tokens_per_s": round(tokens / wall, 1),
        "token_events": sum(r.token_events for r in rounds),
        "frames": sum(r.frames for r in rounds),
        "errors": [e for r in rounds for e in r.errors][:20],
    }
    if delays:
        out["delay_ms"] = {f"p{p}": round(pct(delays, p) / 1000, 2) for p in (50, 90, 99)}
        out["delay_ms"]["max"] = round(max(delays) / 1000, 2)
        out["emission_to_publish_ms"] = {f"p{p}": round(pct(published, p) / 1000, 1)
                                         for p in (50, 99)}
    if turns:
        out["turn_ms"] = {"p50": round(pct(turns, 50), 1), "p99": round(pct(turns, 99), 1)}
    if tokens:
        out["cpu_us_per_token"] = {k: round(v * 1e6 / tokens, 1) for k, v in cpu.items()}
        out["cpu_us_per_token"]["total (without other processes)"] = round(
            sum(v for k, v in cpu.items() if k not in NOT_OURS) * 1e6 / tokens, 1)
        out["cpu_cores_busy"] = {k: round(v / max(cpu_wall, 1e-9), 2) for k, v in cpu.items()}
    return out


def print_report(args: argparse.Namespace, results: list[dict[str, Any]],
                 footprint: dict[str, dict[str, int]]) -> None:
    print()
    print(f"configuration: {args.processes} processes (sessions/WebSockets) with a turn in "
          f"flight at once, {args.rounds} round(s), {args.tokens} tokens over {args.seconds:g} s "
          f"per turn, model {args.model}, {args.workers} worker process(es) pool={args.pool} "
          f"concurrency={args.concurrency}, token flush "
          f"{'default' if args.token_flush_ms is None else f'{args.token_flush_ms:g} ms'}, "
          f"gateway gunicorn gthread (1 process, "
          f"{args.processes + 16} threads), {os.cpu_count()} CPUs")
    header = (f"{'round':<8} {'turns':>6} {'tokens':>8} {'tokens/s':>9} {'events':>8} "
              f"{'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>8} {'turn p50':>9} "
              f"{'turn p99':>9} {'errors':>6}")
    print(header)
    print("-" * len(header))
    for r in results:
        d = r.get("delay_ms", {})
        t = r.get("turn_ms", {})

        def f(v: Any) -> str:
            return "-" if v is None else f"{v:.2f}"
        print(f"{r['round']:<8} {r['turns']:>6} {r['tokens']:>8} {r['tokens_per_s']:>9.1f} "
              f"{r['token_events']:>8} {f(d.get('p50')):>7} {f(d.get('p90')):>7} "
              f"{f(d.get('p99')):>7} {f(d.get('max')):>8} {f(t.get('p50')):>9} "
              f"{f(t.get('p99')):>9} {len(r['errors']):>6}"
              + ("" if r["completed"] else "  (INCOMPLETE: deadline)"))
    emitted = "its write by the endpoint" if args.model == "endpoint" else "in the worker"
    print(f"delay = a token's emission ({emitted}) → its arrival at the client; "
          "events = token events received (several tokens each when merged); "
          "turn = send → turn ended, ms")
    total = results[-1]
    if "emission_to_publish_ms" in total:
        e = total["emission_to_publish_ms"]
        print(f"of the delay, emission → the worker's publish (the event's `at`, ms-truncated): "
              f"p50 {e['p50']} ms, p99 {e['p99']} ms; the rest is Redis → gateway → client")
    if "cpu_us_per_token" in total:
        print("CPU µs per token: " + ", ".join(f"{k} {v:.1f}" for k, v in
                                              total["cpu_us_per_token"].items()))
        print("cores busy: " + ", ".join(f"{k} {v:.2f}" for k, v in
                                        total["cpu_cores_busy"].items()))
        if total["cpu_cores_busy"].get("other processes", 0) > 0.2:
            print("WARNING: processes outside this benchmark used "
                  f"{total['cpu_cores_busy']['other processes']} cores; the figures are skewed")
    print("at the end of the last round: " + "; ".join(
        f"{name} " + ", ".join(f"{k} {v}" for k, v in row.items())
        for name, row in footprint.items()))
    for r in results:
        for e in r["errors"]:
            print(f"[{r['round']}] ERROR {e}")


def ours_figures(total: dict[str, Any], base: _compare.Baseline
                 ) -> tuple[_compare.Ours, list[_compare.Row]]:
    """Our figures in the comparison's units: turns/s with every turn in flight at once and
    CPU ms per turn; the token delay beside a sequential Celery round trip and the peer's
    sequential first event (none of the three streams tokens under this load)."""
    wall_turns = total["turns"] / max(total["tokens"] / max(total["tokens_per_s"], 1e-9),
                                      1e-9)
    per_turn = total.get("cpu_us_per_token", {}).get("total (without other processes)")
    ours = _compare.Ours(throughput=round(wall_turns, 1),
                         cpu_ms=None if per_turn is None else
                         round(per_turn * total["tokens"] / max(total["turns"], 1) / 1000, 2))
    delay = total.get("delay_ms", {})
    c, p = base.celery, base.peer
    extra = [_compare.Row("token delay p50 ms (vs seq round trip / first event p50)",
                          delay.get("p50"), c.seq_p50_ms, p.first_event_p50_ms),
             _compare.Row("token delay p99 ms (vs seq round trip / first event p99)",
                          delay.get("p99"), c.seq_p99_ms, p.first_event_p99_ms)]
    return ours, extra


# ── main ────────────────────────────────────────────────────────────────────────────────

def start_endpoint(args: argparse.Namespace, cluster: Cluster, tmp: Path) -> str:
    """Start ``paced_endpoint.py`` as one of the cluster's processes; its base URL."""
    port_file = tmp / "endpoint.port"
    cluster._spawn("endpoint", [sys.executable, str(HERE / "paced_endpoint.py"),
                                "--tokens", str(args.tokens), "--seconds", str(args.seconds),
                                "--port-file", str(port_file)])
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        cluster.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError("the paced endpoint did not start")
        time.sleep(0.05)
    return f"http://127.0.0.1:{port_file.read_text()}/v1"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=500, help="sessions = WebSockets = chat "
                   "processes, each with one turn in flight per round (default 500)")
    p.add_argument("--rounds", type=int, default=3, help="rounds measured (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="rounds not counted (default 1)")
    p.add_argument("--tokens", type=int, default=100, help="tokens per turn (default 100)")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds a turn streams")
    p.add_argument("--workers", type=int, default=2, help="Celery worker OS processes")
    p.add_argument("--model", default="endpoint", choices=("endpoint", "paced"),
                   help="endpoint (default): OpenAiChatModel against paced_endpoint.py; "
                        "paced: PacedModel, sleeping on the turn's thread")
    p.add_argument("--pool", default="threads", choices=_compare.POOLS)
    p.add_argument("--concurrency", type=int, default=250, help="pool size per worker")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting for the gateway and the workers (e.g. "
                        "VANCETOPE_LANE_SHARDS=64)")
    p.add_argument("--token-flush-ms", type=float, default=None,
                   help="the workers' VANCETOPE_TOKEN_FLUSH_MS (default: the product's; 0 "
                        "publishes each token at once)")
    p.add_argument("--redis-url", help="pin the Redis database (default: claim a free one)")
    p.add_argument("--timeout", type=float, default=300, help="whole run, seconds")
    p.add_argument("--source", help="run the product code from this directory (A/B)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs, SQLite)")
    p.add_argument("--cprofile", metavar="DIR",
                   help="write cProfile stats (CPU time) of the gateway and of each worker, "
                        "every thread, to DIR/*.pstats (slows them ~2×: proportions only)")
    _compare.add_arguments(p)
    args = p.parse_args(argv)
    if (problem := check_url(args.redis_url)):
        p.error(problem)
    if args.source:
        args.source = os.path.abspath(args.source)
        if not os.path.isdir(os.path.join(args.source, "vancetope_brain")):
            p.error(f"--source {args.source} has no vancetope_brain package")
    # What lane_turns.Cluster reads besides these.
    if args.cprofile:
        args.cprofile = os.path.abspath(args.cprofile)
        os.makedirs(args.cprofile, exist_ok=True)
    args.no_task_events = args.profile = args.waits = False
    args.server = "gunicorn"
    args.gateway_threads = 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with claimed_db(args.redis_url) as args.redis_url:
        return run(args)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    deadline = started + args.timeout
    tmp = Path(tempfile.mkdtemp(prefix="vt-llm-"))
    db_path = tmp / "bench.db"
    env = {k: v for k, v in bench_env(args, tmp, db_path, args.env).items()
           if not k.startswith("BENCH_")}
    env["BENCH_MODEL"] = f"paced:{args.tokens}:{args.seconds}"  # --model endpoint: below
    if args.token_flush_ms is not None:
        env["VANCETOPE_TOKEN_FLUSH_MS"] = f"{args.token_flush_ms:g}"
    if args.source:
        sys.path.insert(0, args.source)
    # The claim emptied the database; a FLUSHDB here would drop the claim with it.
    rclient = redis.Redis.from_url(args.redis_url)

    trap_signals()
    cluster = Cluster(args, env, tmp)
    bench: LlmBench | None = None
    ok = False
    try:
        from vancetope_brain.config import Config
        from vancetope_brain.models.settings import SettingScope
        from vancetope_gateway.parts import build_gateway

        brain = build_gateway(Config.from_env(env), lambda *a: None,
                              enqueue_index=lambda job: None)
        brain.identity.create_tenant("bench", "bench")
        brain.identity.create_user("bench", "bencher", "bencher")
        token = brain.identity.issue_token("bench", "bencher", label="llm_load benchmark")
        # Ford streams the model's text as it comes (Arthur wants a ``respond`` call).
        brain.settings.set("bench", SettingScope.tenant(), "session.defaultChatEngine", "ford")
        brain.close()

        print(f"starting the gateway and {args.workers} worker(s) pool={args.pool} "
              f"concurrency={args.concurrency} [logs in {tmp}]", flush=True)
        if args.model == "endpoint":
            cluster.env["BENCH_MODEL"] = f"endpoint:{start_endpoint(args, cluster, tmp)}"
        cluster.start()
        cluster.wait_ready(60)
        print(f"ready after {time.monotonic() - started:.1f} s; opening {args.processes} "
              "sessions", flush=True)
        bench = LlmBench(args, cluster, token, rclient, deadline)
        bench.connect()
        rounds: list[Round] = []
        for i in range(args.warmup + args.rounds):
            name = f"warmup{i + 1}" if i < args.warmup else f"round{i - args.warmup + 1}"
            print(f"{name}: {args.processes} turns of {args.tokens} tokens at once", flush=True)
            r = bench.run_round(name)
            if i >= args.warmup:
                rounds.append(r)
            if not r.completed:
                print("round incomplete; stopping", flush=True)
                break
        if not rounds:
            raise RuntimeError("no round was measured")
        footprint = bench.footprint()
        results = [summarize([r], r.name) for r in rounds] + [summarize(rounds, "all")]
        # The baselines run on the same machine once our processes are gone.
        bench.close()
        bench = None
        cluster.stop()
        base = _compare.measure(args, args.redis_url, tmp, _compare.Shape(
            workers=args.workers, pool=args.pool, concurrency=args.concurrency,
            in_flight=args.processes))
        print_report(args, results, footprint)
        ours, extra = ours_figures(results[-1], base)
        _compare.print_table(base, ours, extra)
        if args.json:
            Path(args.json).write_text(json.dumps(
                {"config": {k: v for k, v in vars(args).items() if k != "redis_url"},
                 "cpus": os.cpu_count(), "results": results, "footprint": footprint,
                 "comparison": _compare.as_dict(base, ours, extra),
                 "date": datetime.now().isoformat(timespec="seconds")}, indent=2))
        ok = all(r["completed"] and not r["errors"] for r in results)
        return 0 if ok else 1
    except (KeyboardInterrupt, Exception) as e:
        return failed(cluster, e)
    finally:
        clean_up(args, tmp, ok, bench, cluster)  # releasing the claim (main) flushes the db


if __name__ == "__main__":
    sys.exit(main())
