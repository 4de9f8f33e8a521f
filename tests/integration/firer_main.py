"""A second firing process for the schedule tests: the worker's parts on the cluster's
Redis and store, firing the schedules (``ScheduleService.fire``, what each sweep runs) every
50 ms until it is killed — faster than any sweep, so it races the workers' sweeps for every
tick. Run as ``python -m tests.integration.firer_main`` with the cluster's ``VANCETOPE_*``
variables."""

from __future__ import annotations

import sys
import time

from vancetope_brain.config import Config
from workers.celery_app import create_celery


def main() -> None:
    parts = create_celery(Config.from_env()).vancetope_worker()
    print("firing", flush=True)
    while True:
        try:
            parts.schedules.fire()
        except Exception as e:  # keep firing; the test reads the store
            print(f"fire failed: {e!r}", file=sys.stderr, flush=True)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
