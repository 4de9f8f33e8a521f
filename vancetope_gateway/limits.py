"""Caps on what one client may hold: the WebSocket connections, checked before the upgrade
(``ConnectionSlots``), and the HTTP doors' requests a minute and requests under way
(``count_in_minute``, ``RedisSlots``: the OpenAI-compatible door and the MCP server).

Per user across the cluster: a connection counts in the user's presence set in Redis
(``Presence.user_admit``), which every gateway renews for its live connections, so a
gateway that dies frees its users' slots within ``VANCETOPE_PRESENCE_TTL``. Per client
address on this gateway process: an in-memory count. Behind a proxy every client has the
proxy's address unless the app is wrapped in werkzeug's ``ProxyFix``; raise
``VANCETOPE_MAX_CONNECTIONS_PER_IP`` there instead (docs/protocol.md "Limits").
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vancetope_brain.errors import LimitExceeded, RateLimited
from vancetope_brain.events.presence import Presence
from vancetope_brain.identity import Principal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Slot:
    """One admitted connection: what ``ConnectionSlots.give_back`` needs to free it."""

    who: Principal
    address: str
    connection_id: str
    notify_mode: str


class ConnectionSlots:
    """``take`` a slot before the upgrade and ``give_back`` it when the request ends, however
    it ends (the socket's normal close, an abnormal one, or a handshake that failed)."""

    def __init__(self, presence: Presence, *, per_user: int, per_address: int) -> None:
        self._presence = presence
        self._per_user = per_user
        self._per_address = per_address
        self._by_address: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self, who: Principal, address: str, connection_id: str, notify_mode: str) -> Slot:
        """Count the connection, or raise ``LimitExceeded`` having counted nothing."""
        with self._lock:
            if self._by_address[address] >= self._per_address:
                raise LimitExceeded(f"{self._per_address} connections from {address} are "
                                    f"open on this gateway; close one first")
            self._by_address[address] += 1
        slot = Slot(who, address, connection_id, notify_mode)
        try:
            admitted = self._presence.user_admit(who.tenant_id, who.user_id, connection_id,
                                                 notify_mode, self._per_user)
        except BaseException:
            self._free_address(address)
            raise
        if not admitted:
            self._free_address(address)
            raise LimitExceeded(f"you have {self._per_user} connections open; close one first")
        return slot

    def held(self, address: str) -> int:
        """Connections from ``address`` open on this gateway process now."""
        with self._lock:
            return self._by_address[address]

    def give_back(self, slot: Slot) -> None:
        """Free the slot (the connection's own release may have left presence already)."""
        self._free_address(slot.address)
        self._presence.user_disconnect(slot.who.tenant_id, slot.who.user_id,
                                       slot.connection_id, slot.notify_mode)

    def _free_address(self, address: str) -> None:
        with self._lock:
            self._by_address[address] -= 1
            if self._by_address[address] <= 0:
                del self._by_address[address]


def count_in_minute(client: Any, key: str, cap: int, refusal: str) -> None:
    """Count one request in ``key``'s minute (a Redis count that expires with it); more than
    ``cap`` in it raises ``RateLimited`` with ``refusal``."""
    pipe = client.pipeline()
    pipe.set(key, 0, ex=60, nx=True)
    pipe.incr(key)
    if pipe.execute()[1] > cap:
        raise RateLimited(refusal)


@dataclass
class RedisSlots:
    """One slot in each of several caps on things under way across gateways (a user's, a
    tenant's, a gateway process's), held until ``give_back``: an entry in one Redis zset per
    cap, which a gateway that died or lost track of it leaves to expire ``ttl`` seconds on."""

    redis: Any
    keys: tuple[str, ...]
    member: str
    given_back: bool = False

    @classmethod
    def take(cls, client: Any, caps: Sequence[tuple[str, int, str]], ttl: float) -> RedisSlots:
        """A slot under every ``(key, cap, refusal)``, or ``LimitExceeded`` with the first
        refusal whose cap is full (having taken nothing)."""
        member, now = uuid.uuid4().hex, time.time()
        pipe = client.pipeline()
        for key, _, _ in caps:
            pipe.zremrangebyscore(key, "-inf", now)
            pipe.zadd(key, {member: now + ttl})
            pipe.expire(key, int(ttl) + 1)
            pipe.zcard(key)
        counts = pipe.execute()[3::4]
        slots = cls(client, tuple(key for key, _, _ in caps), member)
        for (_, cap, refusal), count in zip(caps, counts, strict=True):
            if count > cap:
                slots.give_back()
                raise LimitExceeded(refusal)
        return slots

    def give_back(self) -> None:
        if not self.given_back:
            self.given_back = True
            try:
                for key in self.keys:
                    self.redis.zrem(key, self.member)
            except Exception:  # they expire on their own
                log.warning("freeing a slot under way failed; it expires on its own")
