"""PDFs: pages and outline sections, hostile files refused within their bounds by the
child process that reads them, and the warm reader process that forks those children."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.knowledge.pdfs import bomb_pdf, rewritten, text_pdf
from vancetope_brain.errors import UnreadableDocument
from vancetope_brain.knowledge import pdf
from vancetope_brain.knowledge.parsing import parse
from vancetope_brain.models.knowledge import DocumentFormat as F

BOOK = text_pdf([["Preface text", "(with brackets)"], ["Chapter one starts"],
                 ["Still chapter one, part B"], ["Appendix text"]])


def test_each_passage_has_its_page_and_the_outline_section():
    pdf = rewritten(BOOK, outline=(("Preface", 0, None), ("Chapter 1", 1, None),
                                   ("Part B", 2, "Chapter 1"), ("Appendix", 3, None)))
    parsed = parse(pdf, F.PDF, name="book.pdf")
    assert parsed.pages == 4
    assert [(p.page, p.section, p.text, p.line_start) for p in parsed.passages] == [
        (1, "Preface", "Preface text\n(with brackets)", None),
        (2, "Chapter 1", "Chapter one starts", None),
        (3, "Chapter 1 › Part B", "Still chapter one, part B", None),
        (4, "Appendix", "Appendix text", None)]


def test_without_an_outline_sections_are_empty_and_pages_stay_apart():
    parsed = parse(BOOK, F.PDF, name="book.pdf")
    assert [(p.page, p.section) for p in parsed.passages] == [(1, ""), (2, ""), (3, ""), (4, "")]


def test_a_pdf_without_text_is_unreadable():
    with pytest.raises(UnreadableDocument, match="no text .*scanned"):
        parse(text_pdf([[]]), F.PDF, name="scan.pdf")


def test_garbage_after_the_magic_is_not_a_readable_pdf():
    with pytest.raises(UnreadableDocument, match="garbage.pdf is not a readable PDF"):
        parse(b"%PDF-1.7\n" + bytes(range(256)) * 40, F.PDF, name="garbage.pdf")


def test_an_encrypted_pdf_is_unreadable_unless_its_password_is_empty():
    with pytest.raises(UnreadableDocument, match="encrypted"):
        parse(rewritten(BOOK, password="secret"), F.PDF, name="locked.pdf")
    opened = parse(rewritten(BOOK, password=""), F.PDF, name="open.pdf")
    assert opened.passages[0].text.startswith("Preface text")


def test_a_pdf_over_the_page_cap_is_refused_naming_the_cap():
    assert parse(BOOK, F.PDF, name="book.pdf", max_pages=4).pages == 4
    with pytest.raises(UnreadableDocument, match="has 4 pages; at most 3 are read"):
        parse(BOOK, F.PDF, name="book.pdf", max_pages=3)


def test_a_pdf_over_the_passage_cap_is_refused():
    with pytest.raises(UnreadableDocument, match="longer than 24 characters"):
        parse(BOOK, F.PDF, name="book.pdf", max_chunks=2, chunk_chars=12)


def test_a_slow_pdf_is_stopped_at_the_time_bound():
    started = time.monotonic()
    with pytest.raises(UnreadableDocument, match="took longer than 1 s"):
        parse(bomb_pdf(20_000_000), F.PDF, name="bomb.pdf", seconds=1.0)
    assert time.monotonic() - started < 3.0


def test_a_pdf_bomb_is_stopped_at_the_memory_bound():
    started = time.monotonic()
    with pytest.raises(UnreadableDocument, match="needs more than 120 MiB"):
        parse(bomb_pdf(20_000_000), F.PDF, name="bomb.pdf", memory_bytes=120 * 1024 * 1024)
    assert time.monotonic() - started < 20.0


def test_a_memory_bound_too_small_to_start_the_reader_is_named():
    with pytest.raises(UnreadableDocument, match="did not start within its bounds"):
        parse(BOOK, F.PDF, name="book.pdf", memory_bytes=16 * 1024 * 1024)


def test_pdfs_are_read_from_threads_at_once():
    """The embedded server runs workers on threads: the child process needs no signals and
    no main thread."""
    results: dict[int, object] = {}

    def read(n: int) -> None:
        try:
            results[n] = parse(BOOK, F.PDF, name=f"{n}.pdf").pages
        except Exception as e:  # reported below
            results[n] = e

    threads = [threading.Thread(target=read, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {0: 4, 1: 4, 2: 4}


@pytest.fixture
def one_warm_reader() -> Iterator[pdf._WarmReader]:
    """This process's only warm reader, started by reading a PDF."""
    def close_all() -> None:
        while pdf._idle:
            pdf._idle.pop().close()

    close_all()
    assert parse(BOOK, F.PDF, name="book.pdf").pages == 4
    assert len(pdf._idle) == 1
    yield pdf._idle[0]
    close_all()


def _child_of(pid: int) -> int:
    """The process whose parent is ``pid`` (the warm reader's child reading a file)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # not a process, or one that ended meanwhile
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                return int(entry.name)
        time.sleep(0.02)
    raise AssertionError(f"no child of {pid}")


def _ends(pid: int) -> bool:
    """Whether process ``pid`` is gone or a zombie within 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat[stat.rindex(")") + 2] == "Z":
            return True
        time.sleep(0.02)
    return False


def _read_slowly() -> object:
    try:
        return parse(bomb_pdf(20_000_000), F.PDF, name="slow.pdf", seconds=60)
    except UnreadableDocument as e:
        return e


def test_a_killed_child_fails_its_file_and_the_warm_reader_reads_the_next(one_warm_reader):
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(_read_slowly)
        os.kill(_child_of(one_warm_reader.process.pid), signal.SIGKILL)
        assert "the PDF reader was stopped (signal 9)" in str(slow.result(timeout=30))
    assert parse(BOOK, F.PDF, name="next.pdf").pages == 4
    assert pdf._idle == [one_warm_reader]
    assert one_warm_reader.process.poll() is None


def test_a_killed_warm_reader_fails_its_file_and_the_next_starts_another(one_warm_reader):
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(_read_slowly)
        child = _child_of(one_warm_reader.process.pid)
        os.kill(one_warm_reader.process.pid, signal.SIGKILL)
        assert "slow.pdf cannot be read: the PDF reader" in str(slow.result(timeout=30))
    assert one_warm_reader.process.poll() == -signal.SIGKILL
    assert _ends(child)  # killed with its warm reader (their process group)
    assert parse(BOOK, F.PDF, name="next.pdf").pages == 4
    assert len(pdf._idle) == 1 and pdf._idle[0] is not one_warm_reader


def test_two_threads_reading_at_once_each_get_their_own_text(one_warm_reader):
    files = {n: text_pdf([[f"File {n} page {p}"] for p in range(1, 4)]) for n in range(2)}
    together = threading.Barrier(2)

    def read(n: int) -> list[str]:
        together.wait(timeout=30)
        return [p.text for p in parse(files[n], F.PDF, name=f"{n}.pdf").passages]

    with ThreadPoolExecutor(2) as pool:
        texts = list(pool.map(read, range(2), timeout=60))
    assert texts == [[f"File {n} page {p}" for p in range(1, 4)] for n in range(2)]
