"""Stream events: the live overlay of a session (ARCHITECTURE §5).

Rule: events are hints for live clients; the chat log in the store is the
record. Each event gets a per-session sequence number and lands in a capped
Redis Stream so a client reconnecting to any gateway can catch up. What a turn
commits (chat lines, its status) is published from the store's event outbox
(``outbox.py``), so it reaches the stream even if its worker dies; a follower
that misses events anyway gets an explicit ``Gap``.

The other Redis bookkeeping of who is listening lives here too: ``presence.py``, which
sessions and users have a client connected (import it directly; it needs only ``keys``).
"""

from vancetope_brain.events.bus import EventBus, EventListener, Gap, LiveEvent
from vancetope_brain.events.model import EventType, StreamEvent
from vancetope_brain.events.outbox import EventOutbox

__all__ = ["EventBus", "EventListener", "EventOutbox", "EventType", "Gap", "LiveEvent",
           "StreamEvent"]
