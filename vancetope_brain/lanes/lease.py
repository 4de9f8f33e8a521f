"""Lane leases: a Redis lock per process, renewed by one heartbeat thread per OS process."""

from __future__ import annotations

import logging
import threading
import uuid

import redis

from vancetope_brain import keys

log = logging.getLogger(__name__)

TAKE_OVER_MARGIN = 0.05
"""Seconds after a busy lease runs out at which a delayed turn takes the lane over."""


# KEYS: lease, re-check request. ARGV: our token. -1: the lease was no longer ours;
# else whether a re-check was asked for (and is now taken).
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1])
return redis.call('DEL', KEYS[2])
"""


class Lease:
    """A held lane lease. ``lost`` is set when a renewal finds the lock no longer ours."""

    def __init__(self, lock: redis.lock.Lock, process_id: str) -> None:
        self.lock = lock
        self.process_id = process_id
        self.lost = threading.Event()


class LeaseKeeper:
    """Hands out lane leases and keeps them alive.

    A lease is a redis-py ``Lock(thread_local=False)`` with ``ttl`` seconds;
    one daemon thread renews every held lease each ``ttl / 3`` seconds, so a
    long LLM call keeps its lane, while a frozen or killed worker loses it
    within ``ttl``; ``close`` stops it (the worker process is stopping). Correctness does not rest on this lock alone: the store's
    epoch fences a worker whose lease expired.

    No lost wake-up: a worker that finds the lease taken asks the holder for a
    re-check (``vt:recheck:{pid}``) and tries once more; the holder reads the
    request when it releases (``release`` returns True). Either the holder reads
    it, or it had released before the second try, which then gets the lease.
    A holder that died or froze reads nothing: the lane runner then also asks
    for a turn once the lease has ``remaining`` time left (``Waker.wake_after``).
    """

    def __init__(self, client: redis.Redis, *, ttl: float) -> None:
        self._redis = client
        self._ttl = ttl
        self._held: dict[int, Lease] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._release = client.register_script(_RELEASE)

    @property
    def ttl(self) -> float:
        return self._ttl

    def try_acquire(self, process_id: str) -> Lease | None:
        """The lease, or None at once if another worker holds it (which then re-checks the
        lane when it releases)."""
        lock = self._lock(process_id)
        if not lock.acquire(blocking=False):
            self._redis.set(keys.recheck(process_id), 1, px=int(self._ttl * 1000))
            if not lock.acquire(blocking=False):
                return None
            # Ours after all: our turn reads the store from here on, which is the re-check.
            self._redis.delete(keys.recheck(process_id))
        return self._keep(Lease(lock, process_id))

    @staticmethod
    def new_token() -> bytes:
        """A token to take a lease under elsewhere (``Waker.next_ready``), as redis-py's
        ``Lock`` makes one."""
        return uuid.uuid1().hex.encode()

    def adopt(self, process_id: str, token: bytes) -> Lease:
        """The lease of ``process_id`` that was taken under ``token`` (``Waker.next_ready``),
        kept alive from now on like one ``try_acquire`` took."""
        lock = self._lock(process_id)
        lock.local.token = token
        return self._keep(Lease(lock, process_id))

    def _lock(self, process_id: str) -> redis.lock.Lock:
        return self._redis.lock(keys.lease(process_id), timeout=self._ttl, thread_local=False)

    def _keep(self, lease: Lease) -> Lease:
        with self._guard:
            self._held[id(lease)] = lease
            if (self._thread is None or not self._thread.is_alive()) \
                    and not self._stop.is_set():
                self._thread = threading.Thread(target=self._renew_loop, name="vt-lease-heartbeat",
                                                daemon=True)
                self._thread.start()
        return lease

    def remaining(self, process_id: str) -> float:
        """Seconds until the lease of ``process_id`` runs out unless renewed (0 if free)."""
        return max(0, self._redis.pttl(keys.lease(process_id))) / 1000

    def release(self, lease: Lease) -> bool:
        """Give the lease back; True if another worker asked for a re-check meanwhile (one
        round trip for both). A lease already lost is simply forgotten (its new holder gets
        the request)."""
        with self._guard:
            self._held.pop(id(lease), None)
        token = lease.lock.local.token
        asked = -1 if token is None else self._release(
            keys=[keys.lease(lease.process_id), keys.recheck(lease.process_id)], args=[token])
        if asked < 0:
            lease.lost.set()
            return False
        return bool(asked)

    def close(self, timeout: float = 5.0) -> None:
        """Stop renewing: leases still held run out within ``ttl`` (their turns, if any are
        still running, are fenced by the epoch). A round under way finishes first."""
        self._stop.set()
        with self._guard:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._ttl / 3):
            with self._guard:
                held = list(self._held.values())
            if held:
                self._renew(held)

    def _renew(self, held: list[Lease]) -> None:
        """Renew every held lease in one pipeline: one round trip however many turns this
        process runs (one by one, 250 renewals under load took longer than the TTL)."""
        renewed = [lease for lease in held if lease.lock.local.token is not None]
        pipe = self._redis.pipeline(transaction=False)
        for lease in renewed:  # what ``Lock.reacquire`` runs
            lock = lease.lock
            lock.lua_reacquire(keys=[lock.name], args=[  # type: ignore[misc]
                lock.local.token, int(self._ttl * 1000)], client=pipe)
        try:
            results = pipe.execute(raise_on_error=False)
        except redis.RedisError:
            log.exception("renewing %d lane lease(s) failed; retrying", len(renewed))
            return
        for lease, result in zip(renewed, results, strict=True):
            if isinstance(result, Exception):
                log.error("lease renewal failed for %s; retrying: %s", lease.process_id, result)
            elif not result:
                with self._guard:
                    if self._held.pop(id(lease), None) is None:
                        continue  # released while the renewals ran
                # Set before telling: whoever reads the warning finds the turn fenced.
                lease.lost.set()
                log.warning("lane lease of %s lost; the turn will be fenced", lease.process_id)
