"""A sender OS process for the multi-process tests: several threads steering one process.

``python -m tests.integration.sender_main OUT GO PROCESS_ID FIRST SENDERS PER_SENDER PACE_MS``

Builds its own brain from ``VANCETOPE_*`` (tenant ``acme``, user ``ada``), creates
``OUT.ready``, waits until the file ``GO`` exists so every sender process starts
together, runs
``SENDERS`` threads (sender numbers ``FIRST …``) that each steer ``PER_SENDER``
messages ``s<sender>-m<i>``, pausing a random 0..``PACE_MS`` ms before each (so the
sends overlap many turns instead of landing in one batch), and writes what ``steer``
returned to ``OUT`` as JSON: ``[[message id, seq, content, created], ...]``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time

from vancetope_brain.config import Config
from vancetope_brain.identity import Principal
from vancetope_gateway.parts import build_gateway
from workers.celery_app import create_celery, enqueue_index_on, enqueue_on


def main(argv: list[str]) -> None:
    out, go, process_id = argv[1], argv[2], argv[3]
    first, senders, per_sender = int(argv[4]), int(argv[5]), int(argv[6])
    pace = int(argv[7]) / 1000
    config = Config.from_env()
    app = create_celery(config)
    brain = build_gateway(config, enqueue_on(app), enqueue_index=enqueue_index_on(app))
    who = Principal("acme", "ada")
    sent: list[tuple[str, int, str, bool]] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def send(sender: int) -> None:
        try:
            for i in range(per_sender):
                time.sleep(random.uniform(0, pace))
                message, created = brain.sessions.steer(who, process_id, f"s{sender:02d}-m{i:03d}")
                with guard:
                    sent.append((message.id, message.seq, message.message.content, created))
        except BaseException as e:  # reported below; a silent thread would look like a loss
            errors.append(e)

    open(out + ".ready", "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise SystemExit(f"{go} never appeared")
        time.sleep(0.005)
    threads = [threading.Thread(target=send, args=(first + s,)) for s in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    app.close()
    brain.redis.close()
    brain.close()
    if errors:
        raise SystemExit(f"{len(errors)} sender(s) failed: {errors[0]!r}")
    with open(out + ".tmp", "w") as f:
        json.dump(sent, f)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main(sys.argv)
