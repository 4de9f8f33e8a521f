"""Lane turns: the serialized execution of one process (ARCHITECTURE §3).

Rule: the store is the truth, Redis gives speed, broker messages are hints.
Nothing here knows Celery: the broker is reached through the ``enqueue``
callable that ``workers/`` hands to ``Waker``.
"""

from vancetope_brain.lanes.lease import LeaseKeeper
from vancetope_brain.lanes.runner import LaneRunner, TurnOutcome
from vancetope_brain.lanes.waker import Waker, shard_for

__all__ = ["LaneRunner", "LeaseKeeper", "TurnOutcome", "Waker", "shard_for"]
