"""SqliteBackend across OS processes and threads.

Concurrent appends from four processes to one inbox get seqs 1..N exactly
once; a thread's connection goes to the next thread when it ends (none leaks).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path

import pytest

import vancetope_brain.store.sqlite as sqlite_backend
from vancetope_brain.models import InboxMessage, ThinkProcess, UserChatInput
from vancetope_brain.store import LaneStore, SessionStore
from vancetope_brain.store.sqlite import SqliteBackend
from vancetope_brain.store.sqlite._db import connect

WORKERS = 4
APPENDS = 50


def _append_many(path: str, process_id: str, worker: int) -> None:
    """Runs in a spawned child: its own SqliteBackend on the shared file."""
    store = SqliteBackend(path)
    try:
        for i in range(APPENDS):
            store.port(LaneStore).append_message(InboxMessage(
                id=f"msg_{worker}_{i}", tenant_id="ten_1", target_process_id=process_id,
                message=UserChatInput(from_user="usr_1", content=f"{worker}:{i}"),
            ))
    finally:
        store.close()


def test_concurrent_appends_from_four_processes_get_distinct_consecutive_seqs(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "vancetope.db")
    store = SqliteBackend(path)
    store.port(SessionStore).create_process(ThinkProcess(id="proc_1", tenant_id="ten_1", session_id="ses_1",
                                      user_id="usr_1", name="main", engine="echo",
                                      engine_version="1"))
    ctx = multiprocessing.get_context("spawn")
    children = [ctx.Process(target=_append_many, args=(path, "proc_1", w)) for w in range(WORKERS)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=60)
        if child.is_alive():  # never leave a stuck child behind a failing test
            child.kill()
            child.join()
    assert [child.exitcode for child in children] == [0] * WORKERS

    pending = store.port(LaneStore).pending_messages("ten_1", "proc_1")
    assert [m.seq for m in pending] == list(range(1, WORKERS * APPENDS + 1))
    assert len({m.id for m in pending}) == WORKERS * APPENDS
    for worker in range(WORKERS):  # each child's own appends kept their order
        mine = [int(m.id.rsplit("_", 1)[1]) for m in pending if m.id.startswith(f"msg_{worker}_")]
        assert mine == list(range(APPENDS))
    assert store.port(SessionStore).get_process("ten_1", "proc_1").next_seq == WORKERS * APPENDS
    store.close()


def test_thread_connections_do_not_leak_when_their_threads_end(tmp_path: Path) -> None:
    store = SqliteBackend(tmp_path / "vancetope.db")
    store.port(SessionStore).create_process(ThinkProcess(id="proc_1", tenant_id="ten_1", session_id="ses_1",
                                      user_id="usr_1", name="main", engine="echo",
                                      engine_version="1"))
    seqs: list[int] = []

    def append(worker: int) -> None:
        stored, _ = store.port(LaneStore).append_message(InboxMessage(
            id=f"msg_{worker}", tenant_id="ten_1", target_process_id="proc_1",
            message=UserChatInput(from_user="usr_1", content="hi"),
        ))
        seqs.append(stored.seq)

    def round_of_threads(first: int) -> int:
        threads = [threading.Thread(target=append, args=(first + w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return len(os.listdir("/proc/self/fd"))

    # SQLite parks some closed descriptors for reuse while the file is locked
    # elsewhere in the process, so the count wobbles a little; a leak would add
    # two descriptors (db, wal) per thread, i.e. 16 per round.
    after_first = round_of_threads(0)
    after_last = [round_of_threads(8 * r) for r in range(1, 5)][-1]
    assert after_last - after_first < 8
    assert sorted(seqs) == list(range(1, 41))
    store.close()


def test_a_thread_that_ends_hands_its_connection_to_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A gevent worker runs every task in a greenlet of its own: a connection per thread that
    # was opened and closed each time would cost milliseconds per task.
    store = SqliteBackend(tmp_path / "vancetope.db")
    opened: list[object] = []

    def counting_connect(path: Path) -> object:
        opened.append(path)
        return connect(path)

    monkeypatch.setattr(sqlite_backend, "connect", counting_connect)
    for _ in range(5):
        thread = threading.Thread(target=store.ping)
        thread.start()
        thread.join()
    assert len(opened) == 1
    store.close()
