"""The Redis broker transport's reconnect guard (workers/broker.py), and Flower's view of
the broker through it."""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from kombu import Connection

from tests.helpers import http_get, wait_for
from vancetope_brain.config import Config
from workers.broker import Transport
from workers.celery_app import (
    DOCUMENTS_QUEUE,
    LANE_SHARD,
    MAINTENANCE_QUEUE,
    create_celery,
    lane_queue,
)

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.redis


def test_an_ack_on_a_channel_whose_connection_closed_is_a_connection_error(
        redis_url: str) -> None:
    # What Celery's hub does on a broker restart: acks finished tasks on the old channel.
    # kombu's own transport raises AttributeError here, which ends the worker.
    connection = Connection(redis_url, transport=Transport)
    channel = connection.channel()
    connection.close()
    with pytest.raises(redis.ConnectionError):
        channel.qos.ack("a-delivery-tag")
    assert isinstance(redis.ConnectionError(), tuple(Transport.connection_errors))


def test_the_broker_pool_holds_as_many_connections_at_once_as_the_redis_cap(
        redis_url: str) -> None:
    # A gevent worker acks each task from its own greenlet: under load dozens at once,
    # past kombu's own cap of 10.
    app = create_celery(Config.from_env({"VANCETOPE_REDIS_URL": redis_url,
                                         "VANCETOPE_REDIS_MAX_CONNECTIONS": "40"}))
    with app.connection_for_write() as connection:
        pool = connection.default_channel.pool
        held = [pool.get_connection() for _ in range(30)]
        for conn in held:
            pool.release(conn)
        held = [pool.get_connection() for _ in range(40)]
        with pytest.raises(redis.ConnectionError):  # the cap is still a cap
            pool.get_connection()
        for conn in held:
            pool.release(conn)


def test_flowers_broker_view_lists_the_lane_queues(tmp_path: Path, redis_url: str) -> None:
    """Flower picks its broker view by the broker URL's scheme: with the transport named by
    module path the scheme was that path, and /broker answered 404 "'redis' broker is not
    supported" (issue 27 item 13). A real Flower, against real Redis."""
    config = Config.from_env({"VANCETOPE_REDIS_URL": redis_url,
                              "VANCETOPE_DATA_DIR": str(tmp_path)})
    producer = create_celery(config)
    with producer.connection_for_write() as connection:
        assert isinstance(connection.transport, Transport)  # the reconnect guard is still on
    producer.send_task(LANE_SHARD, args=[0], queue=lane_queue(0))  # no worker: it waits

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VANCETOPE_", "FLOWER_"))}
    env.update(VANCETOPE_REDIS_URL=redis_url, VANCETOPE_DATA_DIR=str(tmp_path),
               FLOWER_BASIC_AUTH="ops:flower-test")
    log = tmp_path / "flower.log"
    with log.open("wb") as out:
        flower = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.main", "flower",
             "--address=127.0.0.1", f"--port={port}"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        status, page = wait_for(
            lambda: flower.poll() is None and (got := http_get(
                port, "/broker", basic_auth="ops:flower-test"))[0] != 0 and got,
            timeout=60, what="Flower to answer")
        assert status == 200, page[:500]
        rows = dict(re.findall(r'<tr id="([^"]+)">\s*<td>[^<]*</td>\s*<td[^>]*>(\d+)</td>',
                               page.decode()))
        assert rows == {lane_queue(i): "0" for i in range(config.lane_shards)} | {
            MAINTENANCE_QUEUE: "0", DOCUMENTS_QUEUE: "0", lane_queue(0): "1"}, rows
    finally:
        flower.terminate()
        flower.wait(30)
    assert "is not supported" not in log.read_text(), log.read_text()


