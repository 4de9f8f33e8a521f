"""The warm PDF reader: ``python -m vancetope_brain.knowledge.pdf_child``.

One long-lived, single-threaded process per worker process (``pdf`` starts it with
``subprocess.Popen``, not ``multiprocessing``: Celery's prefork children are daemons and may
not have children of their own). It imports pypdf once, then serves requests from stdin, one
at a time: a JSON line ``{"memory": bytes, "cpu": seconds, "max_pages": n, "max_chars": n,
"output": bytes, "size": n}`` followed by the PDF's ``size`` bytes. For each it forks a child
that first bounds itself (``RLIMIT_AS`` to ``memory``, ``RLIMIT_CPU`` to ``cpu``), then reads
the PDF and writes one JSON object into a pipe: ``{"pages": n, "texts": [page text, …],
"outline": [[0-based page, [title, …]], …]}``, or ``{"error": kind, "detail": …}`` with kind
``encrypted``, ``pages``, ``text``, ``corrupt`` or ``reader`` (pypdf could not be imported,
or the process is already larger than ``memory``). A child that runs out of memory exits
with ``MEMORY_EXIT``. The warm process answers a JSON line ``{"code": the child's exit code
(minus the signal that killed it), "size": n}`` followed by the child's ``n`` bytes, or by
nothing when ``n`` is over ``output`` (the child is killed at ``output`` + 1 bytes). The wall
time is ``pdf``'s to bound: it kills this process and its child (their own process group).
``pdf`` imports ``MEMORY_EXIT`` from here, so this module imports nothing but the standard
library at its top.
"""

from __future__ import annotations

import io
import json
import logging
import os
import resource
import signal
import sys
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from pypdf import PdfReader

MEMORY_EXIT = 3
OUTLINE_ENTRIES = 10_000
"""Outline entries read at most (a hostile outline may be huge or cyclic)."""
_READ = 1024 * 1024
_MIB = 1024 * 1024


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



def _address_space() -> int:
    """This process's address space in bytes (0 where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _answer(reader_class: type[PdfReader] | str, data: bytes,
            request: dict[str, Any]) -> dict[str, Any]:
    """The answer for one PDF, in the bounded child (``reader_class`` is the reason when
    pypdf could not be imported)."""
    memory = int(request["memory"])
    _bound(resource.RLIMIT_AS, memory, memory)
    _bound(resource.RLIMIT_CPU, int(request["cpu"]), int(request["cpu"]) + 1)
    if isinstance(reader_class, str):
        return {"error": "reader", "detail": reader_class}
    if (used := _address_space()) > memory:
        return {"error": "reader", "detail": f"the reader process already takes "
                                             f"{used // _MIB} MiB of address space"}
    try:
        return read(reader_class, data, max_pages=int(request["max_pages"]),
                    max_chars=int(request["max_chars"]))
    except MemoryError:
        raise
    except Exception as e:  # whatever a hostile file makes pypdf raise, it is unreadable
        return {"error": "corrupt", "detail": f"{type(e).__name__}: {e}"[:300]}


def _child(reader_class: type[PdfReader] | str, data: bytes, request: dict[str, Any],
           pipe: int) -> int:
    """The forked child's work: its exit code."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the warm process's protocol and its stderr are not the child's
        os.dup2(devnull, fd)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # the warm process gone: the child too
    try:
        payload = json.dumps(_answer(reader_class, data, request)).encode()
        with os.fdopen(pipe, "wb") as out:
            out.write(payload)
    except MemoryError:
        return MEMORY_EXIT
    return 0


def _fork_read(reader_class: type[PdfReader] | str, data: bytes,
               request: dict[str, Any]) -> tuple[int, bytes, int]:
    """(exit code, answer, answer's size) of one bounded child reading ``data``."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(readable)
            code = _child(reader_class, data, request, writable)
        finally:
            os._exit(code)
    os.close(writable)
    limit, answer = int(request["output"]), bytearray()
    with os.fdopen(readable, "rb", buffering=0) as pipe:
        while len(answer) <= limit and (block := pipe.read(_READ)):
            answer += block
    if len(answer) > limit:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), bytes(answer), len(answer)


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    """Answer the requests on ``requests`` until it ends (see the module)."""
    logging.disable(logging.CRITICAL)
    reader_class: type[PdfReader] | str
    try:
        from pypdf import PdfReader
        reader_class = PdfReader
    except Exception as e:  # a missing package: every file says so
        reader_class = f"{type(e).__name__}: {e}"[:300]
    while header := requests.readline():
        request = json.loads(header)
        data = requests.read(int(request["size"]))
        code, answer, size = _fork_read(reader_class, data, request)
        answers.write(json.dumps({"code": code, "size": size}).encode() + b"\n")
        if size <= int(request["output"]):
            answers.write(answer)
        answers.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
