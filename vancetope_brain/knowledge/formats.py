"""Which formats knowledge reads, and how a file's format is decided (``detect_format``).

The file's extension decides first, then its media type; the content must agree: a PDF
starts with ``%PDF-`` (and a file that does is read as a PDF whatever its name), and every
other format is UTF-8 text (a byte order mark is allowed) without NUL bytes. A file of
another type is refused with ``UnsupportedDocument``, whose message lists what is read; a
file whose bytes contradict its type (a binary file named ``.txt``) with
``UnreadableDocument``. A name without an extension whose bytes are text is plain text
(``README``, ``LICENSE``).
"""

from __future__ import annotations

import codecs
from pathlib import PurePosixPath

from vancetope_brain.errors import UnreadableDocument, UnsupportedDocument
from vancetope_brain.models.knowledge import DocumentFormat

TEXT_EXTENSIONS = (".txt", ".text", ".log", ".csv", ".tsv", ".rst")
MARKDOWN_EXTENSIONS = (".md", ".markdown", ".mdown", ".mkd")
HTML_EXTENSIONS = (".html", ".htm", ".xhtml")
PDF_EXTENSIONS = (".pdf",)
CODE_EXTENSIONS = (
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java",
    ".kt", ".kts", ".scala", ".swift", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh",
    ".cs", ".rb", ".php", ".sh", ".bash", ".zsh", ".sql", ".yaml", ".yml", ".toml", ".json",
    ".ini", ".cfg", ".xml", ".css", ".scss", ".lua", ".r", ".pl", ".proto", ".graphql",
)
"""Source code: read as text, passages named after their top-level definition where
``code`` knows the language."""

BY_EXTENSION: dict[str, DocumentFormat] = {
    **dict.fromkeys(TEXT_EXTENSIONS, DocumentFormat.TEXT),
    **dict.fromkeys(MARKDOWN_EXTENSIONS, DocumentFormat.MARKDOWN),
    **dict.fromkeys(HTML_EXTENSIONS, DocumentFormat.HTML),
    **dict.fromkeys(PDF_EXTENSIONS, DocumentFormat.PDF),
    **dict.fromkeys(CODE_EXTENSIONS, DocumentFormat.CODE),
}
BY_MEDIA_TYPE: dict[str, DocumentFormat] = {
    "text/plain": DocumentFormat.TEXT,
    "text/csv": DocumentFormat.TEXT,
    "text/markdown": DocumentFormat.MARKDOWN,
    "text/x-markdown": DocumentFormat.MARKDOWN,
    "text/html": DocumentFormat.HTML,
    "application/xhtml+xml": DocumentFormat.HTML,
    "application/pdf": DocumentFormat.PDF,
}
PDF_MAGIC = b"%PDF-"
PDF_MAGIC_WITHIN = 1024
"""Readers accept a PDF header anywhere in the first kilobyte; so does ``detect_format``."""

READ_TYPES = (
    f"plain text ({' '.join(TEXT_EXTENSIONS)}), Markdown ({' '.join(MARKDOWN_EXTENSIONS)}), "
    f"HTML ({' '.join(HTML_EXTENSIONS)}), PDF (.pdf) and source code "
    f"({' '.join(CODE_EXTENSIONS)})")


def is_pdf(head: bytes) -> bool:
    """Whether ``head`` (the file's first bytes) holds a PDF header."""
    return PDF_MAGIC in head[:PDF_MAGIC_WITHIN]


def text_fault(data: bytes, *, complete: bool) -> str | None:
    """Why ``data`` is not UTF-8 text, or ``None`` when it is. With ``complete=False`` the
    bytes are a file's head, which may end inside a character."""
    if (nul := data.find(b"\0")) >= 0:
        return f"it holds a NUL byte at offset {nul}, so it is binary"
    try:
        codecs.getincrementaldecoder("utf-8-sig")().decode(data, final=complete)
    except UnicodeDecodeError as e:
        return f"it is not UTF-8 text (byte {e.start})"
    return None


def decode_text(data: bytes, *, name: str) -> str:
    """The text of a whole text file, without its byte order mark; line ends become ``\\n``.
    Raises ``UnreadableDocument`` when it is not UTF-8 text."""
    if fault := text_fault(data, complete=True):
        raise UnreadableDocument(f"{name} cannot be read: {fault}")
    return data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")


def detect_format(name: str, head: bytes, media_type: str | None = None) -> DocumentFormat:
    """How to read the file ``name`` whose first bytes are ``head`` (a few kilobytes are
    enough; the whole file is fine), sent with ``media_type`` if the client gave one.
    Raises ``UnsupportedDocument`` for a type knowledge does not read and
    ``UnreadableDocument`` when the bytes contradict the type."""
    if is_pdf(head):
        return DocumentFormat.PDF
    suffix = PurePosixPath(name.replace("\\", "/")).suffix.lower()
    media = (media_type or "").split(";")[0].strip().lower()
    fmt = BY_EXTENSION.get(suffix) or BY_MEDIA_TYPE.get(media)
    if fmt is None and not suffix and text_fault(head, complete=False) is None:
        fmt = DocumentFormat.TEXT
    if fmt is None:
        kind = f"{suffix} files" if suffix else f"files of type {media or 'unknown'}"
        raise UnsupportedDocument(f"{name}: {kind} are not read; knowledge reads {READ_TYPES}")
    if fmt is DocumentFormat.PDF:
        raise UnreadableDocument(f"{name} is not a PDF: it has no {PDF_MAGIC.decode()} header")
    if fault := text_fault(head, complete=False):
        raise UnreadableDocument(f"{name} cannot be read as {fmt.value}: {fault}")
    return fmt
