"""Which sessions and users have a client connected, on any gateway (Redis sorted sets).

A gateway registers each bound connection with an expiry and renews it while
the socket lives, so a crashed gateway's connections simply expire. The
sweeper finds sessions whose last client went away without saying goodbye;
the notification WS channel asks which users are online, and in which
``notifyMode``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import redis

from vancetope_brain import keys


def _member(tenant_id: str, session_id: str) -> str:
    return f"{tenant_id}/{session_id}"


def _split(member: bytes | str) -> tuple[str, str]:
    raw = member.decode() if isinstance(member, bytes) else member
    tenant_id, session_id = raw.split("/", 1)
    return tenant_id, session_id


def _user_member(connection_id: str, notify_mode: str) -> str:
    # The mode is part of the member so one ZRANGE answers "who is online, wanting what";
    # modes contain no ":", so the last ":" splits even if a connection id has one.
    return f"{connection_id}:{notify_mode}"


class Presence:
    def __init__(self, client: redis.Redis, *, ttl: float) -> None:
        """``ttl``: seconds a connection counts as present without renewal (gateways renew
        every ttl / 3)."""
        self._redis = client
        self.ttl = ttl

    def bind(self, tenant_id: str, session_id: str, connection_id: str) -> None:
        """Register (or renew) a connection bound to the session."""
        pipe = self._redis.pipeline()
        self._bound_on(pipe, tenant_id, session_id, connection_id, time.time() + self.ttl)
        pipe.execute()

    def _bound_on(self, pipe: redis.client.Pipeline, tenant_id: str, session_id: str,
                  connection_id: str, expires: float) -> None:
        pipe.zadd(keys.presence(session_id), {connection_id: expires})
        pipe.expire(keys.presence(session_id), int(self.ttl * 2))
        pipe.zadd(keys.PRESENCE_INDEX, {_member(tenant_id, session_id): expires})

    def _user_on(self, pipe: redis.client.Pipeline, tenant_id: str, user_id: str,
                 connection_id: str, notify_mode: str, expires: float) -> None:
        key = keys.user_presence(tenant_id, user_id)
        pipe.zadd(key, {_user_member(connection_id, notify_mode): expires})
        pipe.expire(key, int(self.ttl * 2))

    def renew_all(self, users: list[tuple[str, str, str, str]],
                  bound: list[tuple[str, str, str]]) -> None:
        """Renew many connections in one round trip (a gateway's renewer, so that a round
        over thousands of sockets takes milliseconds, far within the TTL): ``users`` as
        ``user_connect`` takes them (tenant, user, connection, notifyMode), ``bound`` as
        ``bind`` does (tenant, session, connection)."""
        expires = time.time() + self.ttl
        pipe = self._redis.pipeline(transaction=False)
        for user in users:
            self._user_on(pipe, *user, expires)
        for connection in bound:
            self._bound_on(pipe, *connection, expires)
        pipe.execute()

    def unbind(self, session_id: str, connection_id: str) -> None:
        self._redis.zrem(keys.presence(session_id), connection_id)

    def count(self, session_id: str) -> int:
        """Live connections of the session (expired ones are dropped first)."""
        key = keys.presence(session_id)
        pipe = self._redis.pipeline()
        pipe.zremrangebyscore(key, "-inf", time.time())
        pipe.zcard(key)
        return int(pipe.execute()[1])

    def forget(self, tenant_id: str, session_id: str) -> None:
        """The session has no client any more and its policy was applied."""
        self._redis.zrem(keys.PRESENCE_INDEX, _member(tenant_id, session_id))

    def abandoned(self) -> Iterator[tuple[str, str]]:
        """Sessions in the index whose every connection has expired (a gateway died)."""
        members: list[bytes] = self._redis.zrangebyscore(  # type: ignore[assignment]
            keys.PRESENCE_INDEX, "-inf", time.time())
        for member in members:
            tenant_id, session_id = _split(member)
            if self.count(session_id) == 0:
                yield tenant_id, session_id
            else:  # renewed meanwhile: move its index entry forward
                self._redis.zadd(keys.PRESENCE_INDEX,
                                 {member: time.time() + self.ttl}, xx=True)

    def touch(self, tenant_id: str, session_id: str, idle_timeout: float) -> None:
        """Client activity: the session is idle only ``idle_timeout`` seconds after this."""
        self._redis.zadd(keys.ACTIVITY, {_member(tenant_id, session_id):
                                         time.time() + idle_timeout})

    def idle(self) -> Iterator[tuple[str, str]]:
        """Sessions past their idle deadline (candidates; the caller checks presence)."""
        members: list[bytes] = self._redis.zrangebyscore(  # type: ignore[assignment]
            keys.ACTIVITY, "-inf", time.time())
        for member in members:
            yield _split(member)

    def drop_activity(self, tenant_id: str, session_id: str) -> None:
        self._redis.zrem(keys.ACTIVITY, _member(tenant_id, session_id))

    # ── users (any connection of the user, bound to a session or not) ─────
    def user_connect(self, tenant_id: str, user_id: str, connection_id: str,
                     notify_mode: str) -> None:
        """Register (or renew) a connection of the user with its ``notifyMode``
        (``all`` / ``critical-only`` / ``none``)."""
        pipe = self._redis.pipeline()
        self._user_on(pipe, tenant_id, user_id, connection_id, notify_mode,
                      time.time() + self.ttl)
        pipe.execute()

    def user_admit(self, tenant_id: str, user_id: str, connection_id: str, notify_mode: str,
                   limit: int) -> bool:
        """Register a new connection of the user unless the user already has ``limit`` live
        ones, on any gateway; atomic (MULTI), so handshakes racing each other cannot all
        pass. A refused connection leaves nothing behind."""
        key = keys.user_presence(tenant_id, user_id)
        member = _user_member(connection_id, notify_mode)
        pipe = self._redis.pipeline()
        pipe.zremrangebyscore(key, "-inf", time.time())
        self._user_on(pipe, tenant_id, user_id, connection_id, notify_mode,
                      time.time() + self.ttl)
        pipe.zcard(key)
        if int(pipe.execute()[-1]) <= limit:
            return True
        self._redis.zrem(key, member)
        return False

    def user_disconnect(self, tenant_id: str, user_id: str, connection_id: str,
                        notify_mode: str) -> None:
        self._redis.zrem(keys.user_presence(tenant_id, user_id),
                         _user_member(connection_id, notify_mode))

    def user_modes(self, tenant_id: str, user_id: str) -> list[str]:
        """The ``notifyMode`` of each live connection of the user (expired ones are dropped
        first); empty when the user is offline."""
        key = keys.user_presence(tenant_id, user_id)
        pipe = self._redis.pipeline()
        pipe.zremrangebyscore(key, "-inf", time.time())
        pipe.zrange(key, 0, -1)
        members = pipe.execute()[1]
        return [(m.decode() if isinstance(m, bytes) else m).rsplit(":", 1)[1] for m in members]

    def lock(self, session_id: str) -> redis.lock.Lock:
        """A short lock that serializes binding and the last-client-gone decision."""
        return self._redis.lock(keys.session_lock(session_id), timeout=5, blocking_timeout=5,
                                thread_local=False)
