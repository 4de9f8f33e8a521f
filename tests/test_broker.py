"""The Redis broker transport's reconnect guard (workers/broker.py)."""

import pytest
import redis
from kombu import Connection

from workers.broker import Transport

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
