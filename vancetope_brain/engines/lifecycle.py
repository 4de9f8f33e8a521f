"""Which lifecycle call is legal in which status (think-engines.txt §3, §5).

``start`` runs only in INIT and only by the runtime; every other call is refused in
INIT (§5: "only engine.start() is allowed in INIT status; all other lifecycle calls
in INIT → 409"). Messages are not lifecycle calls: they may be *queued* in INIT,
PAUSED and SUSPENDED (they wait; an INIT process gets them in its first ``steer``
after ``start``); only CLOSED refuses them. The control calls below are requested by
clients or the system and executed on the process's lane. ``reset`` discards the
engine state and starts the process afresh (its chat stays, as the record).
"""

from __future__ import annotations

from enum import StrEnum

from vancetope_brain.errors import Conflict
from vancetope_brain.models.process import ProcessStatus as S


class LifecycleCall(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    SUSPEND = "suspend"
    STOP = "stop"
    RESET = "reset"


ALLOWED_FROM: dict[LifecycleCall, frozenset[S]] = {
    LifecycleCall.PAUSE: frozenset({S.IDLE, S.BLOCKED, S.RUNNING}),
    LifecycleCall.RESUME: frozenset({S.PAUSED, S.SUSPENDED}),
    LifecycleCall.SUSPEND: frozenset({S.IDLE, S.BLOCKED, S.RUNNING, S.PAUSED}),
    LifecycleCall.STOP: frozenset({S.IDLE, S.BLOCKED, S.RUNNING, S.PAUSED, S.SUSPENDED}),
    LifecycleCall.RESET: frozenset({S.IDLE, S.BLOCKED, S.RUNNING, S.PAUSED, S.SUSPENDED}),
}
"""What a client (or an engine's tool) may request."""

SYSTEM_ALLOWED_FROM: dict[LifecycleCall, frozenset[S]] = {
    **ALLOWED_FROM,
    LifecycleCall.SUSPEND: ALLOWED_FROM[LifecycleCall.SUSPEND] | {S.INIT},
    LifecycleCall.STOP: ALLOWED_FROM[LifecycleCall.STOP] | {S.INIT},
}
"""What the system's own cascades may request: a session's suspend and close (§5, §6)
and a stopped process's subtree reach processes that have not started too. On the lane
these change an INIT process's status without calling its engine (SUSPENDED, to start
when resumed; CLOSED/STOPPED), since no engine method but ``start`` runs in INIT."""

STATUS_AFTER: dict[LifecycleCall, S] = {
    LifecycleCall.PAUSE: S.PAUSED,
    LifecycleCall.RESUME: S.IDLE,
    LifecycleCall.SUSPEND: S.SUSPENDED,
    LifecycleCall.STOP: S.CLOSED,
    LifecycleCall.RESET: S.INIT,
}


def check(call: LifecycleCall, status: S,
          allowed: dict[LifecycleCall, frozenset[S]] = ALLOWED_FROM) -> None:
    """Raise ``Conflict`` if ``call`` is illegal in ``status``, naming the legal ones."""
    if status in allowed[call]:
        return
    legal = ", ".join(sorted(s.value for s in allowed[call]))
    why = " (it has not started yet: only start runs in INIT)" if status is S.INIT else ""
    raise Conflict(f"cannot {call.value} a process that is {status.value}{why} "
                   f"(allowed from {legal})")
