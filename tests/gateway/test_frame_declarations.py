"""Each request frame is declared once, by ``@frame`` on its handler (issue 28 item 3), and
what is derived from the declarations stays in step with them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from vancetope_brain.models.base import Wire
from vancetope_gateway import frames, handlers
from vancetope_gateway.handlers import declare
from vancetope_gateway.handlers.declare import Context, Empty, Frame, frame
from vancetope_gateway.protocol import Connection

ROOT = Path(__file__).resolve().parents[2]


class Echoed(Wire):
    """A reply for the test's frame."""

    said: str


def test_the_decorator_takes_the_models_from_the_handlers_signature(monkeypatch):
    monkeypatch.setattr(declare, "FRAMES", {})

    @frame("echo", starts_events=True)
    def echo(conn: Context, data: Empty) -> Echoed:
        return Echoed(said="")

    assert {"echo": Frame("echo", Empty, Echoed, echo, starts_events=True)} == declare.FRAMES


def test_a_frame_type_declared_twice_is_refused_at_import():
    def ping_again(conn: Context, data: Empty) -> Echoed:
        return Echoed(said="pong")

    with pytest.raises(ValueError, match="'ping' is declared twice"):
        frame("ping")(ping_again)
    assert handlers.FRAMES["ping"].handler is not ping_again


def test_the_tables_and_the_dispatch_are_the_declarations():
    assert {name: f.request for name, f in handlers.FRAMES.items()} == frames.REQUESTS
    assert {name: f.reply for name, f in handlers.FRAMES.items()} == frames.REPLIES
    assert Connection._handlers is handlers.FRAMES
    assert {n for n, f in handlers.FRAMES.items() if f.starts_events} == \
        {"session-create", "session-resume", "events-resume"}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_handlers_reach_the_connection_only_through_its_context():
    """The frames and the connection import the handlers, never the other way round."""
    for path in sorted((ROOT / "vancetope_gateway" / "handlers").glob("*.py")):
        back = {name for name in _imports(path)
                if name in {"vancetope_gateway.protocol", "vancetope_gateway.frames"}}
        assert not back, f"{path.name} imports {back}"


def _keys(ts: str, interface: str) -> set[str]:
    body = re.search(rf"export interface {interface} \{{(.*?)\n\}}", ts, re.S)
    assert body, f"protocol.gen.ts has no interface {interface}"
    return set(re.findall(r'^\s+"?([a-z-]+)"?: ', body.group(1), re.M))


def test_the_web_clients_generated_types_name_every_frame():
    """webclient/src/protocol.gen.ts is `npm run types` of docs/schemas/ (.ci/run checks the
    bytes with Node.js); this holds its frame maps to the declarations without it."""
    ts = (ROOT / "webclient" / "src" / "protocol.gen.ts").read_text()
    assert _keys(ts, "Requests") == set(frames.REQUESTS), "run `npm run types` in webclient/"
    assert _keys(ts, "Replies") == set(frames.REPLIES), "run `npm run types` in webclient/"
    assert _keys(ts, "Pushes") == set(frames.PUSHES), "run `npm run types` in webclient/"
