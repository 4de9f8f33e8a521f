"""Lane-turn benchmark: N chat processes × M messages through the real distributed path.

    python benchmarks/lane_turns.py --processes 100 --messages 20 --workers 2

What runs (all on 127.0.0.1, nothing else is contacted):

- Redis: a database of 127.0.0.1:6379 claimed for this run like a test run's (see
  ``benchmarks/_redis.py``; ``--redis-url`` pins one); it is FLUSHED at start and at the end.
- Store (``--store``, ``benchmarks/_store.py``): a fresh SQLite file in a temporary directory
  (default; ``--store-from FILE``: a copy of FILE), or ``--store postgres``: a PostgreSQL
  database of the run's own, created on the server of ``--postgres-url`` (default
  127.0.0.1:5432 as ``postgres``) and dropped at the end (``--store-from NAME``: created
  from database NAME as its template).
- Gateway: ``vancetope_gateway.wsgi:app`` in its own OS process, under gunicorn with the
  Procfile's ``GatewayWorker`` (gthread; 1 worker, ``--processes + 16`` threads, which a
  checkout from before the socket hub needs: there flask-sock held one thread per open
  WebSocket) on a listening socket this script binds to an ephemeral port and hands over
  as ``fd://N``; ``--server werkzeug`` uses werkzeug's threaded ``make_server`` instead.
- Workers: ``--workers`` Celery worker OS processes started by ``benchmarks/bench_worker.py``
  (``create_celery(Config.from_env(), model_for=<zero-latency model>)`` +
  ``app.worker_main``). Default pool ``solo``, concurrency 1: a zero-latency turn is pure
  CPU (Python + SQLite + Redis round trips), so on 2 cores the best shape is one turn at a
  time per OS process and one OS process per core; prefork adds a pipe hop and a second
  process per worker, threads add GIL hand-offs, and neither can add CPU. (With a real
  LLM the turn waits on the network and the ``threads`` pool with a high concurrency is
  right; ``--pool``/``--concurrency`` try other shapes.)
- Client: this process, one thread, a selector over ``--processes`` WebSocket connections
  (wsproto frames on plain sockets, so the client's own cost stays small and measurable).
  One connection per session, because a connection is bound to one session at a time.
  Each connection sends ``session-create`` (one session = one chat process, of the
  ``session.defaultChatEngine``: ``arthur`` today, which answers through the ``respond``
  tool and sees its chat up to ``arthur.maxContextTokens``) and waits until the process's
  INIT turn has ended.

The zero-latency model answers "pong" at once and streams it as one token, so a turn
publishes 5 events: status-changed INIT/IDLE→RUNNING, token, chat-message (user),
chat-message (assistant), status-changed RUNNING→IDLE.

Phases (each session has at most one message in flight in phases seq and 1–2):

0. warm-up: ``--warmup`` closed-loop messages per session; excluded from every figure.
seq. sequential: one session sends ``--seq-messages`` messages, each as soon as the previous
   turn ended, the others idle: the unloaded latency (target: first event p50 ≤ 2 ms,
   p99 ≤ 3.5 ms, turn ended p50 ≤ 4 ms).
1. closed: each session sends its next ``process-steer`` as soon as its previous turn has
   ended (zero think time), ``--messages`` per session. This saturates the system with
   ``--processes`` concurrent turns: **turns/s** is the capacity; the latency is latency
   at saturation (mostly queueing).
2. paced: the same, but sends are spread evenly so that the offered load is ``--rate``
   turns/s in total (session i sends at t0 + (i + k·N)/rate, or as soon as its previous
   turn ended if that is later — counted as "late"). **Latency at that load** is the
   figure to compare with the target (p50 ≤ 3 ms, p99 ≤ 6 ms at ≥ 500 turns/s).
3. burst (open loop): every session sends ``--messages`` messages back to back without
   waiting. A turn drains everything pending, so turns < messages; reports messages/s,
   turns and messages per turn. No latency figures (a message sent while a turn runs
   sees that turn's events first).

Definitions:

- latency = from just before the client's ``send()`` of the ``process-steer`` frame to the
  moment the client's ``recv()`` returns the bytes holding the first ``event`` frame of
  that session after the send (replies are not events). With one message in flight per
  session this is the first event of the turn that drains the message — the
  ``status-changed → RUNNING`` the runner publishes right after ``acquire_epoch``; any
  other first event is counted as an anomaly.
- a message is done when the session's ``chat-message`` (role user) with its content
  arrived and then the ``status-changed`` out of RUNNING that ends that turn.
- turns = turn records committed in the store during the phase (``SELECT COUNT(*) FROM
  turns``, on either store); turns/s = turns / (first send → last message done).
- Also reported: reply (send → ``process-steer`` reply), turn (send → turn ended),
  the split of the latency at the worker's publish (the event's ``at``, which the product
  truncates to milliseconds, so only the mean is given, corrected by +0.5 ms), CPU
  milliseconds per turn of each OS process (from /proc; on PostgreSQL also ``postgres``:
  the server backends connected to the run's database, found in ``pg_stat_activity``, and
  ``postgres aux``: the server's WAL writer, checkpointer and background writer, which
  serve every database of the server and are not counted as ours), and lane-task outcomes
  and task body times counted inside the workers (``bench_worker.py``).

Diagnostics: ``--profile`` times every part of every turn inside the workers (timing
proxies from ``_timing.py``) and prints the table per phase; ``--waits`` prints how long
each take of a ready process waited in its shard's ready set and in the task that took it;
``--cprofile DIR`` writes
CPU-time pstats of the gateway (all threads) and of each worker; ``--no-task-events`` and
``--pool`` try other worker settings; ``--source DIR`` runs another checkout (A/B).

Comparison (``benchmarks/_compare.py``): after the phases, with the gateway and workers
stopped, the bare Celery round trip (a no-op task to ``--workers`` Celery workers of the same
pool shape, through the same Redis database) and the LangGraph peer (``run.sh``, poll10ms)
are measured and printed next to ours as ratios: seq latency, closed-loop turns/s with
``--processes`` in flight, CPU per turn. ``--no-peer``/``--peer-quick``/``--no-celery``.

Stops by itself: every phase has a deadline (``--phase-timeout``), the run one
(``--timeout``); all child processes are killed on exit, error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import os
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import redis
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PHASES = ("seq", "closed", "paced", "burst")
sys.path.insert(0, str(HERE))
import _compare  # noqa: E402
import _store  # noqa: E402
from _proc import cpu_seconds, machine_busy, own_cpu, pct, tree  # noqa: E402
from _redis import check_url, claimed_db, reset  # noqa: E402
from _timing import delta, format_tree  # noqa: E402

# ── child processes ─────────────────────────────────────────────────────────────────────

class Cluster:
    """Gateway and worker OS processes; ``stop`` kills every one of them (by process group)."""

    def __init__(self, args: argparse.Namespace, env: dict[str, str], tmp: Path) -> None:
        self.args, self.env, self.tmp = args, env, tmp
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.port = 0

    def _spawn(self, name: str, cmd: list[str], **kw: Any) -> None:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        # cwd = the temp dir, so ``-m gunicorn`` imports the product from PYTHONPATH only.
        self.procs[name] = subprocess.Popen(cmd, cwd=self.tmp, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            **kw)

    def start(self) -> None:
        a = self.args
        for i in range(a.workers):
            cmd = [sys.executable, str(HERE / "bench_worker.py"), "--name", f"bench{i + 1}",
                   "--pool", a.pool, "--concurrency", str(a.concurrency),
                   "--ready-file", str(self.tmp / f"ready.{i + 1}")]
            if a.no_task_events:
                cmd.append("--no-task-events")
            if a.profile:
                cmd.append("--parts")
            if a.waits:
                cmd.append("--waits")
            if a.cprofile:
                cmd += ["--cprofile-out", str(Path(a.cprofile) / f"worker{i + 1}.pstats")]
            self._spawn(f"worker{i + 1}", cmd)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1024)
        self.port = listener.getsockname()[1]
        fd = listener.fileno()
        threads = a.gateway_threads or a.processes + 16
        if a.server == "gunicorn":
            if a.cprofile:
                self.env = dict(self.env, BENCH_CPROFILE_OUT=str(Path(a.cprofile) /
                                                                 "gateway.pstats"))
            cmd = [sys.executable, "-m", "gunicorn", "--worker-class",
                   "vancetope_gateway.serving.GatewayWorker",  # the Procfile's
                   "--workers", "1", "--threads", str(threads), "--bind", f"fd://{fd}",
                   # gthread serves at most this many connections (default 1000) at once.
                   "--worker-connections", str(max(1000, 2 * threads)),
                   "--timeout", "0", "--graceful-timeout", "2", "--log-level", "warning",
                   "vancetope_gateway.wsgi:app"]
            if a.cprofile:
                cmd[3:3] = ["--config", str(HERE / "gunicorn_cprofile.py")]
                cmd[cmd.index("--graceful-timeout") + 1] = "20"  # time to write the stats
        else:
            cmd = [sys.executable, "-c",
                   "import sys, socket; from werkzeug.serving import make_server; "
                   "from vancetope_gateway.wsgi import app; "
                   "make_server('127.0.0.1', 0, app, threaded=True, "
                   "fd=int(sys.argv[1])).serve_forever()", str(fd)]
        self._spawn("gateway", cmd, pass_fds=(fd,))
        listener.close()

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = {i + 1 for i in range(self.args.workers)}
        gateway_ok = False
        while time.monotonic() < deadline:
            self.check_alive()
            pending = {i for i in pending if not (self.tmp / f"ready.{i}").exists()}
            if not gateway_ok:
                gateway_ok = _http_ok(self.port, "/healthz")
            if gateway_ok and not pending:
                return
            time.sleep(0.1)
        raise RuntimeError(f"not ready after {timeout:.0f} s (gateway ok: {gateway_ok}, "
                           f"workers pending: {sorted(pending)})")

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; log:\n"
                                   f"{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        try:
            text = (self.tmp / f"{name}.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def pids(self, name: str) -> list[int]:
        """The OS process and all its descendants (gunicorn worker, prefork children)."""
        return tree(self.procs[name].pid)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                _killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + (25 if self.args.cprofile else 5)
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            # The group too: prefork children or a gunicorn worker may outlive their parent.
            _killpg(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                print(f"warning: pid {proc.pid} did not exit", file=sys.stderr)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _http_ok(port: int, path: str) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                      .encode())
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


# ── the WebSocket client ────────────────────────────────────────────────────────────────

class WsConn:
    """A blocking socket with a wsproto client; reads are driven by the selector loop."""

    def __init__(self, port: int, token: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.sock.sendall(self.ws.send(Request(
            host=f"127.0.0.1:{port}", target="/ws",
            extra_headers=[(b"authorization", f"Bearer {token}".encode())])))
        self._partial: list[str] = []
        self.pending: list[str] = []   # complete text frames not yet consumed
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise RuntimeError("gateway closed the connection during the handshake")
            self.ws.receive_data(data)
            for ev in self.ws.events():
                if isinstance(ev, AcceptConnection):
                    self.sock.settimeout(None)
                    self._collect()  # frames that came with the handshake response
                    return
                if isinstance(ev, RejectConnection | RejectData):
                    raise RuntimeError(f"WebSocket refused: {ev}")

    def send_text(self, text: str) -> None:
        self.sock.sendall(self.ws.send(TextMessage(data=text)))

    def feed(self) -> bool:
        """Read what is there; False when the server closed the connection."""
        data = self.sock.recv(262144)
        if not data:
            return False
        self.ws.receive_data(data)
        return self._collect()

    def _collect(self) -> bool:
        alive = True
        for ev in self.ws.events():
            if isinstance(ev, TextMessage):
                self._partial.append(ev.data)
                if ev.message_finished:
                    self.pending.append("".join(self._partial))
                    self._partial = []
            elif isinstance(ev, Ping):
                self.sock.sendall(self.ws.send(ev.response()))
            elif isinstance(ev, CloseConnection):
                alive = False
        return alive

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


@dataclass
class Sample:
    latency_ns: int
    reply_ns: int | None
    turn_ns: int
    up_ms: float | None        # send → the worker's publish (event ``at``, ms-truncated)
    first_ok: bool


@dataclass
class Session:
    index: int
    conn: WsConn
    session_id: str = ""
    pid: str = ""
    ready: bool = False            # the INIT turn ended
    # the message in flight (closed/paced phases)
    content: str | None = None
    send_ns: int = 0
    send_wall: float = 0.0
    reply_ns: int | None = None
    first_ns: int | None = None
    first_ok: bool = False
    first_at: float | None = None
    drained: bool = False
    sent: int = 0                  # messages sent in the current phase
    next_due: float = 0.0          # paced: earliest send time (perf_counter seconds)
    # burst phase
    outstanding: set[str] = field(default_factory=set)
    req_ids: int = 0
    create_rid: str = ""

    def request(self, type: str, data: dict[str, Any]) -> str:
        self.req_ids += 1
        rid = str(self.req_ids)
        self.conn.send_text(json.dumps({"type": type, "id": rid, "data": data},
                                       separators=(",", ":")))
        return rid


class PhaseStats:
    def __init__(self, name: str) -> None:
        self.name = name
        self.samples: list[Sample] = []
        self.sent = 0
        self.done = 0
        self.late = 0
        self.errors: Counter[str] = Counter()
        self.anomalies = 0
        self.start = 0.0
        self.end = 0.0
        self.turns = 0
        self.cpu: dict[str, float] = {}
        self.outcomes: dict[str, int] = {}
        self.task_us: list[int] = []
        self.gap_us: list[int] = []
        self.waits: dict[str, list[int]] = {}  # --waits: per take, µs
        self.cpu_wall = 0.0
        self.parts: dict[str, list[int]] = {}
        self.workers: dict[str, tuple[dict[str, int], dict[str, Any]]] = {}
        self.completed = True


class Bench:
    def __init__(self, args: argparse.Namespace, cluster: Cluster, token: str,
                 store: _store.BenchStore | Path, rclient: redis.Redis,
                 deadline: float) -> None:
        self.args = args
        self.cluster = cluster
        self.token = token
        if isinstance(store, Path):  # a SQLite file (idle_sockets.py)
            store = _store.BenchStore("sqlite", f"sqlite:///{store}", path=store)
        self.store = store
        self.redis = rclient
        self.deadline = deadline
        self.sel = selectors.DefaultSelector()
        self.sessions: list[Session] = []
        self.phase: PhaseStats | None = None
        self.mode = "setup"
        self.quota = 0
        self.timers: list[tuple[float, int, Session]] = []
        self.all_stats: list[PhaseStats] = []
        self.active = 0                # sessions taking part in the current phase

    # ── set-up ────────────────────────────────────────────────────────────
    def connect(self) -> None:
        for i in range(self.args.processes):
            s = Session(i, WsConn(self.cluster.port, self.token))
            self.sessions.append(s)
            self.sel.register(s.conn.sock, selectors.EVENT_READ, s)
            s.create_rid = s.request("session-create", {"title": f"bench {i}"})
            for raw in s.conn.pending:  # the welcome frame (maybe more)
                self.on_frame(s, raw, time.perf_counter_ns())
            s.conn.pending.clear()
        self.loop(lambda: all(s.ready for s in self.sessions), "connect",
                  self.args.phase_timeout)

    # ── the loop ──────────────────────────────────────────────────────────
    def loop(self, finished: Any, label: str, timeout: float) -> bool:
        phase_deadline = min(self.deadline, time.monotonic() + timeout)
        next_progress = time.monotonic() + 1.0
        last_done = self.phase.done if self.phase else 0
        while not finished():
            now = time.monotonic()
            if now > phase_deadline:
                print(f"  {label}: deadline reached; stopping this phase", flush=True)
                return False
            wait = 0.2
            if self.timers:
                wait = max(0.0, min(wait, self.timers[0][0] - time.perf_counter()))
            for key, _ in self.sel.select(wait):
                s: Session = key.data
                try:
                    alive = s.conn.feed()
                except OSError as e:
                    raise RuntimeError(f"session {s.index}: socket error {e}") from e
                t = time.perf_counter_ns()
                for raw in s.conn.pending:
                    self.on_frame(s, raw, t)
                s.conn.pending.clear()
                if not alive:
                    raise RuntimeError(f"session {s.index}: the gateway closed the socket")
            while self.timers and self.timers[0][0] <= time.perf_counter():
                _, _, s = heapq.heappop(self.timers)
                self.send_next(s)
            if now >= next_progress:
                next_progress = now + 1.0
                self.cluster.check_alive()
                self.store.sample()
                if self.phase is not None:
                    done = self.phase.done
                    lat = sorted(x.latency_ns for x in self.phase.samples[-2000:])
                    p50 = f"{lat[len(lat) // 2] / 1e6:.2f} ms" if lat else "-"
                    print(f"  {label}: {done}/{self.phase_total()} done, "
                          f"{done - last_done}/s, recent p50 {p50}", flush=True)
                    last_done = done
                else:
                    print(f"  {label}: {sum(s.ready for s in self.sessions)}/"
                          f"{len(self.sessions)} sessions ready", flush=True)
        return True

    def phase_total(self) -> int:
        return self.quota * self.active

    # ── frames ────────────────────────────────────────────────────────────
    def on_frame(self, s: Session, raw: str, t_ns: int) -> None:
        frame = json.loads(raw)
        kind = frame.get("type")
        reply_to = frame.get("replyTo")
        if kind == "error":
            code = frame["data"].get("code", "?")
            if self.phase is not None:
                self.phase.errors[code] += 1
            if reply_to == s.create_rid:
                raise RuntimeError(f"session-create failed: {frame['data']}")
            if s.content is not None and self.mode in ("closed", "paced", "warmup"):
                # The steer was refused (e.g. rate_limited): send it again shortly.
                s.content = None
                s.sent -= 1
                if self.phase is not None:
                    self.phase.sent -= 1
                heapq.heappush(self.timers, (time.perf_counter() + 0.05, id(s), s))
            return
        if reply_to is not None:
            if reply_to == s.create_rid:
                s.session_id = frame["data"]["session"]["id"]
                s.pid = frame["data"]["chatProcessId"]
            elif kind == "process-steer" and s.content is not None and s.reply_ns is None:
                s.reply_ns = t_ns - s.send_ns
            return
        if kind != "event":
            return
        ev = frame["data"]
        if s.content is not None and s.first_ns is None:
            s.first_ns = t_ns
            s.first_ok = ev["type"] == "status-changed" and ev["data"].get("to") == "RUNNING"
            s.first_at = _wall(ev.get("at"))
        if ev["processId"] != s.pid:
            return
        etype = ev["type"]
        if etype == "chat-message" and ev["data"].get("role") == "user":
            content = ev["data"].get("content")
            if content == s.content:
                s.drained = True
            elif content in s.outstanding:
                s.outstanding.discard(content)
                if self.phase is not None:
                    self.phase.done += 1
        elif etype == "status-changed" and ev["data"].get("to") != "RUNNING":
            if not s.ready:
                s.ready = True
            elif s.content is not None and s.drained:
                self.finish_message(s, t_ns)

    def finish_message(self, s: Session, t_ns: int) -> None:
        ph = self.phase
        assert ph is not None
        up = None
        if s.first_at is not None:
            up = (s.first_at - s.send_wall) * 1000 + 0.5  # +0.5: ``at`` is truncated to ms
        ph.samples.append(Sample(latency_ns=(s.first_ns or t_ns) - s.send_ns,
                                 reply_ns=s.reply_ns, turn_ns=t_ns - s.send_ns, up_ms=up,
                                 first_ok=s.first_ok))
        if not s.first_ok:
            ph.anomalies += 1
        ph.done += 1
        ph.end = time.perf_counter()
        s.content = None
        if s.sent < self.quota:
            if self.mode == "paced" and s.next_due > time.perf_counter():
                heapq.heappush(self.timers, (s.next_due, id(s), s))
            else:
                if self.mode == "paced":
                    ph.late += 1
                self.send_next(s)

    def send_next(self, s: Session) -> None:
        ph = self.phase
        assert ph is not None
        if s.content is not None or s.sent >= self.quota:
            return
        s.sent += 1
        ph.sent += 1
        s.content = f"{ph.name} s{s.index} m{s.sent}"
        s.reply_ns = s.first_ns = s.first_at = None
        s.first_ok = s.drained = False
        if self.mode == "paced":
            # The slot after this one (slot k of session i: t0 + (i + k·N) / rate).
            s.next_due += len(self.sessions) / self.args.rate
        s.send_wall = time.time()
        s.send_ns = time.perf_counter_ns()
        s.request("process-steer", {"targetThinkProcessId": s.pid, "content": s.content})

    # ── phases ────────────────────────────────────────────────────────────
    def _begin(self, name: str, mode: str, quota: int) -> PhaseStats:
        ph = PhaseStats(name)
        self.phase, self.mode, self.quota = ph, mode, quota
        self.timers.clear()
        for s in self.sessions:
            s.sent = 0
            s.content = None
            s.outstanding.clear()
        ph.turns = -self.turn_count()
        ph.cpu = {k: -v for k, v in self.cpu_snapshot().items()}
        ph.workers = self.worker_snapshot()
        ph.start = ph.end = time.perf_counter()
        return ph

    def _finish(self, ph: PhaseStats, completed: bool) -> None:
        ph.completed = completed
        ph.turns += self.turn_count()
        ph.cpu = {k: ph.cpu[k] + v for k, v in self.cpu_snapshot().items() if k in ph.cpu}
        ph.cpu_wall = time.perf_counter() - ph.start
        time.sleep(0.7)  # let the workers' 0.5 s counter flush catch up
        before, after = ph.workers, self.worker_snapshot()
        outcomes: Counter[str] = Counter()
        parts: dict[str, list[int]] = {}
        for key, (counts, timings) in after.items():
            old_counts, old_timings = before.get(key, ({}, {}))
            for k, v in counts.items():
                if v - old_counts.get(k, 0):
                    outcomes[k] += v - old_counts.get(k, 0)
            for path, values in delta(old_timings, timings).items():
                parts.setdefault(path, []).extend(values)
        ph.outcomes = dict(outcomes)
        ph.task_us = [v // 1000 for v in parts.pop("(lane task body)", [])]
        ph.gap_us = [v // 1000 for v in parts.pop("(between lane tasks)", [])]
        ph.waits = {k: [v // 1000 for v in parts.pop(k)] for k in list(parts)
                    if k.startswith("(wait: ")}
        ph.parts = parts
        self.all_stats.append(ph)
        self.phase = None
        self.mode = "idle"

    def run_closed(self, name: str, quota: int, *, paced: bool = False,
                   sessions: list[Session] | None = None) -> PhaseStats:
        """Closed loop over ``sessions`` (default all; the ``seq`` phase passes one)."""
        ph = self._begin(name, "paced" if paced else ("warmup" if name == "warmup" else
                                                      "closed"), quota)
        t0 = time.perf_counter()
        sessions = self.sessions if sessions is None else sessions
        self.active = len(sessions)
        n = len(sessions)
        for s in sessions:
            if paced:
                s.next_due = t0 + s.index / self.args.rate
                heapq.heappush(self.timers, (s.next_due, id(s), s))
            else:
                self.send_next(s)
        done = self.loop(lambda: ph.done >= quota * n, name, self.args.phase_timeout)
        self._finish(ph, done)
        return ph

    def run_burst(self, quota: int) -> PhaseStats:
        ph = self._begin("burst", "burst", quota)
        self.active = len(self.sessions)
        for s in self.sessions:
            for k in range(quota):
                content = f"burst s{s.index} m{k + 1}"
                s.outstanding.add(content)
                s.request("process-steer", {"targetThinkProcessId": s.pid, "content": content})
                ph.sent += 1
        done = self.loop(lambda: ph.done >= ph.sent, "burst", self.args.phase_timeout)
        ph.end = time.perf_counter()
        self._finish(ph, done)
        return ph

    # ── measurements outside the client ──────────────────────────────────
    def turn_count(self) -> int:
        return self.store.turn_count()

    def cpu_snapshot(self) -> dict[str, float]:
        snap = {name: cpu_seconds(self.cluster.pids(name)) for name in self.cluster.procs}
        snap["client"] = own_cpu()
        rpid = self.redis.info("server").get("process_id")
        if rpid:
            snap["redis-server"] = cpu_seconds([int(rpid)])
        snap.update(self.store.cpu_seconds())
        snap["other processes"] = machine_busy() - sum(snap.values())
        return snap

    def worker_snapshot(self) -> dict[str, tuple[dict[str, int], dict[str, Any]]]:
        """Per worker OS process: lane-task outcome counts and timing samples."""
        snap = {}
        for key in self.redis.scan_iter("bench:worker:*"):
            row = self.redis.hgetall(key)
            snap[key.decode()] = (json.loads(row.get(b"outcomes", b"{}")),
                                  json.loads(row.get(b"parts", b"{}")))
        return snap

    def close(self) -> None:
        for s in self.sessions:
            s.conn.close()


def _wall(at: str | None) -> float | None:
    if not at:
        return None
    try:
        return datetime.fromisoformat(at).timestamp()
    except ValueError:
        return None


# ── reporting ───────────────────────────────────────────────────────────────────────────

def summarize(ph: PhaseStats) -> dict[str, Any]:
    wall = max(ph.end - ph.start, 1e-9)
    lat = [x.latency_ns / 1e6 for x in ph.samples]
    replies = [x.reply_ns / 1e6 for x in ph.samples if x.reply_ns is not None]
    turns_ms = [x.turn_ns / 1e6 for x in ph.samples]
    ups = [x.up_ms for x in ph.samples if x.up_ms is not None]
    out: dict[str, Any] = {
        "phase": ph.name, "completed": ph.completed, "messages": ph.sent, "done": ph.done,
        "turns": ph.turns, "wall_s": round(wall, 3), "turns_per_s": round(ph.turns / wall, 1),
        "messages_per_s": round(ph.done / wall, 1), "late": ph.late,
        "anomalies": ph.anomalies, "errors": dict(ph.errors), "outcomes": ph.outcomes,
    }
    if lat:
        out["latency_ms"] = {f"p{p}": round(pct(lat, p), 2) for p in (50, 90, 99)}
        out["latency_ms"]["max"] = round(max(lat), 2)
        out["latency_ms"]["mean"] = round(statistics.fmean(lat), 2)
        out["reply_ms_p50"] = round(pct(replies, 50), 2) if replies else None
        out["turn_ms_p50"] = round(pct(turns_ms, 50), 2)
        if ups:
            up = statistics.fmean(ups)
            out["split_mean_ms"] = {"send_to_worker_publish": round(up, 2),
                                    "publish_to_client": round(statistics.fmean(lat) - up, 2)}
    if ph.task_us:
        out["task_body_us"] = {"p50": pct(ph.task_us, 50), "p99": pct(ph.task_us, 99),
                               "count": len(ph.task_us)}
    if ph.gap_us:
        out["between_tasks_us"] = {"p50": pct(ph.gap_us, 50), "p90": pct(ph.gap_us, 90)}
    for name, values in ph.waits.items():
        out.setdefault("waits_ms", {})[name] = {
            **{f"p{p}": round(pct(values, p) / 1000, 1) for p in (50, 90, 99)},
            "max": round(max(values) / 1000, 1), "count": len(values)}
    if ph.parts and ph.turns > 0:
        out["parts_table"] = format_tree(ph.parts, ph.turns, title="in-worker part")
        out["parts_p50_us"] = {k: round(pct(v, 50) / 1000, 1) for k, v in ph.parts.items()}
    if ph.turns > 0:
        out["cpu_ms_per_turn"] = {k: round(v * 1000 / ph.turns, 3) for k, v in ph.cpu.items()}
        out["cpu_ms_per_turn"]["total"] = round(sum(ph.cpu.values()) * 1000 / ph.turns, 3)
        out["cpu_cores_busy"] = round(sum(ph.cpu.values()) / max(ph.cpu_wall, 1e-9), 2)
        out["foreign_cores"] = round(ph.cpu.get("other processes", 0.0) / max(ph.cpu_wall, 1e-9),
                                     2)
    return out


def print_report(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    print()
    print(f"configuration: {args.processes} processes (sessions/WebSockets), "
          f"{args.messages} messages each, {args.workers} worker process(es) pool={args.pool} "
          f"concurrency={args.concurrency}, gateway={args.server} "
          f"(1 process, {args.gateway_threads or args.processes + 16} threads), "
          f"paced rate {args.rate:g}/s, warm-up {args.warmup}/process, "
          f"task events {'off' if args.no_task_events else 'on (product setting)'}, "
          f"{os.cpu_count()} CPUs, Redis {_redact(args.redis_url)}, "
          f"{getattr(args, 'store_described', 'SQLite in a temp dir')}")
    header = (f"{'phase':<8} {'msgs':>6} {'turns':>6} {'turns/s':>8} {'msgs/s':>8} "
              f"{'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>7} {'reply':>6} "
              f"{'turn':>6} {'late':>5} {'anom':>5}")
    print(header)
    print("-" * len(header))
    for r in results:
        lat = r.get("latency_ms", {})

        def f(v: Any) -> str:
            return "-" if v is None else f"{v:.2f}"
        print(f"{r['phase']:<8} {r['messages']:>6} {r['turns']:>6} {r['turns_per_s']:>8.1f} "
              f"{r['messages_per_s']:>8.1f} {f(lat.get('p50')):>7} {f(lat.get('p90')):>7} "
              f"{f(lat.get('p99')):>7} {f(lat.get('max')):>7} {f(r.get('reply_ms_p50')):>6} "
              f"{f(r.get('turn_ms_p50')):>6} {r['late']:>5} {r['anomalies']:>5}"
              + ("" if r["completed"] else "  (INCOMPLETE: deadline)"))
    print("latency = send of process-steer → first event of the turn on the socket; "
          "reply/turn = p50 ms send → steer reply / → turn ended")
    for r in results:
        extra = []
        if "split_mean_ms" in r:
            s = r["split_mean_ms"]
            extra.append(f"mean split: send→worker publish {s['send_to_worker_publish']} ms, "
                         f"publish→client {s['publish_to_client']} ms")
        if "task_body_us" in r:
            t = r["task_body_us"]
            extra.append(f"lane task body p50 {t['p50']} µs p99 {t['p99']} µs ({t['count']} "
                         "tasks)")
        if "between_tasks_us" in r:
            g = r["between_tasks_us"]
            extra.append(f"gap between two lane tasks of a worker p50 {g['p50']} µs p90 "
                         f"{g['p90']} µs (Celery ack/fetch/events, or idle)")
        for name, w in r.get("waits_ms", {}).items():
            extra.append(f"{name} ms p50 {w['p50']} p90 {w['p90']} p99 {w['p99']} max "
                         f"{w['max']} ({w['count']} takes)")
        if r["outcomes"]:
            extra.append("task outcomes " + ", ".join(f"{k}={v}" for k, v in
                                                       sorted(r["outcomes"].items())))
        if r["errors"]:
            extra.append(f"error frames {r['errors']}")
        if "cpu_ms_per_turn" in r:
            c = r["cpu_ms_per_turn"]
            extra.append("CPU ms/turn " + ", ".join(f"{k} {v:.2f}" for k, v in c.items())
                         + f" ({r['cpu_cores_busy']} cores busy)")
        if r.get("foreign_cores", 0) > 0.2:
            extra.append(f"WARNING: processes outside this benchmark used {r['foreign_cores']} "
                         "cores during this phase; its figures are skewed")
        if extra:
            print(f"[{r['phase']}] " + "\n         ".join(extra))
        if "parts_table" in r:
            print(f"[{r['phase']}] parts of the turns inside the workers (per committed turn):")
            print(r["parts_table"])


def ours_figures(results: list[dict[str, Any]]) -> _compare.Ours:
    """The comparison's figures: latency of the ``seq`` phase, capacity and CPU per turn
    (our processes: workers, gateway, Redis, client) of the ``closed`` phase."""
    by = {r["phase"]: r for r in results}
    seq, closed = by.get("seq", {}), by.get("closed", {})
    cpu = closed.get("cpu_ms_per_turn")
    return _compare.Ours(
        first_event_p50_ms=seq.get("latency_ms", {}).get("p50"),
        first_event_p99_ms=seq.get("latency_ms", {}).get("p99"),
        done_p50_ms=seq.get("turn_ms_p50"),
        throughput=closed.get("turns_per_s"),
        cpu_ms=ours_cpu(cpu))


def ours_cpu(cpu: dict[str, float] | None) -> float | None:
    """CPU ms per turn of our processes: all but ``other processes`` and the PostgreSQL
    server's shared processes (``postgres aux``)."""
    if not cpu:
        return None
    return round(cpu["total"] - cpu.get("other processes", 0.0) - cpu.get("postgres aux", 0.0),
                 3)


def _redact(url: str) -> str:
    p = urlparse(url)
    return url if not p.password else url.replace(p.password, "***")


# ── main ────────────────────────────────────────────────────────────────────────────────

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=100, help="chat processes = sessions = "
                   "WebSocket connections (default 100)")
    p.add_argument("--messages", type=int, default=20, help="messages per process per phase")
    p.add_argument("--workers", type=int, default=2, help="Celery worker OS processes")
    p.add_argument("--pool", default="solo", choices=_compare.POOLS)
    p.add_argument("--concurrency", type=int, default=1, help="per worker (default 1)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up messages per process")
    p.add_argument("--rate", type=float, default=500.0,
                   help="offered turns/s of the paced phase (default 500)")
    p.add_argument("--phases", default="seq,closed,paced,burst",
                   help="comma list of seq, closed, paced, burst (default all)")
    p.add_argument("--seq-messages", type=int, default=200,
                   help="messages of the seq phase (one session, one at a time; default 200)")
    p.add_argument("--server", default="gunicorn", choices=["gunicorn", "werkzeug"])
    p.add_argument("--gateway-threads", type=int, default=0,
                   help="gunicorn threads (default processes + 16)")
    p.add_argument("--no-task-events", action="store_true",
                   help="experiment: workers without worker_send_task_events")
    p.add_argument("--profile", action="store_true",
                   help="time the parts of every turn inside the workers (timing proxies) and "
                        "print them per phase")
    p.add_argument("--waits", action="store_true",
                   help="record each take's wait in its shard's ready set (wake → take) and "
                        "in the task that took it (task start, or the end of its linger, → take) and print them per phase")
    p.add_argument("--cprofile", metavar="DIR",
                   help="write cProfile stats of the gateway (every thread; gunicorn only) and "
                        "of each worker (every thread) to DIR/*.pstats (slows them ~2×)")
    p.add_argument("--redis-url", help="pin the Redis database (default: claim a free one)")
    p.add_argument("--timeout", type=float, default=240, help="whole run, seconds")
    p.add_argument("--phase-timeout", type=float, default=60, help="per phase, seconds")
    p.add_argument("--source", help="run the product code from this directory instead of the "
                   "installed one (e.g. `git archive HEAD | tar -x -C DIR` for an A/B run)")
    p.add_argument("--store-from", metavar="FILE", help="start from a copy of this SQLite "
                   "store (with --store postgres: of this database, as its template) instead "
                   "of an empty one (a seeded store: see history.py)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs, SQLite)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting for the gateway and the workers (repeatable), e.g. "
                   "VANCETOPE_CHAT_CACHE_LINES=0")
    _compare.add_arguments(p)
    _store.add_arguments(p)
    args = p.parse_args(argv)
    if (problem := check_url(args.redis_url)):
        p.error(problem)
    if args.cprofile:
        args.cprofile = os.path.abspath(args.cprofile)
        os.makedirs(args.cprofile, exist_ok=True)
    if args.source:
        args.source = os.path.abspath(args.source)
        if not os.path.isdir(os.path.join(args.source, "vancetope_brain")):
            p.error(f"--source {args.source} has no vancetope_brain package")
    unknown = set(args.phases.split(",")) - set(PHASES)
    if unknown:
        p.error(f"unknown phases {unknown}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with claimed_db(args.redis_url) as args.redis_url:
        return run(args)


def bench_env(args: argparse.Namespace, tmp: Path, store: _store.BenchStore | Path,
              settings: Sequence[str] = ()) -> dict[str, str]:
    """The environment of the gateway and the workers: this run's Redis database and store
    (a SQLite file's path, or a ``BenchStore``), the caps of the one user who holds every socket and session lifted, the frame
    rate of a connection too (a closed loop on one socket sends more than the 50 frames/s
    a person's client is allowed: ``idle_sockets.py``'s active client), and ``settings``
    (``NAME=VALUE``, ``--env``)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VANCETOPE_", "OPENAI_", "CELERY_"))}
    url = f"sqlite:///{store}" if isinstance(store, Path) else store.url
    env.update(VANCETOPE_REDIS_URL=args.redis_url, VANCETOPE_STORE_URL=url,
               VANCETOPE_DATA_DIR=str(tmp), VANCETOPE_LOG_LEVEL="WARNING",
               VANCETOPE_MAX_CONNECTIONS_PER_USER=str(2 * args.processes),
               VANCETOPE_MAX_SESSIONS_PER_USER=str(2 * args.processes),
               VANCETOPE_MAX_CONNECTIONS_PER_IP=str(2 * args.processes),
               VANCETOPE_FRAME_RATE="100000",
               PYTHONPATH=os.pathsep.join(filter(None, [args.source, str(ROOT),
                                                        env.get("PYTHONPATH")])))
    for setting in settings:
        name, _, value = setting.partition("=")
        env[name] = value
    return env


def bench_token(env: dict[str, str]) -> str:
    """The run's user and its token, through the brain's own services, before anyone else
    opens the store."""
    from vancetope_brain.config import Config
    from vancetope_gateway.parts import build_gateway

    brain = build_gateway(Config.from_env(env), lambda *a: None,
                          enqueue_index=lambda job: None)
    brain.identity.create_tenant("bench", "bench")
    brain.identity.create_user("bench", "bencher", "bencher")
    token = brain.identity.issue_token("bench", "bencher", label="benchmark")
    brain.close()
    return token


def run(args: argparse.Namespace,
        after_connect: Callable[[_store.BenchStore, list[tuple[str, str]]], None] | None = None
        ) -> int:
    """One benchmark run. ``after_connect(store, [(session id, process id), …])`` runs
    once every session's INIT turn ended, before the warm-up (``history.py`` gives the
    processes a long history there)."""
    started = time.monotonic()
    deadline = started + args.timeout
    tmp = Path(tempfile.mkdtemp(prefix="vt-bench-"))
    store = _store.BenchStore.create(args, tmp)
    args.store_described = store.describe()
    env = bench_env(args, tmp, store, args.env)
    if args.source:
        sys.path.insert(0, args.source)
    rclient = redis.Redis.from_url(args.redis_url)
    reset(args.redis_url)

    trap_signals()
    cluster = Cluster(args, env, tmp)
    bench: Bench | None = None
    ok = False
    try:
        token = bench_token(env)
        print(f"starting gateway ({args.server}) and {args.workers} worker(s) "
              f"[logs in {tmp}]", flush=True)
        cluster.start()
        cluster.wait_ready(60)
        print(f"ready after {time.monotonic() - started:.1f} s; gateway on 127.0.0.1:"
              f"{cluster.port}; opening {args.processes} sessions", flush=True)
        bench = Bench(args, cluster, token, store, rclient, deadline)
        bench.connect()
        if after_connect is not None:
            # In a thread: the client keeps answering the gateway's pings meanwhile (a socket
            # that misses them is closed).
            errors: list[BaseException] = []

            def prepare() -> None:
                try:
                    after_connect(store, [(s.session_id, s.pid) for s in bench.sessions])
                except BaseException as e:
                    errors.append(e)

            preparing = threading.Thread(target=prepare, name="after-connect", daemon=True)
            preparing.start()
            bench.loop(lambda: not preparing.is_alive(), "after connect",
                       deadline - time.monotonic())
            if preparing.is_alive() or errors:
                raise RuntimeError(f"after_connect did not finish: {errors or 'deadline'}")
        if args.warmup:
            print(f"warm-up: {args.warmup} closed-loop messages per process", flush=True)
            if not bench.run_closed("warmup", args.warmup).completed:
                raise RuntimeError("the warm-up did not complete in time")
            bench.all_stats.clear()
        phases = args.phases.split(",")
        for name in PHASES:
            if name not in phases:
                continue
            if time.monotonic() > deadline:
                print("run deadline reached; skipping the remaining phases")
                break
            if name == "seq":
                print(f"phase seq: 1 process × {args.seq_messages} messages, one at a time "
                      f"(the other {args.processes - 1} idle)", flush=True)
            else:
                print(f"phase {name}: {args.processes} × {args.messages} messages"
                      + (f" at {args.rate:g}/s offered" if name == "paced" else ""),
                      flush=True)
            if name == "seq":
                ph = bench.run_closed("seq", args.seq_messages, sessions=bench.sessions[:1])
            elif name == "burst":
                ph = bench.run_burst(args.messages)
            else:
                ph = bench.run_closed(name, args.messages, paced=name == "paced")
            if not ph.completed:
                print("phase incomplete; skipping the remaining phases", flush=True)
                break
        results = [summarize(ph) for ph in bench.all_stats]
        # The baselines run on the same machine once our processes are gone.
        bench.close()
        cluster.stop()
        base = _compare.measure(args, args.redis_url, tmp, _compare.Shape(
            workers=args.workers, pool=args.pool, concurrency=args.concurrency,
            in_flight=args.processes))
        print_report(args, results)
        if store.remote:
            print("NOTE: the PostgreSQL server is not on this host: its CPU is not measured")
        ours = ours_figures(results)
        _compare.print_table(base, ours)
        if args.json:
            Path(args.json).write_text(json.dumps(
                {"config": {k: v for k, v in vars(args).items()
                            if k not in ("redis_url", "postgres_url")},
                 "cpus": os.cpu_count(), "results": results,
                 "comparison": _compare.as_dict(base, ours),
                 "date": datetime.now().isoformat(timespec="seconds")}, indent=2))
        ok = all(r["completed"] for r in results)
        return 0 if ok else 1
    except (KeyboardInterrupt, Exception) as e:
        return failed(cluster, e)
    finally:
        clean_up(args, tmp, ok, bench, cluster)
        keep = args.keep or not ok
        store.close(keep=keep)
        if keep and store.kind == "postgres":
            print(f"(kept database {store.name})", file=sys.stderr)
        with contextlib.suppress(redis.RedisError):
            reset(args.redis_url)


def trap_signals() -> None:
    """SIGTERM behaves like Ctrl-C (``KeyboardInterrupt``, so the run's ``finally`` stops the
    children), and Ctrl-C works even when started from a shell that ignores SIGINT for
    background jobs."""
    def _on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def failed(cluster: Cluster, e: BaseException) -> int:
    """A benchmark run that stopped early: says why (with the tail of every child's log on
    a failure) and gives the exit code (130 for Ctrl-C/SIGTERM, else 1)."""
    if isinstance(e, KeyboardInterrupt):
        print("\ninterrupted; cleaning up", file=sys.stderr)
        return 130
    print(f"\nbenchmark failed: {e}", file=sys.stderr)
    for name in cluster.procs:
        print(f"--- {name} log tail ---\n{cluster.log_tail(name, 15)}", file=sys.stderr)
    return 1


def clean_up(args: argparse.Namespace, tmp: Path, ok: bool, bench: Any,
             cluster: Cluster) -> None:
    """The end of every benchmark run, however it ended: close the clients, stop every
    child, keep the temp dir (logs, SQLite) with ``--keep`` or after a failure."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop cleanup
    if bench is not None:
        bench.close()
    cluster.stop()
    if args.keep or not ok:
        print(f"(kept {tmp})", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
