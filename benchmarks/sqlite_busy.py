"""What a contended ``BEGIN IMMEDIATE`` costs with SQLite's own busy handler vs a short retry loop.

    python benchmarks/sqlite_busy.py [--hold-us 200] [--n 1000]

A second OS process takes the write lock for ``--hold-us`` µs, then pauses 300 µs, over
and over (like a worker's ``commit_turn`` next to the gateway's ``append_message``). This
process opens ``BEGIN IMMEDIATE`` ``--n`` times and records how long it waited:

- ``sqlite3.connect(timeout=10)`` — what the store does: SQLite's default busy handler
  sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms between attempts, so a waiter
  usually waits ≥ 1 ms even though the lock is free again after ``--hold-us``;
- ``timeout=0`` and a Python retry loop sleeping 50–150 µs (jittered) between attempts.

Only a temp file is touched; no Redis, no network.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path


def _connect(path: Path, timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def _holder(path: Path, hold_s: float, stop: mp.synchronize.Event) -> None:  # type: ignore[name-defined]
    conn = _connect(path, 10)
    while not stop.is_set():
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (x) VALUES (1)")
        start = time.perf_counter()
        while time.perf_counter() - start < hold_s:
            pass
        conn.execute("COMMIT")
        time.sleep(0.0003)


def _begin_retrying(conn: sqlite3.Connection, deadline_s: float = 10.0) -> None:
    give_up = time.monotonic() + deadline_s
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > give_up:
                raise
            time.sleep(random.uniform(0.00005, 0.00015))


def _measure(path: Path, n: int, retry: bool) -> list[float]:
    conn = _connect(path, 0 if retry else 10)
    waits = []
    for _ in range(n):
        start = time.perf_counter_ns()
        if retry:
            _begin_retrying(conn)
        else:
            conn.execute("BEGIN IMMEDIATE")
        waits.append((time.perf_counter_ns() - start) / 1000)
        conn.execute("COMMIT")
        time.sleep(0.0007)
    conn.close()
    return sorted(waits)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hold-us", type=float, default=200)
    p.add_argument("--n", type=int, default=1000)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vt-sqlite-busy-") as tmp:
        path = Path(tmp) / "busy.db"
        _connect(path, 10).execute("CREATE TABLE t (x)")
        stop = mp.Event()
        holder = mp.Process(target=_holder, args=(path, args.hold_us / 1e6, stop), daemon=True)
        holder.start()
        try:
            time.sleep(0.2)
            print(f"SQLite {sqlite3.sqlite_version}; another process holds the write lock "
                  f"{args.hold_us:g} µs at a time; {args.n} BEGIN IMMEDIATE here")
            print(f"{'':<46} {'p50':>7} {'p75':>7} {'p90':>7} {'p99':>7} {'max':>8}  µs")
            for label, retry in (("sqlite3 timeout=10 (SQLite's busy handler)", False),
                                 ("timeout=0 + retry every 50-150 µs", True)):
                w = _measure(path, args.n, retry)
                k = len(w) - 1
                print(f"{label:<46} {w[k // 2]:>7.0f} {w[k * 3 // 4]:>7.0f} "
                      f"{w[k * 9 // 10]:>7.0f} {w[k * 99 // 100]:>7.0f} {w[-1]:>8.0f}")
        finally:
            stop.set()
            holder.join(timeout=5)
            if holder.is_alive():
                holder.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
