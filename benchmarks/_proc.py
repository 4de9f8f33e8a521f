"""CPU seconds of OS processes from ``/proc`` (Linux), for the benchmarks' CPU-per-turn figures."""

from __future__ import annotations

import os
import resource
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()


def tree(root: int) -> list[int]:
    """``root`` and all its descendants (a gunicorn worker, prefork children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st:
                children.setdefault(int(st[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_seconds(pids: list[int], *, reaped: bool = False) -> float:
    """User + system CPU seconds of these processes (all their threads) so far; with
    ``reaped``, plus those of the children they waited for."""
    total = 0
    for pid in pids:
        st = _stat(pid)
        if st:
            total += sum(int(field) for field in st[11:15 if reaped else 13])
    return total / CLK_TCK


def machine_busy() -> float:
    """CPU seconds all processors spent busy since boot (/proc/stat, all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    values = [int(v) for v in fields[:8]]
    return (sum(values) - values[3] - values[4]) / CLK_TCK


def own_cpu() -> float:
    """CPU seconds of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (``nan`` for no values)."""
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]
