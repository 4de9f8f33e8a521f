"""Publishing events into per-session Redis Streams, and reading them back live."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from vancetope_brain import keys
from vancetope_brain.events.model import EventType, StreamEvent
from vancetope_brain.models.base import utcnow

log = logging.getLogger(__name__)

# INCR and XADD in one script so stream ids follow sequence numbers even when
# several workers publish into one session at once. A log that Redis lost (restart,
# expiry) starts again above every earlier seq: at the current time in microseconds,
# remembered as the log's origin so "nothing was ever trimmed" stays knowable.
_PUBLISH = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[4])
  redis.call('SET', KEYS[3], ARGV[4] + 1)
end
local seq = redis.call('INCR', KEYS[1])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], string.format('%d-0', seq), 'e', ARGV[1])
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[3]) end
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
                data: dict[str, Any] | None = None) -> int:
        """Append an event to the session's log; returns its sequence number."""
        body = json.dumps({"processId": process_id, "type": type.value, "data": data or {},
                           "at": utcnow().isoformat()}, separators=(",", ":"))
        return int(self._publish(keys=[keys.event_seq(session_id), keys.events(session_id),
                                       keys.event_origin(session_id)],
                                 args=[body, self._max_len, self._ttl, time.time_ns() // 1000]))

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


Callback = Callable[[StreamEvent], None]


class EventListener:
    """One reader thread per gateway process: follows the logs of the sessions it holds.

    ``follow(session, after_seq, callback)`` delivers every event with a larger
    seq, contiguously and once, to the callback, from the reader thread. The
    thread uses XREAD BLOCK over all followed streams; a newly followed
    session is picked up within ``block_ms`` (nothing is missed: reads resume
    from the last delivered id, not from "now").
    """

    def __init__(self, client: redis.Redis, *, block_ms: int = 100) -> None:
        self._redis = client
        self._block_ms = block_ms
        self._lock = threading.Lock()
        self._follows: dict[int, tuple[str, list[int], Callback]] = {}
        self._next_handle = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vt-event-listener", daemon=True)
        self._thread.start()

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> int:
        """Start delivering the session's events after ``after_seq``; returns a handle."""
        with self._lock:
            self._next_handle += 1
            self._follows[self._next_handle] = (session_id, [after_seq], callback)
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
                follows = list(self._follows.items())
            if not follows:
                self._stop.wait(self._block_ms / 1000)
                continue
            streams: dict[Any, Any] = {}
            for _, (session_id, last, _) in follows:
                key = keys.events(session_id)
                seq = last[0]
                # Several followers of one session: read from the lowest position.
                if key not in streams or _seq(streams[key]) > seq:
                    streams[key] = f"{seq}-0"
            try:
                result: list[tuple[bytes, _Rows]] | None = self._redis.xread(  # type: ignore[assignment]
                    streams, block=self._block_ms, count=500)
            except redis.RedisError:
                log.exception("event listener: Redis read failed; retrying")
                self._stop.wait(0.5)
                continue
            for raw_key, rows in result or []:
                key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
                session_id = key.removeprefix(keys.events(""))
                events = [_decode(session_id, sid, fields) for sid, fields in rows]
                self._dispatch(session_id, _seq(streams[key]), events)

    def _dispatch(self, session_id: str, read_after: int, events: list[StreamEvent]) -> None:
        """Deliver ``events``, read from after seq ``read_after``, to the session's followers."""
        with self._lock:
            targets = [f for f in self._follows.values() if f[0] == session_id]
        for _, last, callback in targets:
            if last[0] < read_after:
                # Followed from further back while this read ran: delivering would skip what
                # lies between. The next read starts at its position.
                continue
            for event in events:
                if event.seq <= last[0]:
                    continue
                last[0] = event.seq
                try:
                    callback(event)
                except Exception:
                    log.exception("event callback failed for session %s", session_id)
