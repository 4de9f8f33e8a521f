"""The gateway's event listener: every follower gets every event after its seq, once, in order —
or an explicit gap where the log lost some (trimmed, reset by a Redis restart) — and the bus's
deduplicated publish."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import fakeredis
import pytest
import redis

from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.events import EventBus, EventListener, EventType, Gap, StreamEvent


class HeldReads:
    """A Redis client whose stream reads wait until ``go`` is set, after telling ``reading``."""

    def __init__(self, client: fakeredis.FakeRedis) -> None:
        self._client = client
        self.reading = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._client, name)

    def xread(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.reading.set()
        self.go.wait(10)
        return self._client.xread(*args, **kwargs)


def test_a_session_followed_from_further_back_during_a_read_misses_nothing():
    """A client resumes from seq 0 while the reader thread is in a read that started at
    another follower's (later) position: it must still get the session's first events."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    seqs = [bus.publish("s", "p", EventType.TOKEN, {"text": str(i)}) for i in range(3)]
    reads = HeldReads(client)
    listener = EventListener(reads, block_ms=20)  # type: ignore[arg-type]
    got: dict[str, list[int]] = {"live": [], "resumed": []}
    try:
        listener.follow("s", seqs[-1], lambda e: got["live"].append(e.seq))
        assert reads.reading.wait(10)  # reading from the live follower's seq on
        listener.follow("s", 0, lambda e: got["resumed"].append(e.seq))
        seqs.append(bus.publish("s", "p", EventType.TOKEN, {"text": "3"}))
        reads.go.set()
        wait_for(lambda: seqs[-1] in got["resumed"], what="the resumed follower to catch up")
        assert got == {"live": seqs[-1:], "resumed": seqs}
    finally:
        reads.go.set()
        listener.close()


class Followed:
    """What one follower received: events' seqs and gaps, in arrival order."""

    def __init__(self) -> None:
        self.got: list[int | Gap] = []

    def event(self, event: StreamEvent) -> None:
        self.got.append(event.seq)

    def gap(self, gap: Gap) -> None:
        self.got.append(gap)

    def gaps(self) -> list[Gap]:
        return [g for g in self.got if isinstance(g, Gap)]


def _lose_log(client: fakeredis.FakeRedis, session_id: str) -> None:
    """What a Redis restart (or the log's expiry) does to a session's log."""
    client.delete(keys.events(session_id), keys.event_seq(session_id),
                  keys.event_origin(session_id), keys.event_published(session_id))


def test_a_hole_under_a_follower_is_a_gap_then_what_follows():
    """The log is trimmed past a follower's position while it is not reading: it gets a gap
    naming what it missed, then the events that are left, never a silent jump."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    first = bus.publish("s", "p", EventType.TOKEN)
    reads = HeldReads(client)
    listener = EventListener(reads, block_ms=20)  # type: ignore[arg-type]
    behind, fresh = Followed(), Followed()
    try:
        listener.follow("s", first, behind.event, behind.gap)
        assert reads.reading.wait(10)
        seqs = [bus.publish("s", "p", EventType.TOKEN) for _ in range(4)]
        client.xtrim(keys.events("s"), maxlen=2, approximate=False)  # seqs[0:2] are gone
        listener.follow("s", seqs[-1], fresh.event, fresh.gap)
        seqs.append(bus.publish("s", "p", EventType.TOKEN))
        reads.go.set()
        wait_for(lambda: seqs[-1] in behind.got and seqs[-1] in fresh.got,
                 what="both followers to reach the last event")
        assert behind.got == [Gap("s", first, seqs[2]), *seqs[2:]]
        assert fresh.got == seqs[-1:]
    finally:
        reads.go.set()
        listener.close()


def test_a_lost_log_is_a_gap_at_once_then_the_new_log_from_its_start():
    """Redis restarts empty under a follower (here: the log's keys deleted): it hears of it
    without waiting for another event — the last ones may be among the lost — and then gets
    the new log's events, without a second gap."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    seqs = [bus.publish("s", "p", EventType.TOKEN) for _ in range(2)]
    listener = EventListener(client, block_ms=20)
    followed = Followed()
    try:
        listener.follow("s", 0, followed.event, followed.gap)
        wait_for(lambda: followed.got == seqs, what="the old log")
        _lose_log(client, "s")
        wait_for(followed.gaps, what="the gap")
        assert followed.got == [*seqs, Gap("s", seqs[-1], 0)]
        fresh = [bus.publish("s", "p", EventType.TOKEN) for _ in range(2)]
        wait_for(lambda: fresh[-1] in followed.got, what="the new log")
        assert followed.got == [*seqs, Gap("s", seqs[-1], 0), *fresh]
    finally:
        listener.close()


def test_a_log_lost_before_the_listener_saw_it_is_a_gap_for_a_follower_with_a_position():
    """A client is followed from the seq its catch-up replayed, and the log is lost before
    the listener's next round: it has never seen the log, yet it gets the gap."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    seq = bus.publish("s", "p", EventType.TOKEN)
    reads = HeldReads(client)
    listener = EventListener(reads, block_ms=20)  # type: ignore[arg-type]
    busy, followed, fresh = Followed(), Followed(), Followed()
    try:
        listener.follow("other", 0, busy.event, busy.gap)
        assert reads.reading.wait(10)  # a round without "s"
        listener.follow("s", seq, followed.event, followed.gap)
        listener.follow("s", 0, fresh.event, fresh.gap)  # had nothing to lose
        _lose_log(client, "s")
        reads.go.set()
        wait_for(followed.gaps, what="the gap")
        after = bus.publish("s", "p", EventType.TOKEN)
        wait_for(lambda: after in followed.got and after in fresh.got, what="the new log")
        assert (followed.got, fresh.got) == ([Gap("s", seq, 0), after], [after])
    finally:
        reads.go.set()
        listener.close()


def test_a_reset_log_seen_first_through_its_new_events_is_one_gap():
    """The log is lost and a new one started between two checks of the logs: the follower
    sees it first in the news of the new log's events (their origin changed) and gets one
    gap, from its last seq to the new log's first event, then the new events."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    old = bus.publish("s", "p", EventType.TOKEN)
    listener = EventListener(client, block_ms=5000)  # no check of the logs meanwhile
    followed = Followed()
    try:
        listener.follow("s", 0, followed.event, followed.gap)
        wait_for(lambda: followed.got == [old], what="the old log")
        _lose_log(client, "s")
        fresh = [bus.publish("s", "p", EventType.TOKEN) for _ in range(2)]
        wait_for(lambda: fresh[-1] in followed.got, what="the new log")
        assert followed.got == [old, Gap("s", old, fresh[0]), *fresh]
    finally:
        listener.close()


class FailingReads:
    """A Redis client whose stream reads fail with ConnectionError while ``down`` is set."""

    def __init__(self, client: fakeredis.FakeRedis) -> None:
        self._client = client
        self.down = threading.Event()
        self.failed = threading.Event()

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._client, name)

    def xread(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.down.is_set():
            self.failed.set()
            raise redis.ConnectionError("Connection closed by server.")
        return self._client.xread(*args, **kwargs)


def test_redis_restarting_empty_while_the_listener_reads_is_a_gap_after_reconnecting():
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    seq = bus.publish("s", "p", EventType.TOKEN)
    flaky = FailingReads(client)
    listener = EventListener(flaky, block_ms=20)  # type: ignore[arg-type]
    followed = Followed()
    try:
        listener.follow("s", seq, followed.event, followed.gap)
        flaky.down.set()
        assert flaky.failed.wait(10)
        _lose_log(client, "s")  # the restarted Redis is empty
        flaky.down.clear()
        wait_for(followed.gaps, what="the gap")
        after = bus.publish("s", "p", EventType.TOKEN)
        wait_for(lambda: after in followed.got, what="the new log")
        assert followed.got == [Gap("s", seq, 0), after]
    finally:
        listener.close()


def test_followers_of_a_live_log_get_no_gap():
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    listener = EventListener(client, block_ms=20)
    from_start, later = Followed(), Followed()
    try:
        listener.follow("s", 0, from_start.event, from_start.gap)  # before the log exists
        seqs = [bus.publish("s", "p", EventType.TOKEN) for _ in range(3)]
        listener.follow("s", seqs[-1], later.event, later.gap)
        seqs += [bus.publish("s", "p", EventType.TOKEN) for _ in range(3)]
        wait_for(lambda: seqs[-1] in from_start.got and seqs[-1] in later.got,
                 what="the last event")
        assert (from_start.got, later.got) == (seqs, seqs[3:])
    finally:
        listener.close()


def test_a_publish_repeated_with_its_dedupe_id_adds_nothing():
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=3, ttl=60)
    first = bus.publish("s", "p", EventType.CHAT_MESSAGE, {"n": 1}, dedupe="chat:1")
    assert bus.publish("s", "p", EventType.CHAT_MESSAGE, {"n": 1}, dedupe="chat:1") == first
    assert bus.publish("t", "p", EventType.CHAT_MESSAGE, {"n": 1}, dedupe="chat:1") != first
    other = bus.publish("s", "p", EventType.CHAT_MESSAGE, {"n": 2}, dedupe="chat:2")
    plain = [bus.publish("s", "p", EventType.TOKEN) for _ in range(2)]  # no dedupe: each counts
    assert [e.seq for e in bus.read("s", 0)] == [first, other, *plain]
    assert bus.publish("s", "p", EventType.CHAT_MESSAGE, {"n": 2}, dedupe="chat:2") == other
    # The marks are capped like the log (the last max_len marked events) and expire with it.
    for n in range(3, 7):
        bus.publish("s", "p", EventType.CHAT_MESSAGE, {"n": n}, dedupe=f"chat:{n}")
    marks = [m.decode() for m in client.zrange(keys.event_published("s"), 0, -1)]
    assert marks == ["chat:4", "chat:5", "chat:6"]
    assert 0 < client.ttl(keys.event_published("s")) <= 60


class RecordedReads:
    """A Redis client that records the streams each XREAD names."""

    def __init__(self, client: fakeredis.FakeRedis) -> None:
        self._client = client
        self.reads: list[set[str]] = []

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._client, name)

    def xread(self, streams, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.reads.append({k.removeprefix(keys.events("")) for k in streams})
        return self._client.xread(streams, *args, **kwargs)


def test_live_events_come_with_their_news_and_a_follower_behind_reads_the_log():
    """Of 50 followed sessions, an event in one reaches its follower from the session's news
    alone: no log is read. A follower that is behind that event (it joined from further
    back) has that one log read from its position."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    reads = RecordedReads(client)
    listener = EventListener(reads, block_ms=5000)  # type: ignore[arg-type]
    followed = {f"s{i}": Followed() for i in range(50)}
    try:
        for session_id, f in followed.items():
            listener.follow(session_id, 0, f.event, f.gap)
        wait_for(lambda: set().union(*reads.reads) == set(followed), what="the first reads")
        before = len(reads.reads)
        first = bus.publish("s7", "p", EventType.TOKEN)  # the log's first event
        second = bus.publish("s7", "p", EventType.TOKEN)
        wait_for(lambda: followed["s7"].got == [first, second], what="the events")
        assert reads.reads[before:] == []
        assert all(not f.got for s, f in followed.items() if s != "s7")
        late = Followed()  # joins from the start while the listener waits for news
        listener.follow("s7", 0, late.event, late.gap)
        wait_for(lambda: late.got == [first, second], what="the late follower's catch-up")
        third = bus.publish("s7", "p", EventType.TOKEN)
        wait_for(lambda: late.got[-1:] == [third] and followed["s7"].got[-1:] == [third],
                 what="the next event for both")
        assert reads.reads[before:] == [{"s7"}]  # the late follower's catch-up, only
        assert not late.gaps() and not followed["s7"].gaps()
    finally:
        listener.close()


def test_an_event_whose_news_was_lost_is_still_delivered():
    """News is a hint: an event appended while nobody heard its news (here: written without
    it) reaches its follower at the listener's next check of the logs."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    listener = EventListener(client, block_ms=50)
    followed = Followed()
    try:
        listener.follow("s", 0, followed.event, followed.gap)
        first = bus.publish("s", "p", EventType.TOKEN)
        wait_for(lambda: followed.got == [first], what="the first event")
        unheard = client.incr(keys.event_seq("s"))
        client.xadd(keys.events("s"), {"e": client.xrange(keys.events("s"))[0][1][b"e"],
                                       "o": client.get(keys.event_origin("s"))},
                    id=f"{unheard}-0")
        wait_for(lambda: followed.got == [first, unheard], what="the unheard event")
    finally:
        listener.close()


def test_news_of_a_session_unfollowed_meanwhile_is_ignored(caplog):
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    reads = RecordedReads(client)
    listener = EventListener(reads, block_ms=5000)  # type: ignore[arg-type]
    gone, kept = Followed(), Followed()
    try:
        handle = listener.follow("gone", 0, gone.event, gone.gap)
        listener.follow("kept", 0, kept.event, kept.gap)
        wait_for(lambda: set().union(*reads.reads) == {"gone", "kept"}, what="the first reads")
        listener.unfollow(handle)  # the listener, waiting for news, still holds its channel
        bus.publish("gone", "p", EventType.TOKEN)
        seq = bus.publish("kept", "p", EventType.TOKEN)
        wait_for(lambda: kept.got == [seq], what="the followed session's event")
        assert gone.got == []
        assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    finally:
        listener.close()


def test_each_event_reaches_the_followers_of_its_session_only_as_they_come_and_go():
    """The listener finds a session's followers by session (not by walking them all): two
    followers of one session, one of another; an unfollowed one gets nothing more, and a
    session whose last follower left is delivered again once followed anew."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    listener = EventListener(client, block_ms=20)
    first, second, elsewhere, again = Followed(), Followed(), Followed(), Followed()
    try:
        one = listener.follow("s", 0, first.event, first.gap)
        two = listener.follow("s", 0, second.event, second.gap)
        listener.follow("t", 0, elsewhere.event, elsewhere.gap)
        a = bus.publish("s", "p", EventType.TOKEN)
        t = bus.publish("t", "p", EventType.TOKEN)
        wait_for(lambda: first.got == second.got == [a] and elsewhere.got == [t],
                 what="each session's event to its own followers")
        listener.unfollow(one)
        b = bus.publish("s", "p", EventType.TOKEN)
        wait_for(lambda: second.got == [a, b], what="the second event to the one left")
        listener.unfollow(two)  # "s" has no follower now
        c = bus.publish("s", "p", EventType.TOKEN)
        listener.follow("s", b, again.event, again.gap)
        d = bus.publish("s", "p", EventType.TOKEN)
        wait_for(lambda: again.got == [c, d], what="a new follower of the session")
        assert (first.got, second.got, elsewhere.got) == ([a], [a, b], [t])
    finally:
        listener.close()


def test_a_listener_hears_only_the_events_of_its_own_redis_database():
    """Redis's pub/sub channels are shared by every database of a server: two deployments or
    test runs, each in a database of its own, with a session (or user feed) of the same
    name, must not get each other's events."""
    server = fakeredis.FakeServer()
    mine, theirs = (fakeredis.FakeRedis(server=server, db=db) for db in (1, 2))
    listener = EventListener(mine, block_ms=50)
    followed = Followed()
    try:
        listener.follow("user.acme.ada", 0, followed.event, followed.gap)
        wait_for(lambda: mine.pubsub_numsub(keys.event_news(1, "user.acme.ada"))
                 [0][1] == 1, what="the listener's subscription")
        EventBus(theirs, max_len=100, ttl=60).publish("user.acme.ada", "p", EventType.TOKEN)
        seq = EventBus(mine, max_len=100, ttl=60).publish("user.acme.ada", "p", EventType.TOKEN)
        # Published first: heard on the same channel, it would have come first.
        wait_for(lambda: followed.got == [seq], what="its own database's event")
        assert followed.got == [seq]
    finally:
        listener.close()


@pytest.mark.parametrize("process_id", ["p", 'p,"type":"token', "pé\\\"✓"])
def test_a_live_event_is_the_logged_event_without_decoding_it(process_id: str):
    """What a gateway sends on (``LiveEvent.json``, its ``type``) is what the decoded event
    says, whatever the process id and data hold, and for tokens of ``publish_tokens`` too."""
    bus = EventBus(fakeredis.FakeRedis(), max_len=100, ttl=60)
    data = {"content": 'say "héllo" ✓\n', "type": "token", "n": 1.5, "none": None}
    bus.publish("s", process_id, EventType.CLIENT_TOOL_REQUEST, data)
    bus.publish("s", process_id, EventType.CHAT_MESSAGE)
    bus.publish_tokens([("s", process_id, 'a "b" ✓')])
    lives = bus.read_live("s", 0)
    assert [live.type for live in lives] == [
        EventType.CLIENT_TOOL_REQUEST, EventType.CHAT_MESSAGE, EventType.TOKEN]
    for live in lives:
        event = live.decoded()
        assert (live.seq, live.session_id, live.type) == (event.seq, "s", event.type)
        assert live.json().startswith(f'{{"seq":{live.seq},"sessionId":"s","processId":')
        assert json.loads(live.json()) == json.loads(event.model_dump_json(by_alias=True))


def test_an_event_logged_before_bodies_took_the_model_s_form_still_goes_out_whole():
    """A log written by the code before (``at`` as ``isoformat``) is sent as it was."""
    client = fakeredis.FakeRedis()
    body = ('{"processId":"p","type":"token","data":{"text":"x"},'
            '"at":"2026-12-03T06:00:00.120000+00:00"}')
    client.xadd(keys.events("s"), {"e": body, "o": "1"}, id="1-0")
    (live,) = EventBus(client, max_len=100, ttl=60).read_live("s", 0)
    assert live.type is EventType.TOKEN
    assert json.loads(live.json())["at"] == "2026-12-03T06:00:00.120000+00:00"
    assert live.decoded().at == datetime(2026, 12, 3, 6, 0, 0, 120000, tzinfo=UTC)


def test_an_event_read_back_is_the_event_published_with_its_types():
    """Events from the log are built without validation (our own publish script wrote
    them): they must still equal the validated event, field for field and type for type."""
    client = fakeredis.FakeRedis()
    bus = EventBus(client, max_len=100, ttl=60)
    data = {"content": "héllo ✓", "n": 1.5, "nested": {"list": [1, None]}}
    seq = bus.publish("s", "p", EventType.CHAT_MESSAGE, data)
    (event,) = bus.read("s", 0)
    assert event == StreamEvent(seq=seq, session_id="s", process_id="p",
                                type=EventType.CHAT_MESSAGE, data=data, at=event.at)
    assert isinstance(event.type, EventType) and event.at.tzinfo is not None
    assert StreamEvent.model_validate_json(event.model_dump_json(by_alias=True)) == event
