"""Reading a PDF's text in a child process bounded in time and memory (``read_pdf``).

A hostile PDF (a decompression bomb, a cyclic object graph, a page tree of millions) must
not stall or sink a worker, so pypdf never runs in the worker's process. ``pdf_child`` runs as
``sys.executable -m vancetope_brain.knowledge.pdf_child``, a warm reader: a plain subprocess
(so it works from a Celery prefork child, which is a daemon, and from any thread) that has
imported pypdf once and forks one child per file, which limits its own address space and CPU
time. This side kills the warm reader and its child (their process group) at the wall-time
bound, reads at most ``OUTPUT_BYTES`` of the answer and turns every failure into
``UnreadableDocument`` naming the bound. A warm reader serves one file at a time: a thread
takes an idle one or starts one, and gives it back after a file unless it was killed or
failed (the next file then starts a fresh one), so a process keeps as many warm readers as
it ever read PDFs at once.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any

from vancetope_brain.errors import UnreadableDocument
from vancetope_brain.knowledge.chunking import SECTION_JOIN
from vancetope_brain.knowledge.pdf_child import MEMORY_EXIT
from vancetope_brain.models.knowledge import MAX_PDF_PAGES, PARSE_MEMORY_BYTES, PARSE_SECONDS

CHILD_MODULE = "vancetope_brain.knowledge.pdf_child"
OUTPUT_BYTES = 128 * 1024 * 1024
"""The most of the child's answer read; a longer one is refused."""
_MIB = 1024 * 1024


class _WarmReader:
    """One warm reader process (``pdf_child``), used by one thread at a time."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", CHILD_MODULE], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)

    def ask(self, request: dict[str, Any], data: bytes) -> tuple[int, bytes | None]:
        """(the child's exit code, its answer or None when longer than ``OUTPUT_BYTES``).
        Raises ``OSError`` or ``ValueError`` when the warm reader died."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({**request, "size": len(data)}).encode() + b"\n")
        self.process.stdin.write(data)
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline(4096) or b"null")
        if not isinstance(reply, dict):
            raise ValueError("the warm reader ended")
        size = int(reply["size"])
        if size > OUTPUT_BYTES:
            return int(reply["code"]), None
        answer = self.process.stdout.read(size)
        if len(answer) != size:
            raise ValueError("the warm reader ended mid-answer")
        return int(reply["code"]), answer

    def kill(self) -> None:
        """Kill the warm reader and the child reading a file."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def close(self) -> int:
        """Kill it and reap it: its exit code."""
        self.kill()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        return self.process.wait()


_idle: list[_WarmReader] = []
_idle_lock = threading.Lock()


def _forget_idle() -> None:
    """A forked process shares its parent's readers' pipes: it starts its own."""
    global _idle_lock
    _idle.clear()
    _idle_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_idle)


def _run_child(data: bytes, request: dict[str, Any], seconds: float
               ) -> tuple[int, bytes | None, bool]:
    """(exit code, answer or None when too long, timed out) of one file's child."""
    with _idle_lock:
        reader = _idle.pop() if _idle else None
    if reader is not None and reader.process.poll() is not None:  # died while idle
        reader.close()
        reader = None
    reader = reader or _WarmReader()
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        reader.kill()

    watchdog = threading.Timer(seconds, stop)
    watchdog.start()
    alive = False
    try:
        code, answer = reader.ask(request, data)
        alive = True
    except (OSError, ValueError):  # the warm reader died: killed, or crashed
        code, answer = reader.close(), b""
    finally:
        watchdog.cancel()
        watchdog.join()  # a watchdog firing now must not kill a reader given back
    if alive and not timed_out.is_set():
        with _idle_lock:
            _idle.append(reader)
    elif alive:
        reader.close()
    return code, answer, timed_out.is_set()


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


def read_pdf(data: bytes, *, name: str, max_chars: int, seconds: float = PARSE_SECONDS,
             memory_bytes: int = PARSE_MEMORY_BYTES, max_pages: int = MAX_PDF_PAGES) -> PdfText:
    """The text of the PDF ``data``. Raises ``UnreadableDocument`` when it is corrupt,
    encrypted, longer than ``max_pages`` pages or ``max_chars`` characters, or when reading
    it takes more than ``seconds`` or ``memory_bytes``. Safe to call from any thread."""
    cpu_seconds = math.ceil(seconds) + 1
    request = {"memory": memory_bytes, "cpu": cpu_seconds, "max_pages": max_pages,
               "max_chars": max_chars, "output": OUTPUT_BYTES}
    code, answer, timed_out = _run_child(data, request, seconds)
    if timed_out:
        raise UnreadableDocument(
            f"{name} cannot be read: reading the PDF took longer than {seconds:g} s, "
            "the limit for one file")
    if answer is None:
        raise UnreadableDocument(
            f"{name} cannot be read: its text is longer than {OUTPUT_BYTES // _MIB} MiB")
    if code == MEMORY_EXIT:
        raise UnreadableDocument(
            f"{name} cannot be read: reading the PDF needs more than "
            f"{memory_bytes / _MIB:g} MiB of memory, the limit for one file")
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        raise UnreadableDocument(
            f"{name} cannot be read: the PDF reader was stopped (signal {-code}) after "
            f"using its {cpu_seconds} s of CPU or its memory")
    if code != 0:
        raise UnreadableDocument(f"{name} cannot be read: the PDF reader failed (exit {code})")
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
