"""The protocol's request frames, one module per area, each frame declared once by the
``@frame`` decorator on its handler (``declare``): its name, request and reply models come
with the handler. ``FRAMES`` is the table of them all; ``frames.REQUESTS`` / ``REPLIES``,
``docs/schemas/``, ``docs/protocol.md``'s frame list and the web client's
``protocol.gen.ts`` are derived from it.

A handler gets the ``Context`` of the connection serving the frame and its validated data,
and returns the reply's model; it calls brain services through ``conn.gateway``. Rule: no
handler keeps state of its own or touches the socket; what a connection holds (its bound
session, its events, its tool calls) changes only through ``Context``. Nothing here imports
``protocol`` or ``frames``.
"""

from __future__ import annotations

from vancetope_gateway.handlers.declare import FRAMES, Context, Frame

# Imported for their declarations, in the order the frame list shows them.
# isort: off
from vancetope_gateway.handlers import sessions, processes, tools, recipes, inbox, documents, usage, inspector, webhooks, schedules  # noqa: F401,E501
# isort: on

__all__ = ["FRAMES", "Context", "Frame"]
