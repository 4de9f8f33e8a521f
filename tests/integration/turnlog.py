"""The test workers' log files: one line per write, appended with O_APPEND, so lines from
threads and processes never interleave. Imported by ``worker_main`` and the scripted
models alike (importing ``worker_main`` itself from a model would load a second copy of
the running ``__main__``)."""

from __future__ import annotations

import os
import time


def append_line(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode() + b"\n")
    finally:
        os.close(fd)


def log(kind: str, detail: object = "") -> None:
    """A line ``<kind> <pid> <unix time> [detail]`` of the turn log ``VT_TEST_LOG``, if set."""
    path = os.environ.get("VT_TEST_LOG")
    if path:
        append_line(path, f"{kind} {os.getpid()} {time.time():.6f} {detail}".rstrip())
