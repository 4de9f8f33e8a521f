"""A gateway that shuts down leaves no thread of its own behind: ``close_app`` stops the
socket hub and its frame pool, the event listener, the presence renewer and the token
watch (``vancetope serve`` and ``GatewayWorker`` call it on their way out); a worker's
``close`` stops its lease heartbeat."""

from __future__ import annotations

import threading

from tests.helpers import wait_for
from vancetope_brain.lanes import LeaseKeeper
from vancetope_gateway.app import close_app, create_app
from vancetope_gateway.serving import listen, make_embedded_server
from vancetope_gateway.socket_adapter import WebSocketClient
from vancetope_gateway.sockets import going_away

APP_THREADS = ("vt-hub", "vt-frames", "vt-presence", "vt-token-watch", "vt-event-listener",
               "vt-event-doorbell")


def _started_since(before: set[threading.Thread]) -> dict[str, threading.Thread]:
    """The app's threads started since ``before``, by name."""
    return {t.name: t for t in threading.enumerate()
            if t not in before and t.name.startswith(APP_THREADS)}


def test_close_app_stops_every_thread_the_app_started(embedded) -> None:
    before = set(threading.enumerate())
    app = create_app(embedded.brain, llm_description="test")
    srv = make_embedded_server(app, listen("127.0.0.1", 0), embedded.brain.config.header_timeout)
    serving = threading.Thread(target=srv.serve_forever, daemon=True)
    serving.start()
    _, secret = embedded.brain.identity.create_token("acme", "ada")
    ws = WebSocketClient.connect(f"ws://127.0.0.1:{srv.port}/ws?token={secret}")
    try:
        assert '"welcome"' in ws.receive(timeout=10)  # served: the hub's pool has a thread
        started = _started_since(before)
        assert {name.split("_")[0] for name in started} == set(APP_THREADS), started
        assert going_away(app) == 1
    finally:
        ws.sock.close()
        srv.shutdown()
        serving.join(5)
        close_app(app)
    alive = [name for name, thread in started.items() if thread.is_alive()]
    assert alive == [], f"still running after close_app: {alive}"


def test_the_lease_keeper_stops_its_heartbeat_on_close(embedded) -> None:
    keeper = LeaseKeeper(embedded.brain.redis, ttl=3.0)
    lease = keeper.try_acquire("proc_shutdown_test")
    assert lease is not None
    heartbeat = wait_for(lambda: [t for t in threading.enumerate()
                                  if t.name == "vt-lease-heartbeat" and t.is_alive()
                                  and t is keeper._thread], what="the heartbeat")[0]
    keeper.close()
    keeper.release(lease)
    assert not heartbeat.is_alive()
