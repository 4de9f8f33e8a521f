"""Gateway test fixtures: the real Flask/flask-sock app served from a thread, per module."""

from __future__ import annotations

import threading

import pytest
from werkzeug.serving import make_server

from tests.gateway.wire import Client, echo
from vancetope_gateway.app import create_app


@pytest.fixture(scope="module")
def served(embedded):
    """``host:port`` of the embedded brain's gateway, running until the module ends."""
    app = create_app(embedded.brain, llm_description="test")
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{srv.port}"
    srv.shutdown()
    thread.join(5)
    app.extensions["vancetope.listener"].close()


@pytest.fixture
def emb(embedded):
    """The embedded brain with a model that echoes the last message, its lanes settled first
    so that no turn left by an earlier test meets this test's model."""
    embedded.worker.join()
    embedded.model = echo()
    return embedded


@pytest.fixture
def client(emb):
    """A protocol Connection of the embedded user, driven through a fake socket."""
    c = Client(emb, emb.who)
    yield c
    c.close()
