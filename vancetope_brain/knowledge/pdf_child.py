"""The child process that reads one PDF: ``python -m vancetope_brain.knowledge.pdf_child
MEMORY_BYTES CPU_SECONDS MAX_PAGES MAX_CHARS``.

It first bounds itself (``RLIMIT_AS`` to MEMORY_BYTES, ``RLIMIT_CPU`` to CPU_SECONDS), then
reads the PDF's bytes from stdin and writes one JSON object to stdout: ``{"pages": n,
"texts": [page text, …], "outline": [[0-based page, [title, …]], …]}``, or ``{"error":
kind, "detail": …}`` with kind ``encrypted``, ``pages``, ``text``, ``corrupt`` or ``reader``
(pypdf could not be imported). It exits
with ``MEMORY_EXIT`` when it runs out of its memory. Only ``pdf`` starts it (a subprocess,
not ``multiprocessing``: Celery's prefork children are daemons and may not have children of
their own); ``pdf`` imports ``MEMORY_EXIT`` from here, so this module imports nothing but the
standard library at its top: pypdf is imported once the bounds are set.
"""

from __future__ import annotations

import io
import json
import logging
import resource
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pypdf import PdfReader

MEMORY_EXIT = 3
OUTLINE_ENTRIES = 10_000
"""Outline entries read at most (a hostile outline may be huge or cyclic)."""


def _bound(limit: int, soft: int, hard: int) -> None:
    _, current_hard = resource.getrlimit(limit)
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(limit, (soft, hard))


def _outline_starts(reader: PdfReader) -> list[tuple[int, list[str]]]:
    """(0-based page, heading path) of each outline entry, in outline order."""
    starts: list[tuple[int, list[str]]] = []

    def walk(items: list[Any], path: tuple[str, ...]) -> None:
        title = ""
        for item in items:
            if len(starts) >= OUTLINE_ENTRIES:
                return
            if isinstance(item, list):
                walk(item, (*path, title) if title else path)
                continue
            title = " ".join(str(item.title or "").split())
            page = reader.get_destination_page_number(item)
            if page is not None and page >= 0 and title:
                starts.append((page, [*path, title]))

    try:
        walk(reader.outline, ())
    except Exception:  # a broken outline costs the sections, not the text
        return []
    return starts


def read(reader_class: type[PdfReader], data: bytes, *, max_pages: int,
         max_chars: int) -> dict[str, Any]:
    """The answer for one PDF (see the module)."""
    reader = reader_class(io.BytesIO(data))
    if reader.is_encrypted:
        try:
            opened = bool(reader.decrypt(""))
        except Exception:  # an unknown scheme or a missing crypto library: equally closed
            opened = False
        if not opened:
            return {"error": "encrypted", "detail": "it needs a password"}
    pages = len(reader.pages)
    if pages > max_pages:
        return {"error": "pages", "detail": str(pages)}
    texts: list[str] = []
    chars = 0
    for page in reader.pages:
        texts.append(page.extract_text() or "")
        chars += len(texts[-1])
        if chars > max_chars:
            return {"error": "text", "detail": str(max_chars)}
    return {"pages": pages, "texts": texts, "outline": _outline_starts(reader)}


def main(argv: list[str]) -> int:
    memory, cpu_seconds, max_pages, max_chars = (int(arg) for arg in argv)
    _bound(resource.RLIMIT_AS, memory, memory)
    _bound(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)
    logging.disable(logging.CRITICAL)
    data = sys.stdin.buffer.read()
    try:
        from pypdf import PdfReader  # after the bounds: its import counts against them too
    except Exception as e:  # a missing package, or a memory bound too small to load it
        answer: dict[str, Any] = {"error": "reader",
                                   "detail": f"{type(e).__name__}: {e}"[:300]}
        sys.stdout.write(json.dumps(answer))
        return 0
    try:
        answer = read(PdfReader, data, max_pages=max_pages, max_chars=max_chars)
    except MemoryError:
        return MEMORY_EXIT
    except Exception as e:  # whatever a hostile file makes pypdf raise, it is unreadable
        answer = {"error": "corrupt", "detail": f"{type(e).__name__}: {e}"[:300]}
    try:
        sys.stdout.write(json.dumps(answer))
    except MemoryError:
        return MEMORY_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
