"""Connecting costs a user with 10,000 closed sessions what it costs one with 10 (issue 31,
target 6): connect → ``welcome``, and → the first ``session-list`` page, through the real
gateway.

    python benchmarks/session_list.py [--store sqlite|postgres] [--many 10000] [--rounds 300]

The gateway is ``vancetope serve`` in a subprocess (the embedded shape: the Flask app, its
socket hub and an in-process worker) on the run's own Redis database (``_redis.py``) and
store (``_store.py``: a SQLite file in a temp dir, or a PostgreSQL database of the run's
own, dropped at the end). Before it starts, two users are made through the brain's
services, and their sessions written through the store port (``_seed_sessions.py``, run by
the server's code), CLOSED, one a second: ``few`` has ``--few`` (10), ``many`` has
``--many`` (10,000). Then each round connects once as each user, alternating, on a new
WebSocket: the time to the ``welcome`` (the handshake included: the gateway counts the
user's sessions for it), and to the reply of a ``session-list`` with no data (what an old
client asks: the first page, 50 sessions) sent right after it. ``--warmup`` rounds first
are not counted. Printed per user: p50 / p90 / p99 / max in ms, and the ratio of ``many``
to ``few``; the ``welcome``'s counts show the cap (``CLOSED`` reads 1,000 for ``many``).

``--source DIR`` runs the server from another checkout (A/B: the code before the change
lists every session of the user for the welcome and for ``session-list``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import _store  # noqa: E402
from _proc import pct  # noqa: E402
from _redis import check_url, claimed_db, reset  # noqa: E402

from vancetope_gateway.socket_adapter import WebSocketClient  # noqa: E402

TENANT = "bench"
STARTUP_SECONDS = 120


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--few", type=int, default=10, help="closed sessions of user few (10)")
    p.add_argument("--many", type=int, default=10_000,
                   help="closed sessions of user many (10,000)")
    p.add_argument("--rounds", type=int, default=300, help="counted rounds (300)")
    p.add_argument("--warmup", type=int, default=30, help="rounds not counted first (30)")
    p.add_argument("--redis-url", help="pin the Redis database (default: claim a free one)")
    p.add_argument("--source", help="run the server from this checkout instead (A/B)")
    p.add_argument("--store-from", help=argparse.SUPPRESS)  # _store.BenchStore reads it
    _store.add_arguments(p)
    args = p.parse_args(argv)
    if (problem := check_url(args.redis_url)):
        p.error(problem)
    if args.source:
        args.source = os.path.abspath(args.source)
        if not os.path.isdir(os.path.join(args.source, "vancetope_brain")):
            p.error(f"--source {args.source} has no vancetope_brain package")
    return args


def server_env(args: argparse.Namespace, tmp: Path, store: _store.BenchStore) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VANCETOPE_", "OPENAI_", "CELERY_"))}
    env.update(VANCETOPE_REDIS_URL=args.redis_url, VANCETOPE_STORE_URL=store.url,
               VANCETOPE_DATA_DIR=str(tmp), VANCETOPE_LOG_LEVEL="WARNING",
               VANCETOPE_PORT="0", VANCETOPE_HOST="127.0.0.1",
               # One connection after the other, each closed: the slots of the closed ones
               # are freed as the gateway lets go of them, which may trail the next connect.
               VANCETOPE_MAX_CONNECTIONS_PER_USER="1000",
               PYTHONPATH=os.pathsep.join(filter(None, [args.source, str(ROOT),
                                                        os.environ.get("PYTHONPATH")])))
    return env


def seed(env: dict[str, str], tmp: Path, counts: dict[str, int]) -> dict[str, str]:
    """The users and their CLOSED sessions, written by the server's code
    (``_seed_sessions.py``) before it starts; each user's token."""
    seeding = subprocess.run(
        [sys.executable, str(HERE / "_seed_sessions.py"), TENANT,
         *(f"{user}={count}" for user, count in counts.items())],
        env=env, cwd=tmp, text=True, stdout=subprocess.PIPE, check=True)
    *progress, tokens = seeding.stdout.splitlines()
    print("\n".join(line for line in progress if not line.startswith("  ")), flush=True)
    return dict(json.loads(tokens))


class Server:
    """``vancetope serve`` in a subprocess; ``url`` once it answers."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.log = (tmp / "serve.log").open("w")
        # cwd: ``-m`` puts it first on sys.path, before PYTHONPATH names the code to run.
        self.proc = subprocess.Popen([sys.executable, "-m", "vancetope_gateway.cli", "serve"],
                                     env=env, cwd=tmp, text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        found = threading.Event()
        port: list[str] = []

        def drain() -> None:  # read all output, so the server never blocks on a full pipe
            for line in self.proc.stdout:  # type: ignore[union-attr]
                self.log.write(line)
                if not port and (m := re.search(r"http://127\.0\.0\.1:(\d+)", line)):
                    port.append(m.group(1))
                    found.set()
            found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not (found.wait(STARTUP_SECONDS) and port):
            self.stop()
            raise SystemExit(f"vancetope serve did not start; see {tmp / 'serve.log'}")
        self.url = f"ws://127.0.0.1:{port[0]}/ws"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def connect_once(url: str, token: str) -> tuple[float, float, dict[str, int], int]:
    """One connection: ms to the welcome, ms to the first page's reply, the welcome's counts
    and the page's length."""
    start = time.perf_counter()
    ws = WebSocketClient.connect(url, headers={"Authorization": f"Bearer {token}"})
    try:
        welcome = json.loads(ws.receive(timeout=30))
        welcomed = time.perf_counter()
        assert welcome["type"] == "welcome", welcome
        ws.send(json.dumps({"type": "session-list", "id": "1", "data": {}}))
        while True:
            frame = json.loads(ws.receive(timeout=30))
            if frame.get("replyTo") == "1":
                break
        listed = time.perf_counter()
        assert frame["type"] == "session-list", frame
    finally:
        ws.close()
    return (1000 * (welcomed - start), 1000 * (listed - start), welcome["data"]["sessions"],
            len(frame["data"]["sessions"]))


def stats(values: list[float]) -> str:
    return (f"p50 {pct(values, 50):7.2f}  p90 {pct(values, 90):7.2f}  "
            f"p99 {pct(values, 99):7.2f}  max {max(values):7.2f} ms")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with claimed_db(args.redis_url) as args.redis_url:
        return run(args)


def run(args: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="vt-bench-"))
    store = _store.BenchStore.create(args, tmp)
    reset(args.redis_url)
    env = server_env(args, tmp, store)
    counts = {"few": args.few, "many": args.many}
    server: Server | None = None
    try:
        print(f"store: {store.describe()}; server code: {args.source or ROOT}", flush=True)
        tokens = seed(env, tmp, counts)
        server = Server(env, tmp)
        times: dict[str, tuple[list[float], list[float]]] = {u: ([], []) for u in counts}
        seen: dict[str, tuple[dict[str, int], int]] = {}
        total = args.warmup + args.rounds
        for n in range(total):
            for user in (("few", "many") if n % 2 else ("many", "few")):
                welcome_ms, page_ms, welcome, page = connect_once(server.url, tokens[user])
                seen[user] = (welcome, page)
                if n >= args.warmup:
                    times[user][0].append(welcome_ms)
                    times[user][1].append(page_ms)
            if (n + 1) % 50 == 0:
                print(f"  round {n + 1} of {total}", flush=True)
        print(f"\n{args.rounds} rounds ({args.warmup} warm-up rounds not counted), "
              f"users alternating, one new WebSocket each:")
        for user, count in counts.items():
            welcome, page = seen[user]
            print(f"{user:>4} ({count:>6,} closed)  welcome counts {welcome}; first page "
                  f"{page} sessions")
            print(f"      connect → welcome             {stats(times[user][0])}")
            print(f"      connect → first session-list  {stats(times[user][1])}")
        for what, i in (("welcome", 0), ("first page", 1)):
            ratio = pct(times["many"][i], 50) / pct(times["few"][i], 50)
            ratio99 = pct(times["many"][i], 99) / pct(times["few"][i], 99)
            print(f"many / few, {what}: p50 {ratio:.2f}×, p99 {ratio99:.2f}×")
        return 0
    finally:
        if server is not None:
            server.stop()
        store.close()


if __name__ == "__main__":
    sys.exit(main())
