"""Token coalescing (``events/tokens.py``, issue 16): a worker process publishes the tokens of
all its turns in batches, a process's tokens since the last batch merged into one event, in
the order they were streamed, before anything the turn publishes after its completion; a
full buffer makes the streaming thread publish; a failed batch fails the turn's stream."""

from __future__ import annotations

import fakeredis
import pytest
import redis

from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.events.bus import database
from vancetope_brain.events.tokens import TokenCoalescer
from vancetope_brain.llm.testing import PacedModel, paced_tokens
from vancetope_brain.models.settings import SettingScope

LONG = 3600.0
"""A flush interval no test outlives: after its first batch the flusher publishes nothing
more by itself, so what reaches the log is what the test flushed."""


@pytest.fixture
def bus(redis_url: str) -> EventBus:
    return EventBus(redis.Redis.from_url(redis_url), max_len=1000, ttl=60)


def _texts(bus: EventBus, session_id: str) -> list[str]:
    events = bus.read(session_id, 0)
    assert all(e.type is EventType.TOKEN for e in events)
    return [e.data["text"] for e in events]


def test_queued_tokens_of_a_stream_go_out_merged_in_order_when_flushed(bus: EventBus):
    coalescer = TokenCoalescer(bus, interval=LONG)
    stream = coalescer.stream("s1", "p1")
    stream.put("a")  # the first batch goes out at once
    wait_for(lambda: _texts(bus, "s1") == ["a"], what="the first token")
    for text in "bcd":
        stream.put(text)
    assert _texts(bus, "s1") == ["a"]  # queued, not published
    stream.flush()
    assert _texts(bus, "s1") == ["a", "bcd"]
    stream.flush()  # nothing queued: nothing published
    assert _texts(bus, "s1") == ["a", "bcd"]


def test_a_flush_publishes_only_its_own_stream_and_others_keep_their_order(bus: EventBus):
    coalescer = TokenCoalescer(bus, interval=LONG)
    first, second = coalescer.stream("s1", "p1"), coalescer.stream("s1", "p2")
    first.put("x")
    wait_for(lambda: _texts(bus, "s1") == ["x"], what="the first token")
    second.put("1")
    first.put("y")
    second.put("2")
    first.flush()
    assert [(e.process_id, e.data["text"]) for e in bus.read("s1", 0)] == [
        ("p1", "x"), ("p1", "y")]
    second.flush()
    assert [(e.process_id, e.data["text"]) for e in bus.read("s1", 0)][2:] == [("p2", "12")]


def test_the_flusher_publishes_every_stream_in_one_batch(bus: EventBus):
    coalescer = TokenCoalescer(bus, interval=0.001)
    streams = [coalescer.stream(f"s{i}", f"p{i}") for i in range(20)]
    for k in range(5):
        for stream in streams:
            stream.put(f"{k};")
    for i in range(20):
        wait_for(lambda i=i: "".join(_texts(bus, f"s{i}")) == "0;1;2;3;4;",
                 what=f"the tokens of s{i}")
    coalescer.close()


def test_a_full_buffer_is_published_by_the_thread_that_streams(bus: EventBus):
    coalescer = TokenCoalescer(bus, interval=LONG, max_pending=3)
    stream = coalescer.stream("s1", "p1")
    stream.put("a")
    wait_for(lambda: _texts(bus, "s1") == ["a"], what="the first token")
    stream.put("b")
    stream.put("c")
    assert _texts(bus, "s1") == ["a"]
    stream.put("d")  # the third waiting chunk: published before put returns
    assert _texts(bus, "s1") == ["a", "bcd"]


def test_a_batch_redis_refuses_fails_the_stream_at_its_next_call():
    down = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1)
    coalescer = TokenCoalescer(EventBus(down, max_len=10, ttl=60), interval=0.001)
    stream = coalescer.stream("s1", "p1")
    stream.put("a")  # published (and refused) by the flusher thread
    wait_for(lambda: stream.error is not None, what="the batch to fail")
    with pytest.raises(redis.ConnectionError):
        stream.put("b")  # raised, not queued
    stream.put("c")
    wait_for(lambda: stream.error is not None, what="the second batch to fail")
    with pytest.raises(redis.ConnectionError):
        stream.flush()


def test_publish_tokens_appends_in_order_and_loads_its_script_when_missing():
    bus = EventBus(fakeredis.FakeRedis(), max_len=100, ttl=60)  # an empty script cache
    bus.publish_tokens([("s1", "p", "a"), ("s2", "p", "b\nnewline"), ("s1", "q", "c")])
    s1, s2 = bus.read("s1", 0), bus.read("s2", 0)
    assert [(e.process_id, e.type, e.data["text"]) for e in s1] == [
        ("p", EventType.TOKEN, "a"), ("q", EventType.TOKEN, "c")]
    assert s1[1].seq == s1[0].seq + 1
    assert [e.data["text"] for e in s2] == ["b\nnewline"]
    # The next event of the log, by any path, follows on from them.
    assert bus.publish("s1", "p", EventType.TOKEN, {"text": "d"}) == s1[1].seq + 1
    for bad in ("", "s\n3"):  # session ids travel one a line
        with pytest.raises(ValueError):
            bus.publish_tokens([("s1", "p", "e"), (bad, "p", "f")])
    assert len(bus.read("s1", 0)) == 3


def test_published_tokens_are_announced_to_followers_as_other_events_are(bus: EventBus):
    client = bus._redis
    news = client.pubsub(ignore_subscribe_messages=True)
    news.subscribe(keys.event_news(database(client), "s1"))
    bus.publish_tokens([("s1", "p", "a"), ("s2", "p", "b"), ("s1", "p", "c")])
    messages = [wait_for(lambda: news.get_message(timeout=1), what="news") for _ in range(2)]
    news.close()
    # As the publish script announces an event: "{origin}\n{seq} {body}", the body as logged.
    entries = client.xrange(keys.events("s1"))
    assert [m["data"] for m in messages] == [
        fields[b"o"] + b"\n" + sid.split(b"-")[0] + b" " + fields[b"e"]
        for sid, fields in entries]


def test_a_turn_streams_every_token_in_order_before_its_chat_lines(embedded):
    embedded.worker.join()
    embedded.model = PacedModel(tokens=40, seconds=0.2)
    # Ford streams the model's text as it comes (Arthur wants a ``respond`` call).
    embedded.brain.settings.set("acme", SettingScope.tenant(), "session.defaultChatEngine",
                                "ford")
    session = embedded.brain.sessions.create_interactive(embedded.who)
    embedded.worker.join()
    pid = session.chat_process_id
    embedded.brain.sessions.steer(embedded.who, pid, "go")

    def ended():
        events = embedded.brain.events.read(session.id, 0)
        return events if any(e.type is EventType.CHAT_MESSAGE and e.data["role"] == "assistant"
                             for e in events) else None
    events = wait_for(ended, what="the reply")
    kinds = [e.type for e in events if e.process_id == pid]
    tokens = [e for e in events if e.type is EventType.TOKEN]
    assert kinds.index(EventType.CHAT_MESSAGE) > max(
        i for i, kind in enumerate(kinds) if kind is EventType.TOKEN)
    indexes = [i for e in tokens for i, _ in paced_tokens(e.data["text"])]
    assert indexes == list(range(40))
    reply = next(e for e in events if e.type is EventType.CHAT_MESSAGE
                 and e.data["role"] == "assistant")
    assert "".join(e.data["text"] for e in tokens) == reply.data["content"]
