"""gunicorn config for ``lane_turns.py --cprofile DIR``: profile every thread of the gateway.

Each thread of the gunicorn worker process (request threads, simple-websocket reader
threads, the event listener) runs under its own ``cProfile.Profile``; when the worker
exits (SIGTERM from the benchmark) all of them are merged into
``$BENCH_CPROFILE_OUT`` (a pstats file). The timer is ``time.thread_time``: the figures
are CPU seconds of the thread, so waiting (sockets, locks, SQLite busy sleeps, the GIL)
does not count. cProfile roughly doubles the CPU cost of Python code, so use the file for
proportions, not for absolute times.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import threading
import time

_profiles: list[cProfile.Profile] = []
_guard = threading.Lock()


def post_fork(server, worker):  # type: ignore[no-untyped-def]
    original_run = threading.Thread.run

    def profiled_run(self):  # type: ignore[no-untyped-def]
        profile = cProfile.Profile(time.thread_time)
        with _guard:
            _profiles.append(profile)
        profile.enable()
        try:
            original_run(self)
        finally:
            profile.disable()

    threading.Thread.run = profiled_run  # type: ignore[method-assign]
    main = cProfile.Profile(time.thread_time)
    _profiles.append(main)
    main.enable()


def worker_exit(server, worker):  # type: ignore[no-untyped-def]
    out = os.environ.get("BENCH_CPROFILE_OUT")
    if not out:
        return
    with _guard:
        profiles = list(_profiles)
    stats = None
    for profile in profiles:
        try:
            profile.create_stats()
            stats = pstats.Stats(profile) if stats is None else (stats.add(profile) or stats)
        except (TypeError, ValueError):
            continue
    if stats is not None:
        stats.dump_stats(out)
