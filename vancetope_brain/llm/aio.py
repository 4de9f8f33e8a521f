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

Interruption (a user's Stop, ``process-interrupt``): a call runs on behalf of an *owner*
(``owned``: the turn's ``tenant/process/epoch``, set by the turn's thread around the call);
``interrupt(owner)`` — called by the worker's interrupt listener, from any thread — cancels
that owner's running calls, whose streams close at once, and their waiting threads get
``Interrupted`` instead of a result. What the call had streamed by then is the caller's to
keep (``OpenAiChatModel`` puts it in ``Interrupted.said``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from vancetope_brain.errors import Interrupted

T = TypeVar("T")


_owner: contextvars.ContextVar[str | None] = contextvars.ContextVar("vt_llm_owner",
                                                                     default=None)
_calls_lock = threading.Lock()
_running: dict[str, set[concurrent.futures.Future[Any]]] = {}
_cut: set[str] = set()
"""Owners interrupted while a call of theirs ran; cleared when their calls are done."""


@contextmanager
def owned(owner: str) -> Iterator[None]:
    """Calls ``run`` makes on this thread inside the block belong to ``owner`` (what
    ``interrupt`` names)."""
    token = _owner.set(owner)
    try:
        yield
    finally:
        _owner.reset(token)


def interrupt(owner: str) -> int:
    """Cancel the running calls of ``owner`` (their streams close; their waiting threads get
    ``Interrupted``); from any thread. Returns how many were cut."""
    with _calls_lock:
        futures = list(_running.get(owner, ()))
        if futures:
            _cut.add(owner)
    for future in futures:
        future.cancel()
    return len(futures)


def is_cut(owner: str) -> bool:
    """Whether ``owner``'s running call was interrupted (a sink drops what still comes)."""
    return owner in _cut


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
    global _lock, _current, _calls_lock
    _lock = threading.Lock()
    _current = None
    _calls_lock = threading.Lock()
    _running.clear()
    _cut.clear()


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
    owner = _owner.get()
    if owner is not None:
        with _calls_lock:
            _running.setdefault(owner, set()).add(future)
    try:
        return future.result()
    except concurrent.futures.CancelledError:
        if owner is not None and owner in _cut:
            raise Interrupted() from None
        raise
    except BaseException:
        future.cancel()  # an interrupted wait: stop the call (a no-op when it is done)
        raise
    finally:
        if owner is not None:
            with _calls_lock:
                calls = _running.get(owner)
                if calls is not None:
                    calls.discard(future)
                    if not calls:
                        del _running[owner]
                        _cut.discard(owner)


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
