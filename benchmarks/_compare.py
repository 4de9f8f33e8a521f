"""What every benchmark compares its figures to, measured in the same run: the bare Celery
round trip and the LangGraph peer (``../shared/peers/langgraph`` beside the checkout, or
``$BENCH_PEER_DIR``), printed as ratios.

How a benchmark uses it::

    import _compare                                    # benchmarks/ is on sys.path

    parser = argparse.ArgumentParser()
    _compare.add_arguments(parser)                     # --no-celery --no-peer --peer-quick …
    args = parser.parse_args()
    with claimed_db(args.redis_url) as redis_url:      # the benchmark's own Redis database
        ...                                            # its phases; then stop its processes
        base = _compare.measure(args, redis_url, tmp_dir,
                                _compare.Shape(workers=2, pool="solo", concurrency=1,
                                               in_flight=100))
        _compare.print_table(base, _compare.Ours(
            first_event_p50_ms=3.07, first_event_p99_ms=5.05, done_p50_ms=7.65,
            throughput=214.0, cpu_ms=8.7))
        json_out["comparison"] = _compare.as_dict(base, ours)   # figures + ratios

``Ours`` fields left ``None`` print as "-"; a benchmark with figures of another kind adds
``extra=[Row(label, ours, celery, peer, higher_is_better)]`` to ``print_table``.
``python benchmarks/_compare.py [--workers 2 --in-flight 100 --no-peer]`` prints the two
baselines alone.

**Bare Celery round trip** (``measure_celery``): a Celery app with the product's broker
settings (``workers.broker.Transport``, late acks, prefetch 1, no result backend, no task
events) sends a no-op task to ``Shape.workers`` real Celery worker OS processes started
from this file (``worker`` sub-command: ``--pool``/``--concurrency`` as the benchmark's
workers, ``--without-mingle`` as ``bench_worker.py``), through the benchmark's claimed Redis
database. The task's body is one ``RPUSH`` of its token to a reply list, which the client
``BLPOP``s: no result backend and no polling, so the figure is Celery's send → deliver →
run → one Redis command → client, which is what a lane turn's first event has to beat.

- sequential: ``--celery-seq`` round trips one at a time (after 50 unmeasured): p50/p99;
- closed loop: ``Shape.in_flight`` tasks in flight from one client thread (each reply sends
  the next), ``--celery-tasks`` in all: tasks/s and CPU ms per task of the worker processes
  + redis-server + the client (from ``/proc``; Redis is shared with anything else running).

**Peer** (``measure_peer``): ``run.sh`` of the peer with ``CONFIGS=poll10ms`` (the LangGraph
dev server with its idle poll cut from 0.5 s to 10 ms, i.e. *not* as shipped: as shipped
every sequential run waits ~1 s for that poll, see its RESULTS.md) and
``MODES=stream-messages``; ``RESULTS_DIR`` is in the benchmark's temp dir. Its venv is
created at first use (pip, pinned versions; ``$LG_VENV``, default ``~/.cache/lg-venv``).
From its JSON: sequential first event (the ``metadata`` SSE event, sent when a worker starts
the run) p50/p99, completion p50 and server-side execution p50 (its log), runs/s with ``Shape.in_flight`` concurrent clients,
and server + client CPU ms per run. ``--peer-quick`` uses small sizes; ``--no-peer`` skips
it (the table says so).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _proc import cpu_seconds, own_cpu, pct, tree  # noqa: E402

PEER_DIR = Path(os.environ.get("BENCH_PEER_DIR")
                or ROOT.parent / "shared" / "peers" / "langgraph")
"""The peer's checkout: ``shared/peers/langgraph`` next to this repository's directory (the
workplace's layout), unless ``BENCH_PEER_DIR`` names another."""
POOLS = ("solo", "prefork", "threads", "gevent")
"""The Celery pools the benchmarks' workers can run (``--pool``); gevent needs the ``gevent``
extra (``pip install -e '.[gevent]'``)."""
NOOP = "bench.noop"
QUEUE = "bench.noop"
METHOD = ("no-op Celery task whose body RPUSHes to a reply list the client BLPOPs "
          "(no result backend)")


@dataclass(frozen=True)
class Shape:
    """The benchmark's worker shape, which the Celery baseline copies."""

    workers: int = 2          # worker OS processes
    pool: str = "solo"        # solo | prefork | threads
    concurrency: int = 1      # per worker process
    in_flight: int = 100      # concurrent tasks / clients of the closed-loop figures


@dataclass
class CeleryFigures:
    shape: Shape
    method: str = METHOD
    seq_n: int = 0
    seq_p50_ms: float | None = None
    seq_p99_ms: float | None = None
    tasks: int = 0
    tasks_per_s: float | None = None
    cpu_ms_per_task: dict[str, float] = field(default_factory=dict)  # worker/redis/client/total
    skipped: str | None = None


@dataclass
class PeerFigures:
    config: str = "poll10ms"
    seq_runs: int = 0
    first_event_p50_ms: float | None = None
    first_event_p99_ms: float | None = None
    done_p50_ms: float | None = None
    exec_p50_ms: float | None = None          # the server's own log: started → ended
    concurrency: int = 0
    runs: int = 0
    runs_per_s: float | None = None
    cpu_ms_per_run: dict[str, float] = field(default_factory=dict)  # server/client/total
    errors: int = 0
    skipped: str | None = None


@dataclass
class Baseline:
    celery: CeleryFigures
    peer: PeerFigures


@dataclass
class Ours:
    """The benchmark's own figures, in the units of the standard rows."""

    first_event_p50_ms: float | None = None   # sequential send → first event
    first_event_p99_ms: float | None = None
    done_p50_ms: float | None = None          # sequential send → turn ended
    throughput: float | None = None           # closed loop turns/s
    cpu_ms: float | None = None               # CPU ms per turn, every process


@dataclass
class Row:
    label: str
    ours: float | None
    celery: float | None
    peer: float | None
    higher_is_better: bool = False


# ── arguments ───────────────────────────────────────────────────────────────────────────

def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("comparison (bare Celery round trip, LangGraph peer)")
    g.add_argument("--no-celery", action="store_true", help="skip the bare Celery baseline")
    g.add_argument("--celery-seq", type=int, default=500,
                   help="sequential Celery round trips (default 500)")
    g.add_argument("--celery-tasks", type=int, default=3000,
                   help="Celery tasks in the closed-loop phase (default 3000)")
    g.add_argument("--no-peer", action="store_true", help="skip the LangGraph peer")
    g.add_argument("--peer-quick", action="store_true",
                   help="small peer sizes (seq 5×4, concurrent in-flight×3 messages)")
    g.add_argument("--peer-timeout", type=float, default=900,
                   help="seconds for the whole peer run, venv creation included")


# ── the bare Celery round trip ──────────────────────────────────────────────────────────

def _celery_app(broker_url: str) -> Any:
    """The product's broker settings (workers/celery_app.py) on a one-task app."""
    from celery import Celery
    from kombu import Queue

    from workers import broker

    broker.register()
    app = Celery("bench-noop", broker=broker_url)
    app.conf.update(
        broker_transport_options={"visibility_timeout": 3600},
        task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
        task_ignore_result=True, worker_send_task_events=False, task_send_sent_event=False,
        task_queues=[Queue(QUEUE)], task_default_queue=QUEUE,
        worker_hijack_root_logger=False, broker_connection_retry_on_startup=True,
    )
    return app


def _worker_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="_compare.py worker")
    p.add_argument("--broker", required=True)
    p.add_argument("--name", default="noop")
    p.add_argument("--pool", default="solo", choices=POOLS)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--ready-file", required=True)
    args = p.parse_args(argv)

    from celery import maybe_patch_concurrency

    # gevent: patched before redis-py, kombu and the worker are imported (as ``celery`` does).
    maybe_patch_concurrency(["--pool", args.pool])
    import redis
    from celery import signals

    app = _celery_app(args.broker)
    app.set_default()
    replies = redis.Redis.from_url(args.broker)

    @app.task(name=NOOP)
    def noop(reply_key: str, token: int) -> None:
        replies.rpush(reply_key, token)

    @signals.worker_ready.connect(weak=False)
    def _ready(**_: Any) -> None:
        Path(args.ready_file).write_text(str(os.getpid()))

    app.worker_main(["worker", f"--pool={args.pool}", f"--concurrency={args.concurrency}",
                     f"--hostname={args.name}@%h", "--loglevel=WARNING",
                     "--prefetch-multiplier=1", "--without-mingle"])
    return 0


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def measure_celery(redis_url: str, tmp: Path, shape: Shape, *, seq: int = 500,
                   tasks: int = 3000, timeout: float = 120) -> CeleryFigures:
    """Start ``shape.workers`` no-op Celery workers on ``redis_url`` (the benchmark's claimed
    database), measure, stop them, delete the queue and reply keys (Celery's own shared keys,
    ``unacked`` and the pidbox bindings, go when the benchmark flushes its database)."""
    import redis

    out = CeleryFigures(shape=shape)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    procs: list[subprocess.Popen[bytes]] = []
    client = redis.Redis.from_url(redis_url)
    key = f"bench:noop:{uuid.uuid4().hex}"
    app = _celery_app(redis_url)
    try:
        for i in range(shape.workers):
            log = open(tmp / f"celery-noop{i + 1}.log", "wb")  # noqa: SIM115 - with the process
            procs.append(subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "worker", "--broker", redis_url,
                 "--name", f"noop{i + 1}", "--pool", shape.pool,
                 "--concurrency", str(shape.concurrency),
                 "--ready-file", str(tmp / f"celery-noop-ready.{i + 1}")],
                cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True))
        deadline = time.monotonic() + 60
        while not all((tmp / f"celery-noop-ready.{i + 1}").exists()
                      for i in range(shape.workers)):
            for i, proc in enumerate(procs):
                if proc.poll() is not None:
                    raise RuntimeError(f"Celery no-op worker exited with {proc.returncode}: "
                                       + (tmp / f"celery-noop{i + 1}.log").read_text()[-2000:])
            if time.monotonic() > deadline:
                raise RuntimeError("Celery no-op workers not ready after 60 s")
            time.sleep(0.05)

        def send(token: int) -> None:
            app.send_task(NOOP, args=(key, token), queue=QUEUE)

        def reply() -> None:
            if client.blpop([key], timeout=timeout) is None:
                raise RuntimeError(f"no Celery reply within {timeout:.0f} s")

        for i in range(50):  # warm-up: connections, the producer, the workers' first tasks
            send(i)
            reply()
        lat = []
        for i in range(seq):
            t0 = time.perf_counter_ns()
            send(i)
            reply()
            lat.append((time.perf_counter_ns() - t0) / 1e6)
        out.seq_n = seq
        out.seq_p50_ms = round(pct(lat, 50), 3)
        out.seq_p99_ms = round(pct(lat, 99), 3)

        worker_pids = [pid for proc in procs for pid in tree(proc.pid)]
        rpid = int(client.info("server").get("process_id") or 0)
        cpu0 = (cpu_seconds(worker_pids), cpu_seconds([rpid]) if rpid else 0.0, own_cpu())
        t0 = time.perf_counter()
        in_flight = min(shape.in_flight, tasks)
        for i in range(in_flight):
            send(i)
        for i in range(in_flight, tasks + in_flight):
            reply()
            if i < tasks:
                send(i)
        wall = time.perf_counter() - t0
        cpu1 = (cpu_seconds(worker_pids), cpu_seconds([rpid]) if rpid else 0.0, own_cpu())
        out.tasks = tasks
        out.tasks_per_s = round(tasks / wall, 1)
        worker, redis_cpu, client_cpu = (b - a for a, b in zip(cpu0, cpu1, strict=True))
        out.cpu_ms_per_task = {k: round(v * 1000 / tasks, 3) for k, v in (
            ("workers", worker), ("redis-server", redis_cpu), ("client", client_cpu),
            ("total", worker + redis_cpu + client_cpu))}
        return out
    finally:
        _stop(procs)
        with contextlib.suppress(Exception):
            app.close()
        with contextlib.suppress(redis.RedisError):
            client.delete(key, QUEUE, f"_kombu.binding.{QUEUE}")


# ── the LangGraph peer ──────────────────────────────────────────────────────────────────

def measure_peer(tmp: Path, in_flight: int, *, quick: bool = False,
                 timeout: float = 900) -> PeerFigures:
    """Run the peer's ``run.sh`` (poll10ms, stream-messages) and read its JSON results."""
    out = PeerFigures()
    script = PEER_DIR / "run.sh"
    if not script.exists():
        out.skipped = f"no {script} (BENCH_PEER_DIR names the peer's checkout)"
        return out
    conc = max(1, in_flight)
    results = tmp / "peer-results"
    env = dict(os.environ, CONFIGS="poll10ms", MODES="stream-messages", CONC=str(conc),
               RESULTS_DIR=str(results), TMPDIR=str(tmp),  # its server logs, app dirs
               SEQ_THREADS="5" if quick else "20", SEQ_MSGS="4" if quick else "5",
               THREADS=str(conc if quick else max(100, conc)), MSGS="3" if quick else "10")
    env.pop("QUICK", None)
    log_path = tmp / "peer.log"
    print(f"peer: LangGraph dev server (poll10ms), sequential + {conc} concurrent clients "
          f"[log {log_path}]", flush=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["bash", str(script)], cwd=tmp, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            out.skipped = f"timed out after {timeout:.0f} s (log {log_path})"
            return out
        finally:
            if proc.poll() is None:  # run.sh stops its server on TERM
                _stop([proc])
    seq = _peer_phase(results / "poll10ms" / "seq-stream-messages.json")
    con = _peer_phase(results / "poll10ms" / f"c{conc}-stream-messages.json")
    if seq is None or con is None:
        tail = log_path.read_text(errors="replace")[-1500:]
        out.skipped = f"run.sh exited {proc.returncode} without results; log tail:\n{tail}"
        return out
    out.seq_runs = seq["runs"]
    out.first_event_p50_ms = _r((seq.get("first_event_ms") or {}).get("p50"))
    out.first_event_p99_ms = _r((seq.get("first_event_ms") or {}).get("p99"))
    out.done_p50_ms = _r((seq.get("done_ms") or {}).get("p50"))
    out.exec_p50_ms = _r((seq.get("server_exec_ms") or {}).get("p50"))
    out.concurrency = con["concurrency"]
    out.runs = con["runs"]
    out.runs_per_s = _r(con.get("runs_per_s"))
    out.errors = seq["errors"] + con["errors"]
    server, client = con.get("server_cpu_ms_per_run"), con.get("client_cpu_ms_per_run")
    if server is not None and client is not None:
        out.cpu_ms_per_run = {"server": round(server, 3), "client": round(client, 3),
                              "total": round(server + client, 3)}
    return out


def _peer_phase(path: Path) -> dict[str, Any] | None:
    try:
        phases = json.loads(path.read_text())["phases"]
    except (OSError, ValueError, KeyError):
        return None
    return phases[0] if phases else None


def _r(v: float | None) -> float | None:
    return None if v is None else round(float(v), 3)


# ── both, and the table ─────────────────────────────────────────────────────────────────

def measure(args: argparse.Namespace, redis_url: str, tmp: Path, shape: Shape) -> Baseline:
    """Both baselines as ``add_arguments``' options say. Call it while the benchmark's own
    processes are stopped (before its phases or after), so neither skews the other."""
    if args.no_celery:
        celery = CeleryFigures(shape=shape, skipped="--no-celery")
    else:
        print(f"bare Celery round trip: {shape.workers} worker(s) pool={shape.pool} "
              f"concurrency={shape.concurrency}, {args.celery_seq} sequential, "
              f"{args.celery_tasks} with {shape.in_flight} in flight", flush=True)
        try:
            celery = measure_celery(redis_url, tmp, shape, seq=args.celery_seq,
                                    tasks=args.celery_tasks)
        except Exception as e:  # the benchmark's own figures are still printed
            celery = CeleryFigures(shape=shape, skipped=f"failed: {e!r}")
    if args.no_peer:
        peer = PeerFigures(skipped="--no-peer")
    else:
        peer = measure_peer(tmp, shape.in_flight, quick=args.peer_quick,
                            timeout=args.peer_timeout)
    return Baseline(celery, peer)


def standard_rows(base: Baseline, ours: Ours) -> list[Row]:
    c, p = base.celery, base.peer
    return [
        Row("sequential send → first event p50 ms", ours.first_event_p50_ms, c.seq_p50_ms,
            p.first_event_p50_ms),
        Row("sequential send → first event p99 ms", ours.first_event_p99_ms, c.seq_p99_ms,
            p.first_event_p99_ms),
        Row("sequential send → done p50 ms", ours.done_p50_ms, c.seq_p50_ms, p.done_p50_ms),
        Row(f"closed loop, {c.shape.in_flight} in flight: per s", ours.throughput,
            c.tasks_per_s, p.runs_per_s, higher_is_better=True),
        Row("CPU ms per turn/task/run, all processes", ours.cpu_ms,
            c.cpu_ms_per_task.get("total"), p.cpu_ms_per_run.get("total")),
    ]


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0 or a != a or b != b:
        return None
    return a / b


def print_table(base: Baseline, ours: Ours, extra: list[Row] | None = None) -> None:
    rows = standard_rows(base, ours) + list(extra or [])
    c, p = base.celery, base.peer

    def f(v: float | None) -> str:
        return "-" if v is None or v != v else (f"{v:.2f}" if abs(v) < 1000 else f"{v:.0f}")

    def ratio(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}×"

    print()
    print("comparison, measured in this run (ratio < 1 is better for times and CPU, "
          "> 1 for per s):")
    w = max(len(r.label) for r in rows)
    header = (f"{'figure':<{w}} {'ours':>8} {'Celery':>8} {'peer':>8} {'ours/Celery':>12} "
              f"{'ours/peer':>10}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r.label:<{w}} {f(r.ours):>8} {f(r.celery):>8} {f(r.peer):>8} "
              f"{ratio(_ratio(r.ours, r.celery)):>12} {ratio(_ratio(r.ours, r.peer)):>10}")
    if c.skipped:
        print(f"Celery: skipped ({c.skipped})")
    else:
        s = c.shape
        print(f"Celery: {c.method}; {s.workers} worker process(es) pool={s.pool} "
              f"concurrency={s.concurrency}, same Redis database; {c.seq_n} sequential, "
              f"{c.tasks} closed-loop; CPU ms/task "
              + ", ".join(f"{k} {v:.2f}" for k, v in c.cpu_ms_per_task.items()))
    if p.skipped:
        print(f"peer: skipped ({p.skipped})")
    else:
        print(f"peer: LangGraph dev server {p.config} (idle poll 10 ms, NOT as shipped: as "
              f"shipped a sequential run waits ~1 s), runs.stream messages mode; first event "
              f"= its metadata SSE event; {p.seq_runs} sequential runs, {p.runs} runs with "
              f"{p.concurrency} concurrent clients, {p.errors} errors; CPU ms/run "
              + ", ".join(f"{k} {v:.2f}" for k, v in p.cpu_ms_per_run.items()))


def as_dict(base: Baseline, ours: Ours, extra: list[Row] | None = None) -> dict[str, Any]:
    """The baselines, our figures and the ratios, for a benchmark's ``--json``."""
    rows = standard_rows(base, ours) + list(extra or [])
    return {"celery": asdict(base.celery), "peer": asdict(base.peer), "rows": [
        dict(asdict(r), ours_per_celery=_ratio(r.ours, r.celery),
             ours_per_peer=_ratio(r.ours, r.peer)) for r in rows]}


# ── standalone ──────────────────────────────────────────────────────────────────────────

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker"]:
        return _worker_main(argv[1:])
    from _redis import check_url, claimed_db

    p = argparse.ArgumentParser(description="Print the bare Celery round trip and the "
                                "LangGraph peer's figures (the baselines of every benchmark).")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--pool", default="solo", choices=POOLS)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--in-flight", type=int, default=100)
    p.add_argument("--redis-url", help="pin the Redis database (default: claim a free one)")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    add_arguments(p)
    args = p.parse_args(argv)
    if (problem := check_url(args.redis_url)):
        p.error(problem)
    tmp = Path(tempfile.mkdtemp(prefix="vt-compare-"))
    try:
        with claimed_db(args.redis_url) as url:
            base = measure(args, url, tmp, Shape(args.workers, args.pool, args.concurrency,
                                                 args.in_flight))
        print_table(base, Ours())
        if args.json:
            Path(args.json).write_text(json.dumps(as_dict(base, Ours()), indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
