"""Reading a PDF's text in a child process bounded in time and memory (``read_pdf``).

A hostile PDF (a decompression bomb, a cyclic object graph, a page tree of millions) must
not stall or sink a worker, so pypdf never runs in the worker's process:
``pdf_child`` runs as ``sys.executable -m vancetope_brain.knowledge.pdf_child`` (a plain
subprocess, so it works from a Celery prefork child, which is a daemon, and from any
thread), limits its own address space and CPU time, reads the bytes from stdin and answers
JSON on stdout. This side kills it at the wall-time bound, reads at most ``OUTPUT_BYTES`` of
its answer and turns every failure into ``UnreadableDocument`` naming the bound.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import IO, Any

from vancetope_brain.errors import UnreadableDocument
from vancetope_brain.knowledge.chunking import SECTION_JOIN
from vancetope_brain.knowledge.pdf_child import MEMORY_EXIT
from vancetope_brain.models.knowledge import MAX_PDF_PAGES, PARSE_MEMORY_BYTES, PARSE_SECONDS

CHILD_MODULE = "vancetope_brain.knowledge.pdf_child"
OUTPUT_BYTES = 128 * 1024 * 1024
"""The most of the child's answer read; a longer one is refused."""
_MIB = 1024 * 1024
_READ = 1024 * 1024


@dataclass(frozen=True)
class PdfText:
    """A PDF's text, one string per page, and each page's section (outline path)."""

    texts: list[str]
    sections: list[str]


def page_sections(starts: list[tuple[int, str]], pages: int) -> list[str]:
    """The section of each page from the outline's (0-based page, path) entries: the first
    entry that starts on the page, else the section of the page before."""
    ordered = sorted(starts, key=lambda start: start[0])
    sections: list[str] = []
    current, at = "", 0
    for page in range(pages):
        here = ""
        while at < len(ordered) and ordered[at][0] <= page:
            here = here or (ordered[at][1] if ordered[at][0] == page else "")
            current = ordered[at][1]
            at += 1
        sections.append(here or (sections[-1] if sections else current))
    return sections


def _feed(stdin: IO[bytes], data: bytes) -> None:
    try:
        stdin.write(data)
        stdin.close()
    except OSError:  # the child died or was killed before it read everything
        pass


def _run_child(data: bytes, args: list[str], seconds: float) -> tuple[int, bytes, bool, str]:
    """(exit code, answer, timed out, stderr tail) of one child run."""
    timed_out = threading.Event()
    with tempfile.TemporaryFile() as errors, subprocess.Popen(
            [sys.executable, "-m", CHILD_MODULE, *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=errors) as child:
        assert child.stdin is not None and child.stdout is not None

        def stop() -> None:
            timed_out.set()
            child.kill()

        watchdog = threading.Timer(seconds, stop)
        feeder = threading.Thread(target=_feed, args=(child.stdin, data), daemon=True)
        watchdog.start()
        feeder.start()
        answer = bytearray()
        try:
            while block := child.stdout.read(_READ):
                answer += block
                if len(answer) > OUTPUT_BYTES:
                    child.kill()
                    raise UnreadableDocument(
                        f"its text is longer than {OUTPUT_BYTES // _MIB} MiB")
            code = child.wait()
        finally:
            watchdog.cancel()
            child.kill()
            feeder.join()
        errors.seek(max(0, errors.seek(0, 2) - 300))
        tail = errors.read().decode("utf-8", "replace").strip().splitlines()
    return code, bytes(answer), timed_out.is_set(), tail[-1] if tail else ""


def read_pdf(data: bytes, *, name: str, max_chars: int, seconds: float = PARSE_SECONDS,
             memory_bytes: int = PARSE_MEMORY_BYTES, max_pages: int = MAX_PDF_PAGES) -> PdfText:
    """The text of the PDF ``data``. Raises ``UnreadableDocument`` when it is corrupt,
    encrypted, longer than ``max_pages`` pages or ``max_chars`` characters, or when reading
    it takes more than ``seconds`` or ``memory_bytes``. Safe to call from any thread."""
    args = [str(memory_bytes), str(math.ceil(seconds) + 1), str(max_pages), str(max_chars)]
    try:
        code, answer, timed_out, tail = _run_child(data, args, seconds)
    except UnreadableDocument as e:
        raise UnreadableDocument(f"{name} cannot be read: {e}") from e
    if timed_out:
        raise UnreadableDocument(
            f"{name} cannot be read: reading the PDF took longer than {seconds:g} s, "
            "the limit for one file")
    if code == MEMORY_EXIT or "MemoryError" in tail:
        raise UnreadableDocument(
            f"{name} cannot be read: reading the PDF needs more than "
            f"{memory_bytes / _MIB:g} MiB of memory, the limit for one file")
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        raise UnreadableDocument(
            f"{name} cannot be read: the PDF reader was stopped (signal {-code}) after "
            f"using its {args[1]} s of CPU or its memory")
    if code != 0:
        raise UnreadableDocument(
            f"{name} cannot be read: the PDF reader failed (exit {code}): {tail}")
    try:
        result: dict[str, Any] = json.loads(answer)
    except ValueError as e:
        raise UnreadableDocument(f"{name} cannot be read: the PDF reader's answer is not JSON") \
            from e
    return _text(result, name=name, max_pages=max_pages, max_chars=max_chars)


def _text(result: dict[str, Any], *, name: str, max_pages: int, max_chars: int) -> PdfText:
    error, detail = result.get("error"), result.get("detail")
    if error == "encrypted":
        raise UnreadableDocument(f"{name} cannot be read: the PDF is encrypted ({detail})")
    if error == "pages":
        raise UnreadableDocument(
            f"{name} cannot be read: the PDF has {detail} pages; at most {max_pages} are read")
    if error == "text":
        raise UnreadableDocument(
            f"{name} cannot be read: its text is longer than {max_chars} characters")
    if error == "reader":
        raise UnreadableDocument(f"{name} cannot be read: the PDF reader did not start "
                                 f"within its bounds ({detail})")
    if error is not None:
        raise UnreadableDocument(f"{name} is not a readable PDF: {detail}")
    texts = [str(text) for text in result["texts"]]
    starts = [(int(page), SECTION_JOIN.join(map(str, path))) for page, path in result["outline"]]
    return PdfText(texts=texts, sections=page_sections(starts, len(texts)))
