"""Publishing events into per-session Redis Streams, and reading them back live."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from vancetope_brain import keys
from vancetope_brain.events.model import EventType, StreamEvent
from vancetope_brain.models.base import utcnow
from vancetope_brain.observability import metrics

log = logging.getLogger(__name__)

# INCR and XADD in one script so stream ids follow sequence numbers even when
# several workers publish into one session at once. A log that Redis lost (restart,
# expiry) starts again above every earlier seq: at the current time in microseconds,
# remembered as the log's origin (its first seq) so "nothing was ever trimmed" stays
# knowable; every entry carries the origin too ('o'), so a reader notices a reset.
# With a dedupe id (ARGV[5]), an id already in KEYS[4] publishes nothing and returns
# the seq it got; the mark is made in the same script as the XADD, so a publisher
# that dies leaves either both or neither.
_PUBLISH = """
if ARGV[5] ~= '' then
  local seen = redis.call('ZSCORE', KEYS[4], ARGV[5])
  if seen then return seen end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[4])
  redis.call('SET', KEYS[3], ARGV[4] + 1)
end
local seq = redis.call('INCR', KEYS[1])
local origin = redis.call('GET', KEYS[3]) or seq
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], string.format('%d-0', seq),
           'e', ARGV[1], 'o', origin)
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[3]) end
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[4], seq, ARGV[5])
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -1 - ARGV[2])
  redis.call('EXPIRE', KEYS[4], ARGV[3])
end
return seq
"""


class EventBus:
    """Writes and reads session event logs. Thread-safe (redis-py pools connections)."""

    def __init__(self, client: redis.Redis, *, max_len: int, ttl: int) -> None:
        self._redis = client
        self._max_len = max_len
        self._ttl = ttl
        self._publish = client.register_script(_PUBLISH)

    def publish(self, session_id: str, process_id: str, type: EventType,
                data: dict[str, Any] | None = None, *, dedupe: str | None = None) -> int:
        """Append an event to the session's log; returns its sequence number.

        With ``dedupe`` (an outbox event's id), an event published under that id before
        is not appended again: its seq is returned. The mark lives as long as the log, for
        the log's last ``max_len`` marked events; a log that Redis lost forgets its marks
        with it.
        """
        body = json.dumps({"processId": process_id, "type": type.value, "data": data or {},
                           "at": utcnow().isoformat()}, separators=(",", ":"))
        metrics.EVENTS_PUBLISHED.labels(type.value).inc()
        return int(self._publish(
            keys=[keys.event_seq(session_id), keys.events(session_id),
                  keys.event_origin(session_id), keys.event_published(session_id)],
            args=[body, self._max_len, self._ttl, time.time_ns() // 1000, dedupe or ""]))

    def read(self, session_id: str, after_seq: int, count: int = 1000) -> list[StreamEvent]:
        """Events with seq > ``after_seq``, in order (at most ``count``)."""
        rows: _Rows = self._redis.xrange(  # type: ignore[assignment]
            keys.events(session_id), min=f"({after_seq}-0", count=count)
        return [_decode(session_id, sid, fields) for sid, fields in rows]

    def missed(self, session_id: str, after_seq: int) -> int | None:
        """If events after ``after_seq`` are no longer kept, the first seq that is; else None.

        A client that saw nothing yet (``after_seq`` 0) missed nothing unless the
        log was trimmed; a client holding a seq from before the first kept one
        (trimmed, or from a log Redis lost) did.
        """
        rows: _Rows = self._redis.xrange(  # type: ignore[assignment]
            keys.events(session_id), count=1)
        if not rows:
            return None
        first = _seq(rows[0][0])
        origin = int(self._redis.get(keys.event_origin(session_id)) or first)
        if after_seq + 1 < first and (after_seq > 0 or first > origin):
            return first
        return None

    def last_seq(self, session_id: str) -> int:
        """The last sequence number handed out (0 if none)."""
        return int(self._redis.get(keys.event_seq(session_id)) or 0)


def _seq(stream_id: bytes | str) -> int:
    raw = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    return int(raw.split("-", 1)[0])


_Rows = list[tuple[bytes, dict[bytes, bytes]]]
"""What redis-py returns for XRANGE, and per stream for XREAD (``decode_responses`` off)."""


def _decode(session_id: str, stream_id: bytes | str, fields: dict[Any, Any]) -> StreamEvent:
    body = json.loads(fields[b"e"] if b"e" in fields else fields["e"])
    return StreamEvent(seq=_seq(stream_id), session_id=session_id, process_id=body["processId"],
                       type=EventType(body["type"]), data=body["data"], at=body["at"])


def _origin(fields: dict[Any, Any]) -> int | None:
    """The origin of the log an entry was written into (None for entries from before
    entries carried it)."""
    raw = fields.get(b"o", fields.get("o"))
    return None if raw is None else int(raw)


Callback = Callable[[StreamEvent], None]


@dataclass(frozen=True)
class Gap:
    """Events a follower should have had are gone: those after ``requested_after``, up to
    ``first_available``, the first seq it gets next — or 0 when its log is gone and holds
    nothing now (the events that follow start a new log)."""

    session_id: str
    requested_after: int
    first_available: int


GapCallback = Callable[[Gap], None]


@dataclass(eq=False)
class _Follower:
    session_id: str
    callback: Callback
    on_gap: GapCallback | None
    last: int
    """The seq of the last event delivered, or the position followed from; 0: none yet."""
    origin: int | None = None
    """The origin of the log being read, once known (None: no log seen yet)."""


class EventListener:
    """One reader thread per gateway process: follows the logs of the sessions it holds.

    ``follow(session, after_seq, callback, on_gap)`` delivers every event with a larger
    seq, contiguously and once, to the callback, from the reader thread. Where events
    the follower should have had are gone — a hole in the seqs (the log was trimmed past
    its position), or its log reset (Redis restarted empty, or the log expired: its
    origin changed or it vanished) — it gets a ``Gap`` first (``on_gap``), then goes on
    with what the log holds; never a silent jump. The thread uses XREAD BLOCK over all
    followed streams, after one MGET of their origins; a newly followed session is
    picked up within ``block_ms`` (nothing is missed: reads resume from the last
    delivered id, not from "now"). Callbacks must not block: they run on the one thread.
    """

    def __init__(self, client: redis.Redis, *, block_ms: int = 100) -> None:
        self._redis = client
        self._block_ms = block_ms
        self._lock = threading.Lock()
        self._follows: dict[int, _Follower] = {}
        self._next_handle = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vt-event-listener", daemon=True)
        self._thread.start()

    def follow(self, session_id: str, after_seq: int, callback: Callback,
               on_gap: GapCallback | None = None) -> int:
        """Start delivering the session's events after ``after_seq`` (0: from the start of
        its log); returns a handle. Does no I/O."""
        with self._lock:
            self._next_handle += 1
            self._follows[self._next_handle] = _Follower(session_id, callback, on_gap,
                                                         after_seq)
            return self._next_handle

    def unfollow(self, handle: int) -> None:
        with self._lock:
            self._follows.pop(handle, None)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                follows = list(self._follows.values())
            if not follows:
                self._stop.wait(self._block_ms / 1000)
                continue
            try:
                self._check_logs(follows)
                streams: dict[Any, Any] = {}
                for follower in follows:
                    key = keys.events(follower.session_id)
                    # Several followers of one session: read from the lowest position.
                    if key not in streams or _seq(streams[key]) > follower.last:
                        streams[key] = f"{follower.last}-0"
                result: list[tuple[bytes, _Rows]] | None = self._redis.xread(  # type: ignore[assignment]
                    streams, block=self._block_ms, count=500)
            except redis.RedisError:
                # After a reconnect the next round's _check_logs finds the logs Redis lost.
                log.exception("event listener: Redis read failed; retrying")
                self._stop.wait(0.5)
                continue
            for raw_key, rows in result or []:
                key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
                session_id = key.removeprefix(keys.events(""))
                self._dispatch(session_id, _seq(streams[key]), rows)

    def _check_logs(self, follows: list[_Follower]) -> None:
        """Notice logs that were reset under their followers — Redis restarted empty (with
        or without a connection error on the way) or the log expired — though no new event
        shows it: such a follower gets a gap now and reads the new log from its start."""
        sessions = list(dict.fromkeys(f.session_id for f in follows))
        raw: list[bytes | None] = self._redis.mget(  # type: ignore[assignment]
            [keys.event_origin(s) for s in sessions])
        origins = {s: None if value is None else int(value) for s, value in zip(
            sessions, raw, strict=True)}
        for follower in follows:
            now = origins[follower.session_id]
            # A follower that has not seen its log yet but holds a position in it (it was
            # followed from a replayed seq) finds it gone just the same.
            lost = now != follower.origin if follower.origin is not None else \
                now is None and follower.last > 0
            if lost:
                self._gap(follower, now or 0)
                follower.last = 0
            follower.origin = now

    def _dispatch(self, session_id: str, read_after: int, rows: _Rows) -> None:
        """Deliver ``rows``, read from after seq ``read_after``, to the session's followers."""
        events = [(_decode(session_id, sid, fields), _origin(fields)) for sid, fields in rows]
        with self._lock:
            targets = [f for f in self._follows.values() if f.session_id == session_id]
        for follower in targets:
            if follower.last < read_after:
                # Followed from further back while this read ran: delivering would skip what
                # lies between. The next read starts at its position.
                continue
            for event, origin in events:
                if event.seq <= follower.last:
                    continue
                # A log's first seq is its origin; after that, each seq is the last + 1.
                expected = follower.last + 1 if follower.last else origin
                reset = None not in (origin, follower.origin) and origin != follower.origin
                if reset or expected is not None and event.seq != expected:
                    self._gap(follower, event.seq)
                follower.last = event.seq
                follower.origin = origin if origin is not None else follower.origin
                try:
                    follower.callback(event)
                except Exception:
                    log.exception("event callback failed for session %s", session_id)

    def _gap(self, follower: _Follower, first_available: int) -> None:
        gap = Gap(follower.session_id, follower.last, first_available)
        metrics.EVENTS_DROPPED.labels("gap").inc()
        log.info("events of %s after seq %s are gone (next: %s)", gap.session_id,
                 gap.requested_after, first_available or "a new log")
        if follower.on_gap is None:
            return
        try:
            follower.on_gap(gap)
        except Exception:
            log.exception("gap callback failed for session %s", follower.session_id)
