"""Revocation on sockets already open: the upgrade checks the token once, and a socket can
live for days, so each gateway process keeps re-reading the tokens of its open sockets.

``vancetope admin token revoke`` is another OS process writing the store, and in the
embedded shape Redis is in-process, so no notice could reach the gateway: the store, which
both shapes share, is where a gateway looks.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from vancetope_brain.errors import StoreError
from vancetope_brain.identity import IdentityService

if TYPE_CHECKING:
    from vancetope_gateway.protocol import Connection

log = logging.getLogger(__name__)


class TokenWatch:
    """The tokens of one gateway process's open sockets, and whether each still holds.

    ``valid`` (on every frame, from the socket's reader thread) answers from an answer
    at most ``interval`` seconds old; a background thread re-reads every watched token
    each ``interval`` seconds and closes the sockets of a revoked one. So a revoked token
    stops working on an open socket within ``interval`` seconds (plus one round of
    reads), and the store sees one indexed read per distinct open token per interval —
    however many sockets and frames: 1,000 idle sockets of one user are one read per
    round, of 1,000 users 1,000 reads. A re-read the store fails keeps the last answer
    (the frame itself meets the failing store) and is tried again next time.
    """

    def __init__(self, identity: IdentityService, interval: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._identity = identity
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._sockets: weakref.WeakKeyDictionary[Connection, str] = weakref.WeakKeyDictionary()
        self._answers: dict[str, tuple[float, bool]] = {}  # token hash → (read at, valid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vt-token-watch", daemon=True)
        self._thread.start()

    def watch(self, connection: Connection, token_hash: str) -> None:
        """Watch an open socket whose token was checked just now (at the upgrade)."""
        with self._lock:
            self._sockets[connection] = token_hash
            self._answers.setdefault(token_hash, (self._clock(), True))

    def forget(self, connection: Connection) -> None:
        with self._lock:
            self._sockets.pop(connection, None)

    def valid(self, token_hash: str) -> bool:
        """Whether the token still authenticates, as of at most ``interval`` seconds ago."""
        with self._lock:
            answer = self._answers.get(token_hash)
        if answer is not None and self._clock() - answer[0] < self._interval:
            return answer[1]
        return self._read(token_hash, answer)

    def sweep(self) -> None:
        """Re-read every watched token; close the sockets of the revoked ones (1008)."""
        with self._lock:
            sockets = list(self._sockets.items())
            by_token: dict[str, list[Connection]] = {}
            for connection, token_hash in sockets:
                by_token.setdefault(token_hash, []).append(connection)
            self._answers = {h: a for h, a in self._answers.items() if h in by_token}
        for token_hash, connections in by_token.items():
            with self._lock:
                answer = self._answers.get(token_hash)
            if not self._read(token_hash, answer):
                for connection in connections:
                    connection.revoked()

    def _read(self, token_hash: str, previous: tuple[float, bool] | None) -> bool:
        try:
            valid = self._identity.holder(token_hash) is not None
        except StoreError as e:
            log.warning("re-checking a token failed (%s); keeping the last answer", e)
            return previous[1] if previous is not None else True
        with self._lock:
            self._answers[token_hash] = (self._clock(), valid)
        return valid

    def close(self, timeout: float = 5.0) -> None:
        """Stop re-reading (a round under way finishes first, within ``timeout``)."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.sweep()
            except Exception:
                log.exception("re-checking open sockets' tokens failed; retrying next round")
