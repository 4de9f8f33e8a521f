"""The one module that knows simple-websocket's and flask-sock's insides.

The gateway lets flask-sock mount ``/ws`` and simple-websocket answer the handshake, then
takes the socket away from them (``hub.py`` reads, writes and pings it); every Python
client of the gateway is simple-websocket's ``Client`` with two fixes. What that relies
on, beyond their documented API — each pinned against the installed versions by
``tests/gateway/test_socket_adapter.py``, so an upgrade that changes it fails there:

- ``simple_websocket.Base.__init__`` makes its reader thread as
  ``thread_class(target=…)``, renames it and calls ``start()``; flask-sock passes
  ``SOCK_SERVER_OPTIONS`` to ``Server`` as keywords. ``NoThread`` is never started.
- ``Server.choose_subprotocol`` selects the first subprotocol the client offered that is
  listed in ``subprotocols``.
- A ``Server`` holds the upgraded socket in ``sock``, its wsproto connection (open,
  handshake done, nothing buffered) in ``ws``, and the WSGI server it came from in
  ``mode`` (``"werkzeug"``, ``"gunicorn"``).
- flask-sock calls ``ws.close()`` once the route returns; with ``connected`` False that
  raises ``ConnectionClosed``, which flask-sock swallows: no close frame of its own.
- ``Client.handshake`` leaves frames that came in the read of the 101 response in
  wsproto's buffer (``_handle_events`` takes them); a refused connect leaves the socket
  open, as a local ``sock`` of a frame of the ``OSError``'s traceback.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from simple_websocket import Client, Server
from wsproto import WSConnection

__all__ = ["NoThread", "Upgraded", "WebSocketClient", "close_unconnected", "hand_off",
           "server_options"]


class NoThread:
    """simple-websocket's reader thread, never started: the hub reads the socket."""

    name = "vt-hub-handoff"

    def __init__(self, target: Any = None, **_: Any) -> None:
        pass

    def start(self) -> None:
        pass


def server_options(subprotocols: list[str]) -> dict[str, Any]:
    """flask-sock's ``SOCK_SERVER_OPTIONS``: answer the handshake selecting the first of
    the client's offers that is in ``subprotocols`` (so a ``bearer.<token>`` offered beside
    one of them is never echoed), and start no reader thread."""
    return {"subprotocols": subprotocols, "thread_class": NoThread}


@dataclass(frozen=True)
class Upgraded:
    """A socket simple-websocket upgraded and let go of."""

    sock: socket.socket
    ws: WSConnection
    """wsproto's server side of it, open."""
    owned: bool
    """Whoever takes it closes it (gunicorn: ``GatewayWorker`` leaves it open); else the
    WSGI server does once the route returns (werkzeug)."""


def hand_off(server: Server) -> Upgraded:
    """Take the socket of flask-sock's ``ws`` (made with ``server_options``): from now on
    neither library reads, writes or closes it."""
    server.connected = False  # flask-sock's close after the route sends no close frame
    return Upgraded(server.sock, server.ws, owned=server.mode == "gunicorn")


class WebSocketClient(Client):
    """simple-websocket's client, closing its socket when the handshake is refused, and
    handling frames that arrived in the same read as the 101 response (simple-websocket
    1.1 leaves them buffered until the next read returns — the server's ping, 25 s later;
    the gateway greets a client as soon as it is upgraded, so on a busy machine the
    welcome often comes in that read). Every Python client of the gateway uses this one.
    """

    def handshake(self) -> None:
        try:
            super().handshake()
        except BaseException:
            self.sock.close()
            raise
        self.connected = self._handle_events()


def close_unconnected(error: OSError) -> int:
    """simple-websocket 1.1 leaves the socket of a refused connect open (a ResourceWarning
    each reconnect attempt): close it, found in the frame that made it; returns how many
    sockets it closed."""
    closed = 0
    tb = error.__traceback__
    while tb is not None:
        sock = tb.tb_frame.f_locals.get("sock")
        if isinstance(sock, socket.socket):
            sock.close()
            closed += 1
        tb = tb.tb_next
    return closed
