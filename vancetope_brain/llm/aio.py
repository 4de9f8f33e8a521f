"""One asyncio event loop per OS process, on a thread of its own, that streams the model calls.

A turn thread that read its completion's stream itself would wake for every token (a socket
read, the GIL taken back): with hundreds of turns in flight per worker process that is most
of a token's CPU (benchmarks/README.md, issue 31). Instead ``run`` hands the call to this
loop, where one thread reads every turn's stream, and the turn thread sleeps once, on the
call's future, until the completion is done. The call's ``on_token`` therefore runs on the
loop's thread: it must be quick and must not block (the worker's ``TokenStream.put`` queues
the token for the coalescer; a sink that waits holds up every stream of the process).

The loop starts with the first call. A child forked from a process whose loop runs starts
its own with its first call (the thread did not survive the fork; Celery's prefork pool
forks its children before any call, a threads pool never forks). In a process whose
threads gevent patched (``--pool gevent``) there is no OS thread for a loop, and callers
stream on their own greenlet instead (``available``).

Cancellation: if the waiting thread is interrupted (an exception raised in it while it
waits, such as a time limit), the call's task is cancelled on the loop, which closes its
stream; an exception raised by ``on_token`` (a lost lease's ``Fenced``) ends the call the
same way and reaches the waiting thread unchanged.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _Loop:
    """The process's loop, its thread, and what calls keep on it (``shared``)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.shared: dict[object, Any] = {}
        self.thread = threading.Thread(target=self._run, name="vt-llm-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()


_lock = threading.Lock()
_current: _Loop | None = None


def _forget_after_fork() -> None:
    """In a forked child: the parent's loop thread is gone; the first call starts another."""
    global _lock, _current
    _lock = threading.Lock()
    _current = None


os.register_at_fork(after_in_child=_forget_after_fork)


def available() -> bool:
    """Whether calls can go to the loop: not in a process whose threads gevent patched."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is None or not monkey.is_module_patched("threading")


def _get() -> _Loop:
    global _current
    with _lock:
        if _current is None:
            _current = _Loop()
        return _current


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on the process's loop and return its result (or raise its
    exception), blocking the calling thread until then. Not from the loop's own thread."""
    state = _get()
    if threading.current_thread() is state.thread:
        coroutine.close()
        raise RuntimeError("aio.run called on the model loop's own thread")
    future = asyncio.run_coroutine_threadsafe(coroutine, state.loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()  # an interrupted wait: stop the call (a no-op when it is done)
        raise


def shared(key: object, make: Callable[[], T]) -> T:
    """The object kept under ``key`` on the running loop, made by ``make`` the first time
    (such as a client and its connection pool, shared by the calls of this process). Only
    on the loop's thread, from a coroutine that ``run`` runs."""
    state = _current
    if state is None or threading.current_thread() is not state.thread:
        raise RuntimeError("aio.shared is for coroutines on the model loop")
    if key not in state.shared:
        state.shared[key] = make()
    return state.shared[key]  # type: ignore[no-any-return]
