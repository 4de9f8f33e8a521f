"""Stopping a running turn (``process-interrupt``): the gateway's request, the worker's
listener and the turn's check.

A request names the turn by its process and epoch (the one ``acquire_epoch`` gave the turn
that runs now) and does two things (``Interrupts.request``, one pipeline):

- it **publishes** ``tenant/process/epoch`` on the channel ``vt:interrupts:{db}``, to which
  every worker OS process listens with one thread (``InterruptListener``): the worker whose
  turn has a model call of that owner running cancels it on its model loop
  (``llm.aio.interrupt``), which closes the HTTP stream at once; the turn's thread gets
  ``Interrupted`` with what the call had streamed;
- it **sets** ``vt:interrupt:{pid}`` to the epoch for ``TTL_MS``, which the turn reads at
  its boundaries (``requested``: before and after each model call — one GET each, never
  per token): an interrupt that arrives while no call streams (a tool call runs, or the
  model does not stream) stops the turn at its next boundary instead of being lost. A key
  naming an older epoch is ignored, so a Stop that comes just after a turn ended never
  stops the next one.
"""

from __future__ import annotations

import logging
import threading

import redis

from vancetope_brain import keys
from vancetope_brain.events.bus import database
from vancetope_brain.llm import aio

log = logging.getLogger(__name__)

TTL_MS = 60_000
"""How long an interrupt request waits for its turn's next boundary (ms): longer than any
tool call a turn waits for (client tools: 30 s)."""


def owner(tenant_id: str, process_id: str, epoch: int) -> str:
    """The owner of a turn's model calls (``llm.aio.owned``): what an interrupt names."""
    return f"{tenant_id}/{process_id}/{epoch}"


class Interrupts:
    """The Redis side of interrupts; thread-safe."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self.channel = keys.interrupts(database(client))

    def request(self, tenant_id: str, process_id: str, epoch: int) -> None:
        """Ask the turn ``epoch`` of the process to stop (its worker, wherever it runs)."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.set(keys.interrupt(process_id), str(epoch), px=TTL_MS)
        pipe.publish(self.channel, owner(tenant_id, process_id, epoch))
        pipe.execute()

    def requested(self, process_id: str, epoch: int) -> bool:
        """Whether the turn ``epoch`` of the process was asked to stop."""
        value = self._redis.get(keys.interrupt(process_id))
        return value is not None and int(value) == epoch

    def done(self, process_id: str, epoch: int) -> None:
        """The turn ``epoch`` stopped: forget its request (a newer epoch's is kept)."""
        key = keys.interrupt(process_id)
        if self.requested(process_id, epoch):
            self._redis.delete(key)

    def listen(self) -> InterruptListener:
        return InterruptListener(self._redis, self.channel)


class InterruptListener:
    """One thread per worker OS process, subscribed to the interrupt channel: each message
    cuts that turn's running model call, if this process runs it (``llm.aio.interrupt``).
    ``close`` stops it (within a second)."""

    def __init__(self, client: redis.Redis, channel: str) -> None:
        self._redis = client
        self._channel = channel
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vt-interrupts", daemon=True)
        self._thread.start()
        self._ready.wait(5)  # subscribed before the first turn runs (or Redis is down)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                news = self._redis.pubsub(ignore_subscribe_messages=True)
                try:
                    news.subscribe(self._channel)
                    self._ready.set()
                    while not self._stop.is_set():
                        message = news.get_message(timeout=1.0)
                        if message is not None and message["type"] == "message":
                            data = message["data"]
                            aio.interrupt(data.decode() if isinstance(data, bytes) else data)
                finally:
                    news.close()
            except redis.RedisError:
                # Requests meanwhile still stop their turns at the next boundary (the key).
                log.warning("interrupt listener: Redis failed; subscribing again")
                self._ready.set()
                self._stop.wait(1.0)
