"""Cutting a document's lines into passages of about ``CHUNK_CHARS`` characters.

A passage never spans two sections or two pages, so its citation is exact. Inside a
section it is cut at paragraph boundaries (blank lines) first, then at line ends, then
between words; a word is cut only when it alone is longer than a passage. There is no
overlap between passages: each line belongs to one passage, so a citation names exactly the
lines it quotes and a hit is never found twice; the section path each passage carries gives
the context an overlap would.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby

from vancetope_brain.errors import UnreadableDocument
from vancetope_brain.models.knowledge import MAX_CHUNKS_PER_DOCUMENT, Passage

CHUNK_CHARS = 1_200
"""The most characters of a passage (docs/configuration.md, "Knowledge")."""

SECTION_JOIN = " › "
"""Joins the headings of a passage's section path (``"Install › Linux"``)."""

_TOKEN = re.compile(r"(\s*)(\S+)")


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a document's text: where it came from (``first``..``last`` source lines,
    1-based, or ``None`` where a format has none, like a PDF), its section path and page."""

    text: str
    first: int | None
    last: int | None
    section: str = ""
    page: int | None = None


class _Packer:
    """Builds passages one piece at a time; a piece joins the open passage when it fits."""

    def __init__(self, *, name: str, size: int, max_chunks: int) -> None:
        self.passages: list[Passage] = []
        self._name, self._size, self._max = name, size, max_chunks
        self._text = ""
        self._first: int | None = None
        self._last: int | None = None
        self._section = ""
        self._page: int | None = None

    def start(self, section: str, page: int | None) -> None:
        self.flush()
        self._section, self._page = section, page

    def add(self, text: str, first: int | None, last: int | None, sep: str) -> None:
        if self._text and len(self._text) + len(sep) + len(text) <= self._size:
            self._text += sep + text
        else:
            self.flush()
            self._text, self._first = text, first
        self._last = last

    def flush(self) -> None:
        if not self._text:
            return
        if len(self.passages) == self._max:
            raise UnreadableDocument(
                f"{self._name} makes more than {self._max} passages, the limit for one document")
        self.passages.append(Passage(text=self._text, section=self._section, page=self._page,
                                     line_start=self._first, line_end=self._last))
        self._text = ""

    def add_line(self, line: Line, sep: str) -> None:
        if len(line.text) <= self._size:
            self.add(line.text, line.first, line.last, sep)
            return
        for i, match in enumerate(_TOKEN.finditer(line.text)):
            space, word = match.groups()
            for at in range(0, len(word), self._size):
                piece_sep = (sep if i == 0 else space) if at == 0 else ""
                self.add(word[at:at + self._size], line.first, line.last, piece_sep)


def _paragraphs(lines: Iterable[Line]) -> Iterator[list[Line]]:
    """Runs of non-blank lines."""
    run: list[Line] = []
    for line in lines:
        if line.text.strip():
            run.append(line)
        elif run:
            yield run
            run = []
    if run:
        yield run


def chunk(lines: Iterable[Line], *, name: str, size: int = CHUNK_CHARS,
          max_chunks: int = MAX_CHUNKS_PER_DOCUMENT) -> list[Passage]:
    """The passages of ``lines`` in document order. Raises ``UnreadableDocument`` (naming the
    bound) as soon as there would be more than ``max_chunks``."""
    packer = _Packer(name=name, size=size, max_chunks=max_chunks)
    for (section, page), group in groupby(lines, key=lambda line: (line.section, line.page)):
        packer.start(section, page)
        for paragraph in _paragraphs(group):
            text = "\n".join(line.text for line in paragraph)
            if len(text) <= size:
                packer.add(text, paragraph[0].first, paragraph[-1].last, "\n\n")
                continue
            for i, line in enumerate(paragraph):
                packer.add_line(line, "\n\n" if i == 0 else "\n")
    packer.flush()
    return packer.passages
