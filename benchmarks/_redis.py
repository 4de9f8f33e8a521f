"""The Redis database of one benchmark run, claimed like a test run's (tests/redis_claim.py).

A benchmark flushes its database at start and at the end, so it must never use one that a
test run or another benchmark holds: by default it claims a free database among 1..15 of
127.0.0.1:6379; ``--redis-url`` pins one (refused if another run holds it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

# Appended, not put first: a benchmark's ``--source DIR``, put first, imports its own product
# code through ``tests.redis_claim`` too.
sys.path.append(str(Path(__file__).resolve().parent.parent))
from tests.redis_claim import RunDatabase  # noqa: E402


def check_url(url: str | None) -> str | None:
    """The error message for a ``--redis-url`` that is not a loopback ``redis://`` URL."""
    if url is None:
        return None
    parsed = urlparse(url)
    if parsed.scheme != "redis" or parsed.hostname not in ("127.0.0.1", "localhost"):
        return "--redis-url must be redis://127.0.0.1:PORT/DB (loopback only)"
    return None


_CLAIMED: dict[str, RunDatabase] = {}


@contextmanager
def claimed_db(pinned: str | None) -> Iterator[str]:
    """Claim ``pinned`` or a free database; yield its URL; flush and release it at the end."""
    db = RunDatabase.claim(pinned)
    _CLAIMED[db.url] = db
    try:
        yield db.url
    finally:
        _CLAIMED.pop(db.url, None)
        db.release()


def reset(url: str) -> None:
    """Empty the database this process claimed at ``url``, keeping the claim (a plain
    FLUSHDB would drop the claim key too, and the database would look free to others)."""
    _CLAIMED[url].reset()
