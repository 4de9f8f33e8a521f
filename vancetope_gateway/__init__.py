"""The gateway: its composition root (``parts``), Flask app factory, REST blueprints, the
WebSocket protocol, the CLI.

Rule: thin. A request is authenticated, validated into a frame model,
handed to a brain service and answered; the gateway holds no domain state
beyond its open sockets and imports no store module (services only). The WebSocket protocol is a plain class
(``protocol.Connection``) that takes any object with ``receive``/``send``/``close``/
``abort``; each connection sends through its own queue and writer thread (``outbound``).
What each request frame does is its handler's, declared once with it (``handlers``).
"""
