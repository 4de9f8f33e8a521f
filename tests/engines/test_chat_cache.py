"""The worker's chat cache: a turn's page reads give exactly what the store gives, while the
store is read only for the lines committed since (and what lies beyond the lines held), and
no more than ``max_lines`` lines are held."""

from __future__ import annotations

import random
import threading

from vancetope_brain.engines.chat_cache import CATCH_UP, SYNC_PAGE, ChatCache
from vancetope_brain.models import ChatMessage, ChatRole


class Chats:
    """``LaneStore.chat_history`` over lists, counting the lines it hands out."""

    def __init__(self) -> None:
        self.lines: dict[str, list[ChatMessage]] = {}
        self.read = 0

    def commit(self, process_id: str, n: int) -> None:
        lines = self.lines.setdefault(process_id, [])
        for _ in range(n):
            seq = len(lines) + 1
            lines.append(ChatMessage(id=f"chat_{process_id}_{seq}", tenant_id="t",
                                     session_id="s", process_id=process_id, seq=seq,
                                     role=ChatRole.USER, content=f"line {seq}"))

    def chat_history(self, tenant_id: str, process_id: str, *, before_seq: int | None = None,
                     limit: int = 100) -> list[ChatMessage]:
        assert tenant_id == "t"
        older = [m for m in self.lines.get(process_id, [])
                 if before_seq is None or m.seq < before_seq]
        page = older[-limit:] if limit else []
        self.read += len(page)
        return page


def pages(read, page: int) -> list[list[int]]:
    """Every page a history reader asks for, newest first (as ``ChatApi.history`` does)."""
    out, before = [], None
    while True:
        older = read(before, page)
        out.append([m.seq for m in older])
        if len(older) < page:
            return out
        before = older[0].seq


def test_each_turn_reads_what_the_store_holds_but_only_new_lines_from_it():
    chats = Chats()
    cache = ChatCache(chats, max_lines=10_000)  # type: ignore[arg-type]
    chats.commit("p", 1000)
    assert pages(cache.reader("t", "p"), 200) == pages(_store_reader(chats, "p"), 200)
    for committed in (3, 0, 15, 17, 150, CATCH_UP + 5):
        chats.commit("p", committed)
        chats.read = 0
        got, read = pages(cache.reader("t", "p"), 200), chats.read
        assert got == pages(_store_reader(chats, "p"), 200)
        if committed < CATCH_UP:
            # The lines committed since, and the page they were found in: nothing older.
            assert read <= 2 * committed + SYNC_PAGE, (committed, read)


def test_reading_past_the_oldest_line_held_reads_and_holds_it():
    chats = Chats()
    cache = ChatCache(chats, max_lines=10_000)  # type: ignore[arg-type]
    chats.commit("p", 500)
    first = cache.reader("t", "p")
    assert [m.seq for m in first(None, 50)] == list(range(451, 501))  # a budget's worth
    expected = pages(_store_reader(chats, "p"), 100)
    chats.read = 0
    assert pages(cache.reader("t", "p"), 100) == expected
    # The 450 older lines, once (the newest 50 were held), and the page that found nothing new.
    assert chats.read == 450 + SYNC_PAGE
    chats.read = 0
    assert pages(cache.reader("t", "p"), 100) == expected
    assert chats.read == SYNC_PAGE


def test_no_more_than_max_lines_are_held_the_least_recently_read_go_first():
    chats = Chats()
    cache = ChatCache(chats, max_lines=250)  # type: ignore[arg-type]
    for pid in ("a", "b", "c"):
        chats.commit(pid, 100)
        pages(cache.reader("t", pid), 100)
    assert cache._count <= 250
    chats.read = 0
    pages(cache.reader("t", "c"), 100)  # held
    assert chats.read == SYNC_PAGE
    chats.read = 0
    pages(cache.reader("t", "a"), 100)  # dropped first: read again
    assert chats.read == 100 and cache._count <= 250


def test_concurrent_turns_of_many_processes_each_read_their_own_chat():
    chats = Chats()
    cache = ChatCache(chats, max_lines=3_000)  # type: ignore[arg-type]
    processes = [f"p{i}" for i in range(20)]
    for pid in processes:
        chats.commit(pid, random.randrange(1, 400))
    lock = threading.Lock()
    failures: list[str] = []

    def turns(pid: str) -> None:
        for _ in range(20):
            with lock:
                chats.commit(pid, random.randrange(0, 30))
                want = pages(_store_reader(chats, pid), 64)
            if pages(cache.reader("t", pid), 64) != want:
                failures.append(pid)

    threads = [threading.Thread(target=turns, args=(pid,)) for pid in processes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [] and cache._count <= 3_000


def _store_reader(chats: Chats, process_id: str):
    return lambda before, limit: chats.chat_history("t", process_id, before_seq=before,
                                                    limit=limit)


def test_any_page_read_gives_what_the_store_gives():
    """Pages of any size, before any line (held or not, past either end), in any order."""
    rng = random.Random(16)
    chats = Chats()
    cache = ChatCache(chats, max_lines=10_000)  # type: ignore[arg-type]
    store = _store_reader(chats, "p")
    for _ in range(40):
        chats.commit("p", rng.choice((0, 1, 3, 40, 250)))
        read = cache.reader("t", "p")
        newest = len(chats.lines.get("p", []))
        for _ in range(10):
            before = rng.choice((None, rng.randint(1, newest + 2)))
            limit = rng.choice((0, 1, 7, 200, 1000))
            assert [m.seq for m in read(before, limit)] == \
                [m.seq for m in store(before, limit)], (newest, before, limit)
