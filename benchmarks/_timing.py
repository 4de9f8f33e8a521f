"""Timing proxies shared by the benchmarks: time the parts of a lane turn without editing it.

``instrument_runner`` replaces the ``LaneRunner``'s collaborators (store, events, leases,
waker's Redis client and enqueue, the engine call) with proxies that record every call's
duration under its call path, e.g. ``turn/engine(ford.steer)/store.chat_history``.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any


class Timer:
    """Collects durations (ns) by call path. Thread-safe; the call stack is per thread."""

    def __init__(self, cap: int = 0) -> None:
        self.samples: dict[str, list[int]] = defaultdict(list)
        self.order: list[str] = []
        self.enabled = True
        self.cap = cap  # keep at most about this many samples per path (0: all)
        self.counts: dict[str, int] = defaultdict(int)
        self.cpu_ns: dict[str, int] = defaultdict(int)  # CPU time of top-level calls
        self._local = threading.local()
        self._lock = threading.Lock()

    @property
    def _stack(self) -> list[str]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    @property
    def after_release(self) -> bool:
        return getattr(self._local, "after_release", False)

    @after_release.setter
    def after_release(self, value: bool) -> None:
        self._local.after_release = value

    def call(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self.after_release and name.startswith("store."):
            name += " (post-release)"
        stack = self._stack
        stack.append(name)
        path = "/".join(stack)
        top = len(stack) == 1
        cpu_start = time.thread_time_ns() if top else 0
        start = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            elapsed = time.perf_counter_ns() - start
            stack.pop()
            self.record(path, elapsed)
            if top and self.enabled:
                with self._lock:
                    self.cpu_ns[path] += time.thread_time_ns() - cpu_start

    def record(self, path: str, elapsed: int) -> None:
        """Add a sample measured elsewhere."""
        if not self.enabled:
            return
        with self._lock:
            if path not in self.samples:
                self.order.append(path)
            values = self.samples[path]
            values.append(elapsed)
            self.counts[path] += 1
            if self.cap and len(values) > 2 * self.cap:
                del values[:-self.cap]

    def snapshot(self) -> dict[str, list[int]]:
        with self._lock:
            return {path: list(self.samples[path]) for path in self.order}

    def counted_snapshot(self) -> dict[str, tuple[int, list[int]]]:
        """Per path: how many samples ever, and the kept (latest) ones."""
        with self._lock:
            return {path: (self.counts[path], list(self.samples[path])) for path in self.order}


def delta(before: dict[str, tuple[int, list[int]]],
          after: dict[str, tuple[int, list[int]]]) -> dict[str, list[int]]:
    """The samples added between two ``counted_snapshot``s (as far as they were kept)."""
    out = {}
    for path, (count, values) in after.items():
        new = count - before.get(path, (0, []))[0]
        if new > 0:
            out[path] = values[-new:] if new <= len(values) else list(values)
    return out


class Timed:
    """A proxy timing every method call of ``target`` as ``label.method``."""

    def __init__(self, target: Any, label: str, timer: Timer) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_timer", timer)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr) or name.startswith("__"):
            return attr
        label, timer = self._label, self._timer

        def timed(*args: Any, **kwargs: Any) -> Any:
            result = timer.call(f"{label}.{name}", attr, *args, **kwargs)
            if label == "leases" and name == "release":
                timer.after_release = True
            return result

        return timed

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)


def instrument_worker(worker: Any, timer: Timer) -> None:
    """Wrap the runner's and the waker's collaborators (the objects, not the classes)."""
    runner = worker.runner
    runner._lanes = Timed(runner._lanes, "store", timer)
    runner._processes = Timed(runner._processes, "store", timer)
    runner._events = Timed(runner._events, "events", timer)
    runner._leases = Timed(runner._leases, "leases", timer)
    real_call_engine = runner._call_engine
    runner._call_engine = lambda *a: timer.call("engine(ford.steer)", real_call_engine, *a)
    real_run = runner.run

    def run(*args: Any) -> Any:
        timer.after_release = False
        try:
            return timer.call("turn", real_run, *args)
        finally:
            timer.after_release = False

    runner.run = run
    waker = worker.waker
    waker._redis = Timed(waker._redis, "redis", timer)
    real_enqueue = waker._enqueue
    waker._enqueue = lambda *a: timer.call("celery.send_task", real_enqueue, *a)


def format_tree(samples: dict[str, list[int]], turns: int, *, title: str = "part",
                cpu_ns: dict[str, int] | None = None) -> str:
    """A table: call path as an indented tree, calls per turn, p50/p90 per call, µs per turn."""
    children: dict[str, list[str]] = defaultdict(list)
    for path in samples:
        if "/" in path:
            children[path.rsplit("/", 1)[0]].append(path)
    lines = [f"{title:<64} {'calls/turn':>10} {'p50 µs':>8} {'p90 µs':>8} {'µs/turn':>8}",
             "-" * 102]
    totals = {"grand": 0.0}

    def show(path: str, depth: int) -> None:
        values = sorted(samples[path])
        per_turn = sum(values) / 1000 / turns
        if depth == 0:
            totals["grand"] += per_turn
        name = path.rsplit("/", 1)[-1]
        if depth == 0 and cpu_ns and path in cpu_ns:
            name += f"  [CPU {cpu_ns[path] / 1000 / turns:.0f} µs/turn]"
        lines.append(f"{'  ' * depth + name:<64} {len(values) / turns:>10.2f} "
                     f"{values[len(values) // 2] / 1000:>8.0f} "
                     f"{values[int(len(values) * .9)] / 1000:>8.0f} {per_turn:>8.0f}")
        kids = children.get(path, [])
        if kids:
            own = per_turn - sum(sum(samples[c]) / 1000 / turns for c in kids)
            for kid in kids:
                show(kid, depth + 1)
            lines.append(f"{'  ' * (depth + 1) + '(own)':<64} {'':>10} {'':>8} {'':>8} "
                         f"{own:>8.0f}")

    for path in samples:
        if "/" not in path:
            show(path, 0)
    lines.append("-" * 102)
    lines.append(f"{'total, mean per turn':<64} {'':>10} {'':>8} {'':>8} {totals['grand']:>8.0f}")
    return "\n".join(lines)
