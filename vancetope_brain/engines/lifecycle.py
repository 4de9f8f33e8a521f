"""Which lifecycle call is legal in which status (think-engines.txt §3, §5).

``start`` runs only in INIT and only by the runtime. Messages may be *queued*
in INIT, PAUSED and SUSPENDED (they wait); only CLOSED refuses them. The
control calls below are requested by clients or the system and executed on
the process's lane. ``reset`` discards the engine state and starts the process
afresh (its chat stays, as the record).
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
    LifecycleCall.SUSPEND: frozenset({S.INIT, S.IDLE, S.BLOCKED, S.RUNNING, S.PAUSED}),
    LifecycleCall.STOP: frozenset({S.INIT, S.IDLE, S.BLOCKED, S.RUNNING, S.PAUSED, S.SUSPENDED}),
    LifecycleCall.RESET: frozenset({S.IDLE, S.BLOCKED, S.RUNNING, S.PAUSED, S.SUSPENDED}),
}

STATUS_AFTER: dict[LifecycleCall, S] = {
    LifecycleCall.PAUSE: S.PAUSED,
    LifecycleCall.RESUME: S.IDLE,
    LifecycleCall.SUSPEND: S.SUSPENDED,
    LifecycleCall.STOP: S.CLOSED,
    LifecycleCall.RESET: S.INIT,
}


def check(call: LifecycleCall, status: S) -> None:
    """Raise ``Conflict`` if ``call`` is illegal in ``status``, naming the legal ones."""
    if status not in ALLOWED_FROM[call]:
        legal = ", ".join(sorted(s.value for s in ALLOWED_FROM[call]))
        raise Conflict(f"cannot {call.value} a process that is {status.value} "
                       f"(allowed from {legal})")
