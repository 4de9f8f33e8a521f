"""A document's bytes → its passages (``parse``), for every format ``formats`` reads.

Text formats are decoded as UTF-8 (``formats.decode_text``) and read in this process:
their cost grows linearly with the file, which the per-file size cap bounds. A PDF is read
in a bounded child process (``pdf``). Every passage carries its citation: the section path,
and the lines (text formats, 1-based, inclusive) or the page (PDF, 1-based). A document
without any text is unreadable: there is nothing to search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vancetope_brain.errors import DocumentTooLarge, UnreadableDocument
from vancetope_brain.knowledge.chunking import CHUNK_CHARS, Line, chunk
from vancetope_brain.knowledge.code import code_lines
from vancetope_brain.knowledge.formats import decode_text
from vancetope_brain.knowledge.markup import html_lines, markdown_lines
from vancetope_brain.knowledge.pdf import read_pdf
from vancetope_brain.models.knowledge import (
    MAX_CHUNKS_PER_DOCUMENT,
    MAX_DOCUMENT_BYTES,
    MAX_PDF_PAGES,
    PARSE_MEMORY_BYTES,
    PARSE_SECONDS,
    DocumentFormat,
    Passage,
)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class ParsedDocument:
    """The passages of a document in order, and its page count (PDF only)."""

    passages: list[Passage]
    pages: int | None = None


def parse(data: bytes, fmt: DocumentFormat, *, name: str, seconds: float = PARSE_SECONDS,
          memory_bytes: int = PARSE_MEMORY_BYTES, max_pages: int = MAX_PDF_PAGES,
          max_chunks: int = MAX_CHUNKS_PER_DOCUMENT,
          chunk_chars: int = CHUNK_CHARS) -> ParsedDocument:
    """The passages of the file ``name`` read as ``fmt`` (``formats.detect_format``).

    Raises ``DocumentTooLarge`` over ``MAX_DOCUMENT_BYTES``, and ``UnreadableDocument``
    (the message names the bound) when the bytes are not of the format, the document has no
    text or more than ``max_chunks`` passages, or a PDF passes ``max_pages``, ``seconds``
    or ``memory_bytes`` (those bound only the PDF reader's child process)."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise DocumentTooLarge(f"{name} is {len(data)} bytes; the limit for one file is "
                               f"{MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB")
    pages: int | None = None
    lines: list[Line]
    if fmt is DocumentFormat.PDF:
        pdf = read_pdf(data, name=name, max_chars=max_chunks * chunk_chars, seconds=seconds,
                       memory_bytes=memory_bytes, max_pages=max_pages)
        pages = len(pdf.texts)
        lines = [Line(_CONTROL.sub("", text).rstrip(), None, None, section, number)
                 for number, (page, section) in enumerate(zip(pdf.texts, pdf.sections,
                                                               strict=True), start=1)
                 for text in page.split("\n")]
    else:
        text = decode_text(data, name=name)
        if fmt is DocumentFormat.MARKDOWN:
            lines = markdown_lines(text)
        elif fmt is DocumentFormat.HTML:
            lines = html_lines(text)
        elif fmt is DocumentFormat.CODE:
            lines = code_lines(text, name=name)
        else:
            lines = [Line(line.rstrip(), n, n) for n, line in enumerate(text.split("\n"), 1)]
    passages = chunk(lines, name=name, size=chunk_chars, max_chunks=max_chunks)
    if not passages:
        raise UnreadableDocument(f"{name} has no text to search"
                                 + (" (a scanned PDF has none: it is not OCRed)" if pages
                                    else ""))
    return ParsedDocument(passages=passages, pages=pages)
