"""One Redis database per test run, so two runs on one machine never meet.

A run claims a database among 1..15 of the Redis at 127.0.0.1:6379 (or the one that
``VANCETOPE_TEST_REDIS_URL`` pins). A database is free when no client is connected to
it and it is empty or was left by a test run whose claim has expired (killed runs).
The claim is the key ``vancetope:test-run`` (the run's id, ``CLAIM_TTL`` seconds,
renewed by a thread while the run lives); ``vancetope:test-db`` marks the data as a
test run's. A run flushes only its own database: before each test that asks for Redis
and at exit, which also releases the claim.

Everything a run puts in Redis lives in that database: lanes, events and the Celery
queues (kombu keeps queues as keys of the database and prefixes its fanout channels
with the database number). A worker left over from a killed run stays connected to
its own database, which nobody claims while it is, so it drains nobody's queues.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import uuid

import redis

from vancetope_brain.events.bus import database

SERVER = "redis://127.0.0.1:6379"
DATABASES = range(1, 16)
CLAIM_KEY = "vancetope:test-run"
MARKER_KEY = "vancetope:test-db"
CLAIM_TTL = 120

# Takes the database for run ARGV[1] if it holds that run's claim, or is free: empty, or
# left by a test run whose claim expired. Leaves it empty but for the claim and the marker.
_TAKE = """
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then
  if holder or (redis.call('DBSIZE') > 0 and redis.call('EXISTS', KEYS[2]) == 0) then
    return 0
  end
end
redis.call('FLUSHDB')
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[2], 'a Vancetope test run; free once ' .. KEYS[1] .. ' is gone')
return 1
"""
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('EXPIRE', KEYS[1], ARGV[2])
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('FLUSHDB')
return 1
"""


class NoFreeDatabase(RuntimeError):
    """Raised when no candidate database can be claimed; the message says what to do."""


class RunDatabase:
    """The database this test run claimed. Call ``reset`` for a clean database, ``release``
    at exit."""

    def __init__(self, url: str, client: redis.Redis, run_id: str) -> None:
        self.url, self._client, self._run_id = url, client, run_id
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, name="vt-test-redis-claim",
                                         daemon=True)
        self._renewer.start()

    @classmethod
    def claim(cls, pinned: str | None) -> RunDatabase:
        """Claim ``pinned`` or the first free database of ``SERVER``; raise ``NoFreeDatabase``
        or ``redis.ConnectionError``."""
        urls = [pinned] if pinned else [f"{SERVER}/{n}" for n in DATABASES]
        run_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        with redis.Redis.from_url(urls[0]) as probe:
            me = probe.client_id()
            connected = {int(c["db"]) for c in probe.client_list() if int(c["id"]) != me}
        for url in urls:
            client = redis.Redis.from_url(url)
            if (database(client) not in connected
                    and client.eval(_TAKE, 2, CLAIM_KEY, MARKER_KEY, run_id, CLAIM_TTL)):
                return cls(url, client, run_id)
            client.close()
        where = pinned or f"databases {DATABASES[0]}..{DATABASES[-1]} of {SERVER}"
        raise NoFreeDatabase(
            f"no free Redis database for this test run in {where}: each holds another "
            f"run's claim ({CLAIM_KEY}), data that no test run left, or a client connection. "
            "Stop leftover test processes (`redis-cli client list` shows who uses which "
            "db), empty a database that is yours (`redis-cli -n N flushdb`), or pin one "
            "with VANCETOPE_TEST_REDIS_URL=redis://host:port/N.")

    def reset(self) -> None:
        """Empty this run's database (its claim stays)."""
        if not self._client.eval(_TAKE, 2, CLAIM_KEY, MARKER_KEY, self._run_id, CLAIM_TTL):
            raise NoFreeDatabase(f"this test run lost its claim on {self.url} to another "
                                 f"run ({CLAIM_KEY} = {self._client.get(CLAIM_KEY)!r})")

    def release(self) -> None:
        """Stop renewing, flush the database and drop the claim."""
        self._stop.set()
        self._renewer.join()
        self._client.eval(_RELEASE, 1, CLAIM_KEY, self._run_id)
        self._client.close()

    def _renew(self) -> None:
        while not self._stop.wait(CLAIM_TTL / 4):
            try:
                if not self._client.eval(_RENEW, 1, CLAIM_KEY, self._run_id, CLAIM_TTL):
                    print(f"test run lost its claim on {self.url}", file=sys.stderr)
            except redis.RedisError as e:  # Redis away for a moment; the next round retries
                print(f"could not renew the claim on {self.url}: {e!r}", file=sys.stderr)
