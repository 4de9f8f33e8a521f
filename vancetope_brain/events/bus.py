"""Publishing events into per-session Redis Streams, and reading them back live."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
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
# ARGV: max len, TTL, now (µs), the session's news channel, then a (body, dedupe id) pair
# per event, appended in order; returns their seqs. With a dedupe id, an id already in
# KEYS[4] publishes nothing and gives the seq it got; the mark is made in the same script
# as the XADD, so a publisher that dies leaves either both or neither. What it appended
# it also PUBLISHes on the news channel, as "{origin}\n{seq} {body}\n{seq} {body}…" (a
# body is JSON: no raw newline), so a gateway's listener gets the events of the logs it
# follows without reading them (``EventListener``; news is never the record).
_PUBLISH = """
local seqs = {}
local news = {}
local origin
for i = 5, #ARGV, 2 do
  local body, dedupe = ARGV[i], ARGV[i + 1]
  local seen = false
  if dedupe ~= '' then seen = redis.call('ZSCORE', KEYS[4], dedupe) end
  if seen then
    seqs[#seqs + 1] = tonumber(seen)
  else
    if redis.call('EXISTS', KEYS[1]) == 0 then
      redis.call('SET', KEYS[1], ARGV[3])
      redis.call('SET', KEYS[3], ARGV[3] + 1)
    end
    local seq = redis.call('INCR', KEYS[1])
    origin = redis.call('GET', KEYS[3]) or string.format('%d', seq)
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], string.format('%d-0', seq),
               'e', body, 'o', origin)
    news[#news + 1] = string.format('%d', seq) .. ' ' .. body
    if dedupe ~= '' then
      redis.call('ZADD', KEYS[4], seq, dedupe)
      redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -1 - ARGV[1])
    end
    seqs[#seqs + 1] = seq
  end
end
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[2]) end
if #news > 0 then redis.call('PUBLISH', ARGV[4], origin .. '\\n' .. table.concat(news, '\\n')) end
if redis.call('EXISTS', KEYS[4]) == 1 then redis.call('EXPIRE', KEYS[4], ARGV[2]) end
return seqs
"""


# The token events of many sessions in one call (``EventBus.publish_tokens``), each appended
# and announced as _PUBLISH appends an event without a dedupe id. ARGV: max len, TTL, now
# (µs); the prefixes of the seq, log, origin and published-ids keys and of the news channel
# (``keys``' names with an empty session id); the events' session ids (one a line) and their
# bodies (one a line: JSON has no raw newline). Its keys are those prefixes and the session
# ids joined, named here rather than in KEYS so the call's arguments do not grow with the
# sessions (several logs per call: like _PUBLISH, no Redis Cluster). Returns how many it
# appended.
_PUBLISH_TOKENS = """
local sessions = {}
for sid in string.gmatch(ARGV[9], '[^\\n]+') do sessions[#sessions + 1] = sid end
local n = 0
for body in string.gmatch(ARGV[10], '[^\\n]+') do
  n = n + 1
  local sid = sessions[n]
  local seqk, logk, origink, pubk = ARGV[4] .. sid, ARGV[5] .. sid, ARGV[6] .. sid, ARGV[7] .. sid
  if redis.call('EXISTS', seqk) == 0 then
    redis.call('SET', seqk, ARGV[3])
    redis.call('SET', origink, ARGV[3] + 1)
  end
  local seq = string.format('%d', redis.call('INCR', seqk))
  local origin = redis.call('GET', origink) or seq
  redis.call('XADD', logk, 'MAXLEN', '~', ARGV[1], seq .. '-0', 'e', body, 'o', origin)
  for _, key in ipairs({seqk, logk, origink}) do redis.call('EXPIRE', key, ARGV[2]) end
  if redis.call('EXISTS', pubk) == 1 then redis.call('EXPIRE', pubk, ARGV[2]) end
  redis.call('PUBLISH', ARGV[8] .. sid, origin .. '\\n' .. seq .. ' ' .. body)
end
return n
"""


@dataclass(frozen=True)
class Publish:
    """One event for ``EventBus.publish_many``: as ``publish``'s arguments."""

    type: EventType
    data: dict[str, Any] | None = None
    dedupe: str | None = None


class EventBus:
    """Writes and reads session event logs. Thread-safe (redis-py pools connections)."""

    def __init__(self, client: redis.Redis, *, max_len: int, ttl: int) -> None:
        self._redis = client
        self._max_len = max_len
        self._ttl = ttl
        self._db = database(client)
        self._publish = client.register_script(_PUBLISH)
        self._publish_tokens = client.register_script(_PUBLISH_TOKENS)

    def publish(self, session_id: str, process_id: str, type: EventType,
                data: dict[str, Any] | None = None, *, dedupe: str | None = None) -> int:
        """Append an event to the session's log; returns its sequence number.

        With ``dedupe`` (an outbox event's id), an event published under that id before
        is not appended again: its seq is returned. The mark lives as long as the log, for
        the log's last ``max_len`` marked events; a log that Redis lost forgets its marks
        with it.
        """
        return self.publish_many(session_id, process_id, [Publish(type, data, dedupe)])[0]

    def publish_many(self, session_id: str, process_id: str,
                     events: Sequence[Publish]) -> list[int]:
        """Append ``events`` of one process to the session's log in order, in one round trip
        (as ``publish`` each, one after the other); returns their sequence numbers."""
        if not events:
            return []
        return [int(seq) for seq in self._publish(*self._call(session_id, process_id, events))]

    def publish_tokens(self, tokens: Sequence[tuple[str, str, str]]) -> None:
        """Append one ``token`` event per ``(session_id, process_id, text)``, each as
        ``publish`` would (no dedupe id), all in one script call: one round trip and ten
        arguments however many events (their session ids and bodies each joined into one),
        so redis-py's cost of packing the call does not grow per event. Events of one
        process keep their order; the call is atomic."""
        if not tokens:
            return
        at = wire_time(utcnow())
        sessions: list[str] = []
        bodies: list[str] = []
        for session_id, process_id, text in tokens:
            sessions.append(session_id)
            bodies.append(event_body(process_id, EventType.TOKEN, {"text": text}, at))
        joined = "\n".join(sessions)
        if joined.count("\n") != len(sessions) - 1 or "" in sessions:
            raise ValueError("a session id that is empty or holds a newline")
        self._publish_tokens(args=[
            self._max_len, self._ttl, time.time_ns() // 1000, keys.event_seq(""),
            keys.events(""), keys.event_origin(""), keys.event_published(""),
            keys.event_news(self._db, ""), joined, "\n".join(bodies)])
        metrics.event_published(EventType.TOKEN.value).inc(len(bodies))

    def _call(self, session_id: str, process_id: str, events: Sequence[Publish]
              ) -> tuple[list[str], list[Any]]:
        """The publish script's keys and arguments for ``events``."""
        at = wire_time(utcnow())
        args: list[Any] = [self._max_len, self._ttl, time.time_ns() // 1000,
                           keys.event_news(self._db, session_id)]
        for event in events:
            args.append(event_body(process_id, event.type, event.data or {}, at))
            args.append(event.dedupe or "")
            metrics.event_published(event.type.value).inc()
        return ([keys.event_seq(session_id), keys.events(session_id),
                 keys.event_origin(session_id), keys.event_published(session_id)], args)

    def read(self, session_id: str, after_seq: int, count: int = 1000) -> list[StreamEvent]:
        """Events with seq > ``after_seq``, in order (at most ``count``)."""
        return [event.decoded() for event in self.read_live(session_id, after_seq, count)]

    def read_live(self, session_id: str, after_seq: int, count: int = 1000) -> list[LiveEvent]:
        """As ``read``, undecoded (what a gateway replays to a client)."""
        rows: _Rows = self._redis.xrange(  # type: ignore[assignment]
            keys.events(session_id), min=f"({after_seq}-0", count=count)
        return [LiveEvent(_seq(sid), session_id, _body(fields)) for sid, fields in rows]

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


def event_body(process_id: str, type: EventType, data: dict[str, Any], at: str) -> str:
    """An event as its log holds it: the JSON of ``StreamEvent`` without ``seq`` and
    ``sessionId``, its fields in the model's order and form, so the event's JSON is this
    with those two spliced in front (``LiveEvent.json``) and a gateway sends it without
    decoding it."""
    return json.dumps({"processId": process_id, "type": type.value, "data": data, "at": at},
                      separators=(",", ":"))


def wire_time(at: datetime) -> str:
    """``at`` as ``StreamEvent``'s JSON writes it (pydantic's form of a UTC datetime)."""
    return at.isoformat().replace("+00:00", "Z")


def database(client: redis.Redis) -> int:
    """The Redis database number of ``client`` (``keys.event_news`` names channels by it)."""
    return int(client.connection_pool.connection_kwargs.get("db") or 0)


def _seq(stream_id: bytes | str) -> int:
    raw = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    return int(raw.split("-", 1)[0])


_Rows = list[tuple[bytes, dict[bytes, bytes]]]
"""What redis-py returns for XRANGE, and per stream for XREAD (``decode_responses`` off)."""


def _body(fields: dict[Any, Any]) -> str:
    raw = fields[b"e"] if b"e" in fields else fields["e"]
    return raw.decode() if isinstance(raw, bytes) else raw


def _decode_body(seq: int, session_id: str, text: str) -> StreamEvent:
    body = json.loads(text)
    # Written by the publish script from ``event_body``'s JSON, so not validated again (that
    # was 6 % of the gateway's CPU under the LLM-shaped load): its fields are built here, typed.
    return StreamEvent.model_construct(
        seq=seq, session_id=session_id, process_id=body["processId"],
        type=EventType(body["type"]), data=body["data"], at=datetime.fromisoformat(body["at"]))


def _origin(fields: dict[Any, Any]) -> int | None:
    """The origin of the log an entry was written into (None for entries from before
    entries carried it)."""
    raw = fields.get(b"o", fields.get("o"))
    return None if raw is None else int(raw)


class LiveEvent:
    """An event as ``EventListener`` delivers it: its seq and session, and its body as the
    log holds it (``event_body``), decoded only when asked. A gateway sends ``json()`` on
    as the frame's data without building a model (that was a JSON decode, a model and a
    JSON encode per event on the listener's one thread)."""

    __slots__ = ("_decoded", "body", "seq", "session_id")

    def __init__(self, seq: int, session_id: str, body: str) -> None:
        self.seq = seq
        self.session_id = session_id
        self.body = body
        self._decoded: StreamEvent | None = None

    @property
    def type(self) -> EventType:
        """Read from the body without decoding it: ``event_body`` writes ``processId`` first,
        then ``type``, and a ``,"type":"`` whose quotes are not escaped cannot lie inside
        the JSON string before it."""
        start = self.body.find(',"type":"') + 9
        return EventType(self.body[start:self.body.index('"', start)])

    def decoded(self) -> StreamEvent:
        if self._decoded is None:
            self._decoded = _decode_body(self.seq, self.session_id, self.body)
        return self._decoded

    def json(self) -> str:
        """The event's JSON, as ``StreamEvent.model_dump_json(by_alias=True)`` gives the same
        value."""
        return f'{{"seq":{self.seq},"sessionId":{_quoted(self.session_id)},{self.body[1:]}'


@functools.lru_cache(maxsize=4096)
def _quoted(session_id: str) -> str:
    """``json.dumps(session_id)``, once per session rather than once per event."""
    return json.dumps(session_id)


Callback = Callable[[LiveEvent], None]


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
    with what the log holds; never a silent jump.

    The thread reads no log that has nothing new: it subscribes to the news channel of
    every followed session (``keys.event_news``), on which the publish script sends the
    events it appended. Events that follow on from a follower's position are delivered
    from the news; a follower they do not follow on from (it is behind, or joined from
    further back) has the log XREAD from its position instead. A session is read at once
    when it is first followed (after its channel is subscribed, so nothing falls between)
    or gets another follower; ``follow`` does no I/O but rings the listener's doorbell
    channel from a thread of its own. News is never the record: at most once per
    ``block_ms`` the thread MGETs the followed logs' origins and last seqs, so a reset is
    noticed and a log whose news was lost (the pub/sub connection dropped, Redis
    restarted) is read within about ``block_ms``; after a failed read everything followed
    is read again. Idle, that is one MGET per ``block_ms``. Callbacks must not block: they
    run on the one thread.
    """

    READ_COUNT = 500
    """Most entries one XREAD takes from a log; a log with more left is read again at once."""
    CONFIRM_SECONDS = 5.0
    """How long a new subscription may take to be confirmed before the listener gives up on
    its pub/sub connection (and, after a pause, subscribes everything again)."""

    def __init__(self, client: redis.Redis, *, block_ms: int = 1000) -> None:
        self._redis = client
        self._db = database(client)
        self._block_ms = block_ms
        self._lock = threading.Lock()
        self._follows: dict[int, _Follower] = {}
        self._by_session: dict[str, dict[int, _Follower]] = {}  # the same, by session
        self._next_handle = 0
        self._changes = 0  # follows and unfollows so far
        self._stop = threading.Event()
        self._doorbell = keys.listener_doorbell(uuid.uuid4().hex)
        self._ring = threading.Event()  # for the ringer
        self._followed = threading.Event()  # for the reader, while it follows nothing
        self._thread = threading.Thread(target=self._run, name="vt-event-listener", daemon=True)
        self._thread.start()
        self._ringer_thread = threading.Thread(target=self._ringer, name="vt-event-doorbell",
                                               daemon=True)
        self._ringer_thread.start()

    def follow(self, session_id: str, after_seq: int, callback: Callback,
               on_gap: GapCallback | None = None) -> int:
        """Start delivering the session's events after ``after_seq`` (0: from the start of
        its log); returns a handle. Does no I/O."""
        with self._lock:
            self._next_handle += 1
            follower = _Follower(session_id, callback, on_gap, after_seq)
            self._follows[self._next_handle] = follower
            self._by_session.setdefault(session_id, {})[self._next_handle] = follower
            self._changes += 1
            self._ring.set()
            self._followed.set()
            return self._next_handle

    def unfollow(self, handle: int) -> None:
        with self._lock:
            follower = self._follows.pop(handle, None)
            if follower is not None:
                followers = self._by_session[follower.session_id]
                del followers[handle]
                if not followers:
                    del self._by_session[follower.session_id]
                self._changes += 1

    def close(self) -> None:
        """Stop both threads (each waited for at most 5 s)."""
        self._stop.set()
        self._ring.set()
        self._followed.set()
        self._thread.join(timeout=5)
        self._ringer_thread.join(timeout=5)

    def _ringer(self) -> None:
        while True:
            self._ring.wait()
            self._ring.clear()
            try:
                self._redis.publish(self._doorbell, 1)
            except redis.RedisError:
                # The listener's own wait fails too, and it rounds again after it.
                log.warning("event listener: ringing its doorbell failed")
            if self._stop.is_set():  # that ring ended the listener's wait, to see it
                return

    def _run(self) -> None:
        news: Any = None  # the pub/sub connection (None: to be opened)
        subscribed: set[str] = set()  # sessions whose news channel it holds
        seen: set[int] = set()  # follower handles read for since they were followed
        due: set[str] = set()  # sessions to read this round
        next_check = 0.0
        # What is followed, taken afresh only when a follow or unfollow changed it: a round
        # (one per batch of news under load) walks no follower that has no news.
        follows: dict[int, _Follower] = {}
        groups: dict[str, list[_Follower]] = {}  # the followers by session
        taken = -1  # ``_changes`` when ``follows`` was taken
        while not self._stop.is_set():
            with self._lock:
                changed = taken != self._changes
                if changed:
                    taken = self._changes
                    follows = dict(self._follows)
                    groups = {sid: list(f.values()) for sid, f in self._by_session.items()}
            if not follows:
                self._followed.wait(self._block_ms / 1000)
                self._followed.clear()
                continue
            try:
                if news is None:
                    news = self._redis.pubsub(ignore_subscribe_messages=True)
                    news.subscribe(self._doorbell)
                    subscribed, seen, changed = set(), set(), True
                if changed:
                    sessions = set(groups)
                    if gone := subscribed - sessions:
                        news.unsubscribe(*(keys.event_news(self._db, s) for s in gone))
                    if new := sessions - subscribed:
                        due |= self._subscribe(news, new)
                    subscribed = sessions
                    due |= {f.session_id for handle, f in follows.items() if handle not in seen}
                    seen = set(follows)
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + self._block_ms / 1000
                    due |= self._check_logs(list(follows.values()))
                due &= subscribed  # (news of a session unfollowed meanwhile is nobody's)
                if not due:
                    due = self._wait(news, next_check)
                    continue  # the followers may have changed meanwhile
                due = self._read(due, [f for sid in due for f in groups[sid]])
            except Exception:  # Redis failed (or a bug): the one event thread must go on
                # After a reconnect everything followed is read again and the next round's
                # _check_logs finds the logs Redis lost.
                log.exception("event listener: reading failed; retrying")
                if news is not None:
                    with contextlib.suppress(Exception):
                        news.close()
                news = None
                next_check = 0.0
                self._stop.wait(0.5)
        if news is not None:  # closed: its pub/sub connection goes too
            with contextlib.suppress(Exception):
                news.close()

    def _subscribe(self, news: Any, sessions: set[str]) -> set[str]:
        """Subscribe to the sessions' news and wait until Redis confirmed it (a PING after
        the SUBSCRIBE, answered in order), so the read that follows cannot miss an event
        published meanwhile; returns the sessions whose news came meanwhile and must be
        read (``_take``)."""
        news.subscribe(*(keys.event_news(self._db, s) for s in sessions))
        news.ping()
        named: set[str] = set()
        deadline = time.monotonic() + self.CONFIRM_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            message = news.get_message(timeout=left)
            if message is not None and message.get("type") == "pong":
                return named
            if message is not None:
                self._take(message, named)
        raise redis.TimeoutError("the news subscription was not confirmed")

    def _wait(self, news: Any, until: float) -> set[str]:
        """Wait for news until ``until`` (or the doorbell), delivering the events it
        carries; returns once any came the sessions whose log must be read (``_take``):
        with whatever else is already there when one must be (one XREAD for them all),
        else at once. News delivered needs no look for more: the next round's wait
        finds it, and a poll that finds nothing (after nearly every burst) costs a
        system call and redis-py's parsing for nothing."""
        named: set[str] = set()
        timeout = until - time.monotonic()
        while timeout > 0 and not self._stop.is_set():
            message = news.get_message(timeout=timeout)
            heard = False
            while message is not None:
                if self._take(message, named):  # the doorbell
                    return named
                heard = heard or message.get("type") == "message"
                if heard and not named:
                    return named
                message = news.get_message(timeout=0)
            if heard:
                return named
            timeout = until - time.monotonic()
        return named

    def _take(self, message: dict[str, Any], named: set[str]) -> bool:
        """Handle one pub/sub message: news is delivered, or its session added to ``named``
        when its log must be read (a follower could not take it); True for the doorbell."""
        if message.get("type") != "message":  # a pong
            return False
        channel = message["channel"]
        channel = channel.decode() if isinstance(channel, bytes) else channel
        if channel == self._doorbell:
            return True
        session_id = channel.removeprefix(keys.event_news(self._db, ""))
        if not self._deliver_news(session_id, message["data"]):
            named.add(session_id)
        return False

    def _deliver_news(self, session_id: str, data: bytes | str) -> bool:
        """Deliver the events of one news message to the followers they follow on from;
        False when the log must be read (a follower is behind them, or the news holds no
        events)."""
        text = data.decode() if isinstance(data, bytes) else data
        origin, _, entries = text.partition("\n")
        if not entries:
            return False
        events: list[tuple[LiveEvent, int | None]] = []
        log_origin = int(origin)
        for entry in entries.split("\n"):
            seq, _, body = entry.partition(" ")
            events.append((LiveEvent(int(seq), session_id, body), log_origin))
        first = events[0][0].seq
        # A log's first event follows on from any position in the log before it.
        return not self._dispatch(session_id, 0 if first == log_origin else first - 1, events)

    def _read(self, due: set[str], follows: list[_Follower]) -> set[str]:
        """Read the ``due`` sessions' logs from their lowest follower positions and deliver
        what came; returns the sessions to read again at once (more entries left, or a
        follower that joined from further back during the read)."""
        streams: dict[Any, Any] = {}
        for follower in follows:
            if follower.session_id not in due:
                continue
            key = keys.events(follower.session_id)
            # Several followers of one session: read from the lowest position.
            if key not in streams or _seq(streams[key]) > follower.last:
                streams[key] = f"{follower.last}-0"
        result: list[tuple[bytes, _Rows]] | None = self._redis.xread(  # type: ignore[assignment]
            streams, count=self.READ_COUNT)
        again: set[str] = set()
        for raw_key, rows in result or []:
            key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
            session_id = key.removeprefix(keys.events(""))
            events = [(LiveEvent(_seq(sid), session_id, _body(fields)), _origin(fields))
                      for sid, fields in rows]
            if self._dispatch(session_id, _seq(streams[key]), events) or \
                    len(rows) >= self.READ_COUNT:
                again.add(session_id)
        return again

    def _check_logs(self, follows: list[_Follower]) -> set[str]:
        """Notice logs that were reset under their followers — Redis restarted empty (with
        or without a connection error on the way) or the log expired — though no new event
        shows it: such a follower gets a gap now and reads the new log from its start.
        Returns the sessions whose log holds events past a follower's position (their news
        may have been lost)."""
        sessions = list(dict.fromkeys(f.session_id for f in follows))
        raw: list[bytes | None] = self._redis.mget(  # type: ignore[assignment]
            [k for s in sessions for k in (keys.event_origin(s), keys.event_seq(s))])
        origins = {s: None if value is None else int(value) for s, value in zip(
            sessions, raw[::2], strict=True)}
        lasts = {s: int(value or 0) for s, value in zip(sessions, raw[1::2], strict=True)}
        behind: set[str] = set()
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
            if lasts[follower.session_id] > follower.last:
                behind.add(follower.session_id)
        return behind

    def _dispatch(self, session_id: str, read_after: int,
                  events: list[tuple[LiveEvent, int | None]]) -> bool:
        """Deliver ``events`` (each with its log's origin), read from after seq
        ``read_after``, to the session's followers; True if one was left out, to be read
        for again."""
        with self._lock:  # the session's followers, not a walk over every follower
            targets = list(self._by_session.get(session_id, {}).values())
        skipped = False
        for follower in targets:
            if follower.last < read_after:
                # Followed from further back while this read ran: delivering would skip what
                # lies between. The next read starts at its position.
                skipped = True
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
        return skipped

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
