"""Stream events: the live overlay of a session (ARCHITECTURE §5).

Rule: events are hints for live clients; the chat log in the store is the
record. Each event gets a per-session sequence number and lands in a capped
Redis Stream so a client reconnecting to any gateway can catch up.
"""

from vancetope_brain.events.bus import EventBus, EventListener
from vancetope_brain.events.model import EventType, StreamEvent

__all__ = ["EventBus", "EventListener", "EventType", "StreamEvent"]
