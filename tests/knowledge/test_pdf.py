"""PDFs: pages and outline sections, and hostile files refused within their bounds by the
child process that reads them."""

from __future__ import annotations

import threading
import time

import pytest

from tests.knowledge.pdfs import bomb_pdf, rewritten, text_pdf
from vancetope_brain.errors import UnreadableDocument
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
