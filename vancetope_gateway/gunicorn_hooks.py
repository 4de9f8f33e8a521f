"""gunicorn server hooks of the Procfile's ``web`` (``--config
python:vancetope_gateway.gunicorn_hooks``; the command line's settings still apply).

``child_exit``: a gunicorn worker that ended (crashed, or recycled) takes its open sockets
out of ``vancetope_open_websockets`` in multiprocess mode (prometheus-client's
``mark_process_dead``); its counters stay counted."""

from __future__ import annotations

from typing import Any

from vancetope_brain.observability import metrics


def child_exit(server: Any, worker: Any) -> None:
    metrics.forget_process(worker.pid)
