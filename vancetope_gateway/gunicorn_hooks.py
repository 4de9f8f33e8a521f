"""gunicorn server hooks of the Procfile's ``web`` (``--config
python:vancetope_gateway.gunicorn_hooks``; the command line's settings still apply).

``child_exit``: a gunicorn worker that ended (crashed, or recycled) takes its open sockets
out of ``vancetope_open_websockets`` in multiprocess mode (prometheus-client's
``mark_process_dead``); its counters stay counted.

``control_socket``: gunicorn 25+ listens for its control commands (``gunicornc``) on one path
per user, ``~/.gunicorn/gunicorn.ctl``; two gateways on one host (``honcho start -c web=2``)
took it from each other, and the first to stop removed the other's. One per port here
(``$PORT``, what the Procfile binds; older gunicorns ignore the setting)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vancetope_brain.observability import metrics

control_socket = str(Path.home() / ".gunicorn" / f"gunicorn-{os.environ.get('PORT', '8000')}.ctl")


def child_exit(server: Any, worker: Any) -> None:
    metrics.forget_process(worker.pid)
