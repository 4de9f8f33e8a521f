"""Fuzzing a live gateway (issue 3 §7): thousands of malformed frames over real WebSockets to a
gunicorn gateway process, while a well-behaved client of another tenant keeps chatting on
the same gateway.

Proven: the gateway never crashes (alive, ``/healthz`` answers, no traceback in its log);
every text frame gets exactly one ``error`` frame with the documented code and the request's
id (frames over the size limit: close 1009 instead); no fuzz connection ever gets bound to a
session; nothing is written to the store for the fuzzing tenant; and the other client's
steer → streamed reply round trips keep completing during and after the fuzzing.

Frames are generated with hypothesis (``derandomize=True``: the same frames on every run):
random text and bytes, broken JSON, a wrong value for every field of every frame model in
``frames.REQUESTS`` (walked from the models, nested models included), bad envelopes, huge
numbers, deep nesting, unicode edge cases, oversized strings and frames. Valid requests are
never sent (``expected`` mirrors docs/protocol.md and filters them out), so nothing the fuzz
sends may create or change anything.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import json
import sqlite3
import threading
import time
import types
import typing
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from simple_websocket import ConnectionClosed

from tests.integration.gateways import Client, Gateway, Stack, running_stack, turn_done
from vancetope_brain import keys
from vancetope_brain.store import SessionStore
from vancetope_gateway import frames
from vancetope_gateway.chat_client import WebSocketClient

ROTATE_AFTER = 150  # frames per fuzz connection: under the rate limiter's burst of 200
REPLY_TIMEOUT = 10.0
TENANT_TABLES = ("projects", "users", "api_tokens", "sessions", "processes", "lanes", "messages",
                 "chat", "turns")


# ── what the gateway must answer (docs/protocol.md) ──────────────────────────

NESTING_SAFE = 200
"""JSON deeper than this may exceed the gateway's recursion limit while parsing or validating
(test_deeply_nested_json_is_refused_as_bad_input); below it every answer is exact."""


@dataclass(frozen=True)
class Expected:
    codes: frozenset[str] = frozenset()  # an error frame with one of these codes ...
    reply_to: str | None = None          # ... naming this request id
    closes: bool = False                 # or (only) a close with 1009
    any_reply_to: bool = False           # too deep to tell whether the id could be read


def nesting(raw: str) -> int:
    """How deeply the JSON text nests arrays and objects (brackets outside strings)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def expected(raw: str | bytes, max_bytes: int) -> Expected | None:
    """The gateway's documented answer to ``raw``; None if ``raw`` is a valid request."""
    if isinstance(raw, bytes):
        if len(raw) > max_bytes:
            return Expected(closes=True)
        return Expected(frozenset({"invalid_input"}))
    if len(raw.encode()) > max_bytes:  # (in UTF-8 bytes, also where that is not in characters)
        return Expected(closes=True)
    if nesting(raw) > NESTING_SAFE:
        # Maybe too deep for the gateway's JSON parser or validator: refused as bad input
        # either way, the id named if the gateway got as far as reading it.
        return Expected(frozenset({"bad_json", "invalid_input"}), any_reply_to=True)
    try:
        body = json.loads(raw)
        json.dumps(body, ensure_ascii=False).encode()  # lone surrogate escapes: not text
    except (ValueError, UnicodeEncodeError):
        return Expected(frozenset({"bad_json"}))
    rid = body["id"][:128] if isinstance(body, dict) and isinstance(body.get("id"), str) else None
    try:
        envelope = frames.Envelope.model_validate(body)
    except ValidationError:
        return Expected(frozenset({"invalid_input"}), rid)
    model = frames.REQUESTS.get(envelope.type)
    if model is None:
        return Expected(frozenset({"unknown_type"}), envelope.id)
    if envelope.id is None:
        return Expected(frozenset({"invalid_input"}))
    try:
        model.model_validate(envelope.data)
    except ValidationError:
        return Expected(frozenset({"invalid_input"}), envelope.id)
    return None


# ── frames from the models ───────────────────────────────────────────────────

def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the pydantic model inside ``annotation`` — X, X | None or list[X] —, is it a list)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            model, listed = _model_in(arg)
            if model is not None:
                return model, listed
    if origin is list and args:
        model, _ = _model_in(args[0])
        return model, model is not None
    return None, False


def _valid_value(annotation: Any) -> Any:
    model, listed = _model_in(annotation)
    if model is not None:
        return [baseline(model)] if listed else baseline(model)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return args[0]
    if origin in (typing.Union, types.UnionType):
        return None if type(None) in args else _valid_value(args[0])
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return next(iter(annotation)).value
    if origin is list and args:  # one valid item: a list may have to be non-empty
        return [_valid_value(args[0])]
    return {str: "x", int: 1, bool: False, dict: {}, list: []}.get(origin or annotation)


def baseline(model: type[BaseModel]) -> dict[str, Any]:
    """Valid data for ``model``: its required fields, plus every nested model filled in."""
    data = {}
    for info in model.model_fields.values():
        nested, _ = _model_in(info.annotation)
        if info.is_required() or nested is not None:
            data[info.alias or ""] = _valid_value(info.annotation)
    return data


def field_paths(model: type[BaseModel], base: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    """A path into ``base`` for every field of ``model`` and of the models nested in it."""
    for info in model.model_fields.values():
        if info.annotation is Any:
            continue  # anything is a valid value; no wrong type exists
        alias = info.alias or ""
        yield (alias,)
        nested, listed = _model_in(info.annotation)
        if nested is not None:
            inner = base[alias][0] if listed else base[alias]
            prefix = (alias, 0) if listed else (alias,)
            for path in field_paths(nested, inner):
                yield prefix + path


def replaced(data: Any, path: tuple[Any, ...], value: Any, *, delete: bool = False) -> Any:
    data = copy.deepcopy(data)
    target = data
    for step in path[:-1]:
        target = target[step]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


def _present(data: Any, path: tuple[Any, ...]) -> bool:
    for step in path:
        if not isinstance(data, dict | list) or (isinstance(data, dict) and step not in data):
            return False
        data = data[step]
    return True


def encode(body: Any, ascii_only: bool = True) -> str:
    if not ascii_only:
        text = json.dumps(body, ensure_ascii=False)
        with contextlib.suppress(UnicodeEncodeError):  # lone surrogates travel escaped only
            text.encode()
            return text
    return json.dumps(body)


EDGE_TEXT = ["", " ", "\x00", "\ud800", "\udfff", "\ufeff", "\ufffe", "\uffff", "\u202e",
             "e\u0301", "\U0001f600", "\U0010ffff", "\U0001d54f" * 9, "null", "0", "-1", "NaN",
             "\\", '"', "\n\r\t", "ses_" + "0" * 60, "x" * 65, "ä" * 64]
HUGE_NUMBERS = [2**31, 2**53 + 1, 2**63, -(2**63) - 1, 2**64, 10**100, -(10**100), 10**4000,
                1e308, -1e-308, 5e-324]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from(HUGE_NUMBERS),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(EDGE_TEXT))
long_text = st.one_of(
    st.integers(60, 33_000).map(lambda n: "x" * n),
    st.integers(60, 15_000).map(lambda n: "é" * n),
    st.integers(60, 5_000).map(lambda n: "\U0001f600" * n))
junk = st.one_of(
    st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8),
    long_text)
request_types = st.sampled_from(sorted(frames.REQUESTS))
ids = st.integers(0, 10**9).map(lambda n: f"f{n}")
unknown_types = st.text(min_size=1, max_size=70).filter(lambda t: t not in frames.REQUESTS)


def _envelope(type_: str, data: Any, rid: str = "x") -> dict[str, Any]:
    return {"type": type_, "id": rid, "data": data}


bad_envelopes = st.one_of(
    junk,  # a body that is not an object at all (or an object without type)
    st.builds(lambda t, i: {"type": t, "id": i, "data": {}}, junk, ids),
    st.builds(lambda t, i: {"type": t, "id": i, "data": baseline(frames.REQUESTS[t])},
              request_types, junk),  # id of the wrong type or too long
    st.builds(lambda t, i: {"type": t, "id": i, "data": baseline(frames.REQUESTS[t])},
              request_types, st.integers(129, 2000).map(lambda n: "i" * n)),
    st.builds(lambda t: {"type": t, "data": baseline(frames.REQUESTS[t])}, request_types),
    st.builds(lambda t, i, d: _envelope(t, d, i), unknown_types, ids, junk),
    st.builds(lambda t, i, d: _envelope(t, d, i), request_types, ids, junk),  # data not an object
    st.builds(lambda t, i, k, v: {**_envelope(t, baseline(frames.REQUESTS[t]), i), k: v},
              request_types, ids, st.text(max_size=10), junk),  # extra envelope field
    st.builds(lambda t, i, r: {**_envelope(t, baseline(frames.REQUESTS[t]), i), "replyTo": r},
              request_types, ids, junk),
)


@st.composite
def broken_json(draw: st.DrawFn) -> str:
    type_ = draw(request_types)
    text = encode(_envelope(type_, baseline(frames.REQUESTS[type_]), draw(ids)))
    at = draw(st.integers(0, len(text) - 1))
    how = draw(st.sampled_from(["truncate", "delete", "insert", "swap-quotes"]))
    if how == "truncate":
        return text[:at]
    if how == "delete":
        return text[:at] + text[at + 1:]
    if how == "insert":
        return text[:at] + draw(st.sampled_from(list("{}[]\",:'\\ x0\x00\u2028"))) + text[at:]
    return text.replace('"', "'")


def deep(n: int, kind: str) -> str:
    if kind == "array":
        return "[" * n + "]" * n
    if kind == "object":
        return '{"a":' * n + "1" + "}" * n
    return '{"type":"ping","id":"deep","data":{"x":' + "[" * n + "]" * n + "}}"


deep_frames = st.builds(deep, st.integers(1, 10_000),
                        st.sampled_from(["array", "object", "data"]))


@st.composite
def oversized(draw: st.DrawFn, limit: int) -> str | bytes:
    # Just over the limit: the whole frame is read before the close, so the close frame
    # arrives (a large unread remainder makes the kernel answer with RST instead).
    over = draw(st.integers(1, 2_500))
    kind = draw(st.sampled_from(["binary", "text", "multibyte"]))
    if kind == "binary":
        return b"\x00" * (limit + over)
    if kind == "multibyte":  # over the limit in UTF-8 bytes, under it in characters
        return encode(_envelope("process-steer", {"targetThinkProcessId": "p",
                                                  "content": "é" * (limit // 2 + over)}),
                      ascii_only=False)
    return encode(_envelope("process-steer", {"targetThinkProcessId": "p",
                                              "content": "x" * (limit + over)}))[:limit + over]


# ── the thrower ──────────────────────────────────────────────────────────────

class Fuzzer:
    """Sends frames in lockstep over fuzz connections and checks each answer."""

    def __init__(self, gateway: Gateway, token: str) -> None:
        self.gateway = gateway
        self.token = token
        self.ws: WebSocketClient | None = None
        self.on_socket = 0
        self.connections = 0
        self.max_bytes = 0
        self.outcomes: Counter[str] = Counter()
        self.sentinels = 0

    @property
    def sent(self) -> int:
        return sum(self.outcomes.values())

    def _socket(self) -> WebSocketClient:
        if self.ws is not None and self.on_socket >= ROTATE_AFTER:
            self.close()
        if self.ws is None:
            self.ws = WebSocketClient.connect(
                self.gateway.url, headers={"Authorization": f"Bearer {self.token}"})
            welcome = json.loads(self.ws.receive(timeout=REPLY_TIMEOUT))
            assert welcome["type"] == "welcome"
            self.max_bytes = welcome["data"]["maxFrameBytes"]
            summary = json.loads(self.ws.receive(timeout=REPLY_TIMEOUT))
            assert summary["type"] == "inbox-pending-summary"
            self.connections += 1
            self.on_socket = 0
        return self.ws

    def throw(self, raw: str | bytes) -> None:
        try:
            self._throw(raw)
        except BaseException:
            self._abandon()  # a failing example leaves no stray frame for the next one
            raise

    def _abandon(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(ConnectionClosed):
                self.ws.close()
            self._forget()

    def _throw(self, raw: str | bytes) -> None:
        ws = self._socket()
        want = expected(raw, self.max_bytes)
        assert want is not None, f"generated a valid request: {raw[:300]!r}"
        self.on_socket += 1
        with contextlib.suppress(OSError):  # the server may close while we still send
            ws.send(raw)
        try:
            reply = ws.receive(timeout=REPLY_TIMEOUT)
        except ConnectionClosed:
            assert want.closes, f"connection closed ({ws.close_reason}) on {raw[:300]!r}"
            assert ws.close_reason == 1009, f"closed with {ws.close_reason}, not 1009"
            under = isinstance(raw, str) and len(raw) <= self.max_bytes  # in characters
            self.outcomes["close-1009 (multibyte)" if under else "close-1009"] += 1
            self._forget()
            return
        assert reply is not None, f"no answer within {REPLY_TIMEOUT}s to {raw[:300]!r}"
        frame = json.loads(reply)
        assert frame["type"] == "error" and want.codes, (raw[:300], frame)
        assert frame["data"]["code"] in want.codes, (raw[:300], frame, want)
        assert want.any_reply_to or frame.get("replyTo") == want.reply_to, (raw[:300], frame, want)
        self.outcomes[frame["data"]["code"]] += 1

    def close(self) -> None:
        """End the current fuzz connection after checking that nothing else is queued on it
        and that it is bound to no session (a request needing one is refused)."""
        if self.ws is None:
            return
        self.sentinels += 1
        rid = f"sentinel-{self.sentinels}"
        self.ws.send(json.dumps({"type": "process-list", "id": rid, "data": {}}))
        frame = json.loads(self.ws.receive(timeout=REPLY_TIMEOUT))
        assert (frame["type"], frame.get("replyTo"), frame["data"].get("code")) == (
            "error", rid, "conflict"), f"stray or wrong frame before the sentinel: {frame}"
        with contextlib.suppress(ConnectionClosed):
            self.ws.close()
        self._forget()

    def _forget(self) -> None:
        if self.ws is not None:
            self.ws.thread.join(timeout=10)
            self.ws = None


def fuzz(fuzzer: Fuzzer, strategy: st.SearchStrategy[Any], examples: int,
         each: Callable[[], None] | None = None) -> None:
    """Throw ``examples`` frames drawn from ``strategy`` (valid requests filtered out)."""
    limit = fuzzer.max_bytes or 65536

    def invalid(raw: str | bytes) -> bool:
        return expected(raw, limit) is not None

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy.filter(invalid))
    def run(raw: str | bytes) -> None:
        fuzzer.throw(raw)
        if each is not None:
            each()

    run()


# ── the well-behaved neighbour and the store ─────────────────────────────────

class RoundTrips(threading.Thread):
    """steer → streamed reply, again and again, until stopped."""

    def __init__(self, client: Client, pid: str) -> None:
        super().__init__(name="round-trips", daemon=True)
        self.client, self.pid = client, pid
        self.done: list[int] = []  # token events of each completed reply
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def once(self) -> None:
        content = f"round trip {len(self.done)} while the fuzz goes on"
        start = len(self.client.events)
        self.client.request("process-steer", targetThinkProcessId=self.pid, content=content)
        events = self.client.until(turn_done(self.pid, f"echo: {content}"), timeout=30)[start:]
        tokens = [e["data"]["text"] for e in events if e["type"] == "token"]
        assert "".join(tokens) == f"echo: {content}"
        self.done.append(len(tokens))

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                self.once()
        except BaseException as e:  # reported by the test
            self.error = e


def row_counts(db: Path) -> Counter[tuple[str, str]]:
    """(table, tenant) → rows, for every tenant-scoped table, plus the tenants."""
    conn = sqlite3.connect(db)
    try:
        counts: Counter[tuple[str, str]] = Counter()
        for table in TENANT_TABLES:
            for tenant, n in conn.execute(
                    f"SELECT tenant_id, COUNT(*) FROM {table} GROUP BY tenant_id"):
                counts[(table, tenant)] = n
        counts[("tenants", "*")] = conn.execute("SELECT COUNT(*) FROM tenants").fetchone()[0]
        return counts
    finally:
        conn.close()


def for_tenant(counts: Counter[tuple[str, str]], tenant: str) -> dict[str, int]:
    return {table: counts[(table, tenant)] for table in TENANT_TABLES}


@pytest.fixture
def stack(tmp_path: Path, redis_url: str) -> Iterator[Stack]:
    with running_stack(tmp_path, redis_url, VT_TEST_DELAY="0.01") as s:
        s.cluster.start_workers("stream")
        s.start_gateways(1)
        yield s


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.filterwarnings("ignore:Generating overly large repr")  # a failing 60 kB frame
def test_thousands_of_malformed_frames_crash_nothing_store_nothing_and_disturb_no_one(stack):
    cluster, gateway = stack.cluster, stack.gateways[0]
    db = cluster.tmp / "v.db"
    # The neighbour: another tenant's user in a session on the same gateway process.
    cluster.brain.identity.create_tenant("beta", "beta")
    cluster.brain.identity.create_user("beta", "bob", "bob")
    neighbour = stack.client(gateway, cluster.brain.identity.issue_token("beta", "bob"))
    pid = neighbour.request("session-create", title="neighbour")["chatProcessId"]
    trips = RoundTrips(neighbour, pid)
    trips.once()
    before = row_counts(db)

    fuzzer = Fuzzer(gateway, stack.token)  # ada of tenant acme, who has no session
    fuzzer._socket()
    checks = 0

    def now_and_then() -> None:
        nonlocal checks
        checks += 1
        if checks % 250 == 0:
            assert gateway.alive() and gateway.get("/healthz")[0] == 200
            assert trips.error is None, trips.error

    started = time.monotonic()
    trips.start()
    try:
        # Every field of every request model, nested models included, gets wrong values.
        pairs = [(t, path) for t, model in sorted(frames.REQUESTS.items())
                 for path in field_paths(model, baseline(model))]
        assert {t for t, _ in pairs} == {t for t, m in frames.REQUESTS.items() if m.model_fields}
        for model in frames.REQUESTS.values():
            model.model_validate(baseline(model))  # the baselines themselves are valid
        for type_, path in pairs:
            base = baseline(frames.REQUESTS[type_])
            fuzz(fuzzer, st.builds(
                lambda v, i, a, t=type_, p=path, b=base: encode(_envelope(t, replaced(b, p, v), i),
                                                                a),
                junk, ids, st.booleans()), 20, now_and_then)
            # ... and is left out (refused where it is required).
            if _present(base, path):
                raw = encode(_envelope(type_, replaced(base, path, None, delete=True), "gone"))
                if expected(raw, fuzzer.max_bytes) is not None:
                    fuzzer.throw(raw)
        for type_, model in frames.REQUESTS.items():  # an unknown field in every model
            fuzzer.throw(encode(_envelope(type_, {**baseline(model), "bogus": 1}, "extra")))
        fuzz(fuzzer, bad_envelopes.map(encode), 400, now_and_then)
        fuzz(fuzzer, broken_json(), 300, now_and_then)
        fuzz(fuzzer, st.text(max_size=300), 250, now_and_then)
        fuzz(fuzzer, st.binary(max_size=600), 150, now_and_then)
        fuzz(fuzzer, deep_frames, 40, now_and_then)
        fuzzer.throw('{"type":"ping","id":"big","data":{"n":' + "9" * 5000 + "}}")
        fuzz(fuzzer, oversized(fuzzer.max_bytes), 12, now_and_then)
        fuzzer.close()
        during = len(trips.done)
    finally:
        trips.halt.set()
        trips.join(timeout=60)
    took = time.monotonic() - started
    assert trips.error is None, trips.error
    print(f"\nfuzz: {fuzzer.sent} frames ({len(pairs)} request fields mistyped) over "
          f"{fuzzer.connections} connections in {took:.1f}s: "
          f"{dict(fuzzer.outcomes)}; neighbour round trips meanwhile: {during} "
          f"(token events per reply: {trips.done[:5]}…)")

    assert fuzzer.sent >= 2000
    assert fuzzer.outcomes["close-1009"] >= 1 and fuzzer.outcomes["close-1009 (multibyte)"] >= 1
    assert fuzzer.outcomes["bad_json"] >= 100
    # Streamed, not only complete: the worker coalesces the tokens of a few milliseconds
    # (VANCETOPE_TOKEN_FLUSH_MS), so on a busy machine a reply may come as one event, but
    # not every reply does.
    assert during >= 1 and max(trips.done) >= 3
    # No crash: the process lives, answers, logged no traceback, and serves the neighbour.
    assert gateway.alive() and gateway.get("/healthz")[0] == 200
    trips.once()
    log = gateway.output_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    # Nothing written for the fuzzing tenant; the neighbour's rows are its round trips only.
    after = row_counts(db)
    trips_after = len(trips.done) - 1
    assert for_tenant(after, "acme") == for_tenant(before, "acme")
    assert after[("tenants", "*")] == before[("tenants", "*")]
    grown = {t: n - for_tenant(before, "beta")[t] for t, n in for_tenant(after, "beta").items()}
    assert grown == {**dict.fromkeys(TENANT_TABLES, 0), "messages": trips_after,
                     "chat": 2 * trips_after, "turns": trips_after}
    assert not cluster.brain.store.port(SessionStore).list_sessions(
        "acme", "ada", limit=1).sessions
    assert not [m for m in cluster.brain.redis.zrange(keys.PRESENCE_INDEX, 0, -1)
                if m.startswith(b"acme/")]


@pytest.mark.slow
def test_multibyte_frame_over_the_byte_limit_closes_with_1009(stack):
    """docs/protocol.md: a frame larger than ``VANCETOPE_MAX_FRAME_BYTES`` closes the socket
    with 1009 — also a text frame over the limit in UTF-8 bytes but not in characters, which
    simple_websocket (it counts characters) lets through to the protocol."""
    fuzzer = Fuzzer(stack.gateways[0], stack.token)
    ws = fuzzer._socket()
    limit = fuzzer.max_bytes
    raw = encode(_envelope("process-steer", {"targetThinkProcessId": "p", "content": "é" * limit},
                           "mb"), ascii_only=False)[: limit - 100]
    assert len(raw) <= limit < len(raw.encode())
    ws.send(raw)
    try:
        answer = ws.receive(timeout=REPLY_TIMEOUT)
    except ConnectionClosed:
        answer = None
    try:
        assert answer is None and ws.close_reason == 1009, (
            f"a {len(raw.encode())}-byte frame ({len(raw)} characters) over the "
            f"{limit}-byte limit got {answer!r} instead of close 1009")
    finally:
        with contextlib.suppress(ConnectionClosed):
            ws.close()
        fuzzer._forget()


@pytest.mark.slow
def test_deeply_nested_json_is_refused_as_bad_input(stack):
    """JSON nested deeper than the gateway's Python can parse or validate is bad input
    (``bad_json`` / ``invalid_input``), not a server bug: docs/protocol.md reserves
    ``internal`` for those (with a traceback in the log). The connection stays usable.
    """
    gateway = stack.gateways[0]
    fuzzer = Fuzzer(gateway, stack.token)
    codes = {}
    for n in (NESTING_SAFE, 900, 1000, 1200, 5000, 10_000):
        for kind in ("array", "object", "data"):
            ws = fuzzer._socket()
            ws.send(deep(n, kind))
            frame = json.loads(ws.receive(timeout=REPLY_TIMEOUT))
            assert frame["type"] == "error" and frame.get("replyTo") in (None, "deep"), frame
            codes[f"{kind}×{n}"] = frame["data"]["code"]
    fuzzer.close()  # the connection still answers in order, and is bound to nothing
    assert gateway.alive() and gateway.get("/healthz")[0] == 200
    internal = sorted(k for k, code in codes.items() if code == "internal")
    log = gateway.output_path.read_text(errors="replace")
    assert (internal, "RecursionError" in log) == ([], False), (
        f"deep nesting answered as a server bug (`internal`) for {internal}; gateway log: "
        f"{log[log.find('RecursionError') - 1500:][:2000] if 'RecursionError' in log else ''}")
