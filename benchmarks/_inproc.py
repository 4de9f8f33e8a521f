"""The product in one process, for the in-process benchmarks (``turn_breakdown.py``,
``long_chat.py``, ``history.py``): one store shared by a worker's parts (its ``LaneRunner``
with the zero-latency model of ``bench_worker.py``) and a gateway's, as a worker pod and a
gateway pod would share it. Import it after ``--source`` went onto ``sys.path``: it imports
the product when called, from whichever checkout comes first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InProcess:
    config: Any   # vancetope_brain.config.Config
    store: Any    # vancetope_brain.store.Backend
    app: Any      # the worker's Celery app (``create_celery``): its producer wakes lanes
    worker: Any   # what ``app.vancetope_worker()`` returns: ``.runner`` runs a lane turn
    brain: Any    # vancetope_gateway.parts.Brain

    def close(self) -> None:
        self.worker.close()
        self.brain.close()  # and the store


def in_process(env: dict[str, str]) -> InProcess:
    """The worker's and the gateway's parts on one store, configured by ``env`` as a pod is."""
    from bench_worker import MODEL

    from vancetope_brain.config import Config
    from vancetope_brain.store import open_store
    from vancetope_gateway.parts import build_gateway
    from workers.celery_app import create_celery, enqueue_index_on, enqueue_on

    config = Config.from_env(env)
    store = open_store(config.store_url)
    app = create_celery(config, model_for=lambda process: MODEL, store=store)
    brain = build_gateway(config, enqueue_on(app), enqueue_index=enqueue_index_on(app),
                          store=store)
    return InProcess(config, store, app, app.vancetope_worker(), brain)


def bench_user(brain: Any, tenant: str = "bench", user: str = "bencher") -> Any:
    """A new tenant with one user; the user's ``Principal``."""
    from vancetope_brain.identity import Principal

    brain.identity.create_tenant(tenant, tenant)
    brain.identity.create_user(tenant, user, user)
    return Principal(tenant, user)
