"""detect_format: extension, media type and the bytes decide how a file is read."""

from __future__ import annotations

import pytest

from tests.knowledge.pdfs import text_pdf
from vancetope_brain.errors import UnreadableDocument, UnsupportedDocument
from vancetope_brain.knowledge.formats import CODE_EXTENSIONS, detect_format
from vancetope_brain.models.knowledge import DocumentFormat as F


@pytest.mark.parametrize(("name", "fmt"), [
    ("notes.txt", F.TEXT), ("server.LOG", F.TEXT), ("table.csv", F.TEXT),
    ("README.md", F.MARKDOWN), ("guide.markdown", F.MARKDOWN),
    ("page.html", F.HTML), ("page.HTM", F.HTML),
    ("app.py", F.CODE), ("main.go", F.CODE), ("lib.rs", F.CODE), ("ui.tsx", F.CODE),
    ("query.sql", F.CODE), ("config.yaml", F.CODE), ("Cargo.toml", F.CODE),
    ("LICENSE", F.TEXT), ("dir/sub/readme", F.TEXT), ("C:\\docs\\notes.md", F.MARKDOWN),
])
def test_the_extension_decides_for_text(name, fmt):
    assert detect_format(name, b"hello\n") is fmt


def test_every_code_extension_is_code():
    assert {detect_format(f"x{ext}", b"x = 1\n") for ext in CODE_EXTENSIONS} == {F.CODE}


def test_the_media_type_decides_when_the_extension_does_not():
    assert detect_format("upload", b"# Title\n", "text/markdown; charset=utf-8") is F.MARKDOWN
    assert detect_format("page.php5", b"<p>x</p>", "text/html") is F.HTML
    assert detect_format("notes.txt", b"# x", "text/html") is F.TEXT  # the extension wins


def test_a_pdf_is_known_by_its_header_whatever_its_name():
    pdf = text_pdf([["hello"]])
    assert detect_format("report.pdf", pdf[:64]) is F.PDF
    assert detect_format("report.txt", pdf[:64]) is F.PDF
    assert detect_format("blob", b"\n\n" + pdf[:64], "application/octet-stream") is F.PDF


def test_a_pdf_without_its_header_is_unreadable():
    with pytest.raises(UnreadableDocument, match="no %PDF- header"):
        detect_format("report.pdf", b"PK\x03\x04 a zip")
    with pytest.raises(UnreadableDocument, match="no %PDF- header"):
        detect_format("upload", b"hello", "application/pdf")


def test_other_types_are_unsupported_and_the_message_lists_what_is_read():
    with pytest.raises(UnsupportedDocument) as caught:
        detect_format("deck.pptx", b"PK\x03\x04")
    assert caught.value.code == "unsupported_document"
    for named in (".pptx files", "plain text", ".txt", "Markdown", ".md", "HTML", ".html",
                  "PDF", "source code", ".py", ".go"):
        assert named in str(caught.value)
    with pytest.raises(UnsupportedDocument, match="image/png"):
        detect_format("upload", b"\x89PNG\r\n\x1a\n", "image/png")
    with pytest.raises(UnsupportedDocument, match="unknown"):
        detect_format("blob", b"\x89PNG\r\n\x1a\n\0\0")


def test_a_binary_file_named_as_text_is_unreadable():
    with pytest.raises(UnreadableDocument, match="NUL byte at offset 4") as caught:
        detect_format("notes.txt", b"ELF\x7f\0\0\x01")
    assert caught.value.code == "unreadable_document"
    with pytest.raises(UnreadableDocument, match="not UTF-8 text"):
        detect_format("notes.md", b"caf\xe9 latin-1")


def test_a_head_may_end_inside_a_character_and_may_start_with_a_bom():
    head = "\ufeffnaïve café ✓".encode()
    assert detect_format("notes.txt", head[:-1]) is F.TEXT
    assert detect_format("notes.txt", b"\xef\xbb\xbfplain") is F.TEXT
