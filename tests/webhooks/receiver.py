"""A real HTTP receiver of webhooks on loopback, for the tests: it records every POST and
answers what the test scripts (a status code, a redirect, a huge body)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    path: str


@dataclass
class Receiver:
    port: int
    status: int = 204
    location: str | None = None
    reply_bytes: int = 0
    hold_first: threading.Event | None = None
    """Set: the first POST gets no answer until this event is set (a sender dies meanwhile)."""
    posts: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def wait(self, count: int, timeout: float = 20.0) -> list[Received]:
        """The posts once ``count`` have arrived (``TimeoutError`` naming how many did)."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.posts) >= count, timeout):
                raise TimeoutError(f"{len(self.posts)} of {count} webhook posts arrived")
            return list(self.posts)

    def verified(self, secret: str, post: Received) -> dict[str, object]:
        """The post's payload, its signature checked by the Standard Webhooks library."""
        payload = Webhook(secret).verify(post.body, post.headers)
        assert isinstance(payload, dict)
        return payload


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            with receiver.arrived:
                receiver.posts.append(Received(
                    {k.lower(): v for k, v in self.headers.items()}, body, self.path))
                first = len(receiver.posts) == 1
                receiver.arrived.notify_all()
            if first and receiver.hold_first is not None:
                receiver.hold_first.wait(60)
            self.send_response(receiver.status)
            if receiver.location:
                self.send_header("location", receiver.location)
            self.send_header("content-length", str(receiver.reply_bytes))
            self.end_headers()
            sent = 0
            while sent < receiver.reply_bytes:
                chunk = min(65536, receiver.reply_bytes - sent)
                try:
                    self.wfile.write(b"x" * chunk)
                except OSError:  # the sender stopped reading at its cap
                    return
                sent += chunk

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
