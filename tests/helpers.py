"""Small helpers for tests: waiting on conditions without sleeping blindly."""

from __future__ import annotations

import base64
import contextlib
import gc
import http.client
import importlib
import pkgutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.01,
             what: str = "condition") -> T:
    """Poll until ``condition()`` is truthy and return it; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)



def inspected(store: Any, tenant_id: str, turn_id: str, timeout: float = 10.0) -> Any:
    """The inspector record of ``turn_id`` in ``store`` (a ``Backend``), once written: a
    worker writes it after it published the turn's events (docs/architecture.md, "The
    inspector"), so a test that saw the events waits for it."""
    from vancetope_brain.errors import NotFound
    from vancetope_brain.store import InspectorStore

    def record() -> Any:
        try:
            return store.port(InspectorStore).get_inspection(tenant_id, turn_id)
        except NotFound:
            return None

    return wait_for(record, timeout=timeout, what=f"the inspector record of {turn_id}")

def http_get(port: int, path: str, *, basic_auth: str | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """``GET http://127.0.0.1:port/path``: its status and body, ``(0, b"")`` while nothing
    answers (a server still starting); ``basic_auth`` is ``user:password``."""
    headers = dict(headers or {})
    if basic_auth:
        headers["Authorization"] = "Basic " + base64.b64encode(basic_auth.encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    except OSError:
        return 0, b""
    finally:
        conn.close()


FAST_LANES = {
    "VANCETOPE_LEASE_TTL": "2",
    "VANCETOPE_SWEEP_INTERVAL": "0.3",
    "VANCETOPE_SWEEP_AGE": "0.5",
}


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """Environment of a test server or worker: its own data dir, short lease and sweep times,
    and a demo model that streams without pausing."""
    return {"VANCETOPE_DATA_DIR": str(data_dir), "VANCETOPE_DEMO_TOKEN_DELAY": "0",
            **FAST_LANES, **extra}


SHIPPED_PACKAGES = ("vancetope_brain", "vancetope_gateway", "workers")


def import_shipped_modules() -> None:
    """Import every module of the shipped packages, so that subclass walks see every class."""
    for name in SHIPPED_PACKAGES:
        package = importlib.import_module(name)
        for module in pkgutil.walk_packages(package.__path__, f"{name}."):
            importlib.import_module(module.name)


def shipped_subclasses(base: type) -> Iterator[type]:
    """Every subclass of ``base`` (at any depth) defined in a shipped package."""
    for cls in base.__subclasses__():
        if cls.__module__.split(".")[0] in SHIPPED_PACKAGES:
            yield cls
        yield from shipped_subclasses(cls)


@contextlib.contextmanager
def without_gc() -> Iterator[None]:
    """No garbage collection inside (one before): a CPU bound on what a template costs must
    not count a full collection of the test process's heap, which the render budget does
    not count either (``sandbox._count_gc``) and which alone took 250 ms or more in a
    test worker late in the suite."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
