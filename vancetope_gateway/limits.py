"""Caps on the WebSocket connections one client may hold, checked before the upgrade.

Per user across the cluster: a connection counts in the user's presence set in Redis
(``Presence.user_admit``), which every gateway renews for its live connections, so a
gateway that dies frees its users' slots within ``VANCETOPE_PRESENCE_TTL``. Per client
address on this gateway process: an in-memory count. Behind a proxy every client has the
proxy's address unless the app is wrapped in werkzeug's ``ProxyFix``; raise
``VANCETOPE_MAX_CONNECTIONS_PER_IP`` there instead (docs/protocol.md "Limits").
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from vancetope_brain.errors import LimitExceeded
from vancetope_brain.events.presence import Presence
from vancetope_brain.identity import Principal


@dataclass(frozen=True)
class Slot:
    """One admitted connection: what ``ConnectionSlots.give_back`` needs to free it."""

    who: Principal
    address: str
    connection_id: str
    notify_mode: str


class ConnectionSlots:
    """``take`` a slot before the upgrade and ``give_back`` it when the request ends, however
    it ends (the socket's normal close, an abnormal one, or a handshake that failed)."""

    def __init__(self, presence: Presence, *, per_user: int, per_address: int) -> None:
        self._presence = presence
        self._per_user = per_user
        self._per_address = per_address
        self._by_address: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self, who: Principal, address: str, connection_id: str, notify_mode: str) -> Slot:
        """Count the connection, or raise ``LimitExceeded`` having counted nothing."""
        with self._lock:
            if self._by_address[address] >= self._per_address:
                raise LimitExceeded(f"{self._per_address} connections from {address} are "
                                    f"open on this gateway; close one first")
            self._by_address[address] += 1
        slot = Slot(who, address, connection_id, notify_mode)
        try:
            admitted = self._presence.user_admit(who.tenant_id, who.user_id, connection_id,
                                                 notify_mode, self._per_user)
        except BaseException:
            self._free_address(address)
            raise
        if not admitted:
            self._free_address(address)
            raise LimitExceeded(f"you have {self._per_user} connections open; close one first")
        return slot

    def held(self, address: str) -> int:
        """Connections from ``address`` open on this gateway process now."""
        with self._lock:
            return self._by_address[address]

    def give_back(self, slot: Slot) -> None:
        """Free the slot (the connection's own release may have left presence already)."""
        self._free_address(slot.address)
        self._presence.user_disconnect(slot.who.tenant_id, slot.who.user_id,
                                       slot.connection_id, slot.notify_mode)

    def _free_address(self, address: str) -> None:
        with self._lock:
            self._by_address[address] -= 1
            if self._by_address[address] <= 0:
                del self._by_address[address]
