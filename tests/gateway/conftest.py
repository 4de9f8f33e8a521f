"""Gateway test fixtures: the real Flask/flask-sock app served from a thread, per module."""

from __future__ import annotations

import pytest

from tests.gateway.wire import Client, echo, serve_in_thread


@pytest.fixture(scope="module")
def served(embedded):
    """``host:port`` of the embedded brain's gateway, running until the module ends."""
    with serve_in_thread(embedded.brain) as host:
        yield host


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
