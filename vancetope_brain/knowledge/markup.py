"""The lines of Markdown and HTML documents, each with the heading path it sits under.

Markdown: ATX headings (``## Install``) and setext headings (a paragraph underlined with
``===`` or ``---``); fenced code blocks and YAML front matter hold no headings. The source
is kept as it is (Markdown is text). HTML: the text a browser shows, read with the standard
library's ``html.parser`` — tags dropped, ``script``/``style`` (and ``template``, ``title``,
``svg``, ``math``) dropped with their contents, comments dropped, character references
decoded once (``&lt;b&gt;`` is the text ``<b>``, as a browser shows it; ``&amp;lt;`` stays
``&lt;``), ``h1``–``h6`` making the heading path; each block's line numbers are those of its
source. The section path joins the headings with ``chunking.SECTION_JOIN``.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from vancetope_brain.knowledge.chunking import SECTION_JOIN, Line

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_NOT_A_SETEXT_TITLE = re.compile(r"^ {0,3}(?:[-*+>|]|\d{1,9}[.)])(?:[ \t]|$)")


class _Headings:
    """The heading path as headings of given levels arrive."""

    def __init__(self) -> None:
        self._open: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> str:
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        if title:
            self._open.append((level, title))
        return self.path

    @property
    def path(self) -> str:
        return SECTION_JOIN.join(title for _, title in self._open)


def _front_matter_end(lines: list[str]) -> int:
    """The index after a YAML front matter block (``---`` … ``---``), or 0."""
    if lines and lines[0].strip() == "---":
        for i, line in enumerate(lines[1:], start=1):
            if line.strip() in ("---", "..."):
                return i + 1
    return 0


def _markdown_headings(lines: list[str]) -> dict[int, tuple[int, str]]:
    """Line index where each heading starts → (level, title)."""
    found: dict[int, tuple[int, str]] = {}
    paragraph: int | None = None
    fence: str | None = None
    for i in range(_front_matter_end(lines), len(lines)):
        line = lines[i]
        if fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            continue
        if match := _FENCE.match(line):
            fence, paragraph = match[1], None
        elif not line.strip():
            paragraph = None
        elif match := _ATX.match(line):
            found[i] = (len(match[1]), _ATX_CLOSE.sub("", match[2] or "").strip())
            paragraph = None
        elif paragraph is not None and _SETEXT.match(line) \
                and not _NOT_A_SETEXT_TITLE.match(lines[paragraph]):
            title = " ".join(part.strip() for part in lines[paragraph:i])
            found[paragraph] = (1 if "=" in line else 2, title)
            paragraph = None
        elif paragraph is None or _NOT_A_SETEXT_TITLE.match(line):
            paragraph = i  # a list item or quote starts a block of its own
    return found


def markdown_lines(text: str) -> list[Line]:
    """The lines of a Markdown document with their heading paths."""
    lines = [line.rstrip() for line in text.split("\n")]
    headings = _markdown_headings(lines)
    path = _Headings()
    section = ""
    out: list[Line] = []
    for i, line in enumerate(lines):
        if i in headings:
            section = path.enter(*headings[i])
        out.append(Line(line, i + 1, i + 1, section))
    return out


_SKIPPED = frozenset({"script", "style", "template", "title", "svg", "math"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details",
    "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form",
    "header", "hr", "html", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
    "table", "tbody", "tfoot", "thead", "tr", "ul",
})
_CELLS = frozenset({"td", "th"})
_SPACE = re.compile(r"\s+")


class _HtmlText(HTMLParser):
    """Collects the shown text of an HTML document as ``Line``s (see the module)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[Line] = []
        self._parts: list[str] = []
        self._first: int | None = None
        self._last: int | None = None
        self._skip = 0
        self._pre = 0
        self._heading: int | None = None
        self._path = _Headings()
        self._section = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skip += 1
        elif tag in _HEADINGS:
            self._heading_end()
            self._break()
            self._heading = _HEADINGS[tag]
        elif tag in _BLOCKS:
            self._break()
            self._pre += tag == "pre"
        elif tag in _CELLS:
            self._parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skip = max(0, self._skip - 1)
        elif tag in _HEADINGS:
            self._heading_end()
        elif tag in _BLOCKS:
            self._break()
            self._pre = max(0, self._pre - (tag == "pre"))

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        line = self.getpos()[0]
        if self._pre and self._heading is None:
            for offset, piece in enumerate(data.split("\n")):
                if offset:
                    self._break()
                self._take(piece, line + offset, line + offset)
        else:
            self._take(data, line, line + data.count("\n"))

    def close(self) -> None:
        super().close()
        self._heading_end()
        self._break()

    def _take(self, text: str, first: int, last: int) -> None:
        if self._first is None and text.strip():
            self._first = first
        self._parts.append(text)
        if text.strip():
            self._last = last

    def _text(self) -> str:
        joined = "".join(self._parts)
        return joined.rstrip() if self._pre else _SPACE.sub(" ", joined).strip()

    def _break(self) -> None:
        if (text := self._text()) and self._heading is None:
            self.lines.append(Line(text, self._first, self._last, self._section))
        if self._heading is None:
            self._parts, self._first, self._last = [], None, None

    def _heading_end(self) -> None:
        if self._heading is None:
            return
        title, level = _SPACE.sub(" ", "".join(self._parts)).strip(), self._heading
        self._heading = None
        self._section = self._path.enter(level, title)
        self._break()


def html_lines(text: str) -> list[Line]:
    """The shown text of an HTML document, one ``Line`` per block, with heading paths."""
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    return parser.lines
