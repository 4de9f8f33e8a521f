"""Small PDFs built by hand for the knowledge tests (reportlab is not a dependency): each
page shows its lines in Helvetica; pypdf's writer adds outlines and encryption."""

from __future__ import annotations

import io
import zlib

from pypdf import PdfReader, PdfWriter


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _assemble(objects: list[bytes]) -> bytes:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


def _stream(content: bytes, *, compress: bool = False) -> bytes:
    if compress:
        content = zlib.compress(content, 9)
        return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content \
            + b"\nendstream"
    return b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"


def text_pdf(pages: list[list[str]]) -> bytes:
    """A PDF whose page i shows the lines ``pages[i]``."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, lines in enumerate(pages):
        shown = " ".join(f"({_escape(line)}) Tj 0 -14 Td" for line in lines)
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>"
                       .encode())
        objects.append(_stream(f"BT /F1 12 Tf 72 720 Td {shown} ET".encode("latin-1")))
    return _assemble(objects)


def bomb_pdf(inflated_bytes: int) -> bytes:
    """A one-page PDF whose content stream is small compressed and ``inflated_bytes`` big."""
    content = b"BT /F1 12 Tf 72 720 Td " + b"(A) Tj " * (inflated_bytes // 7) + b"ET"
    return _assemble([b"<< /Type /Catalog /Pages 2 0 R >>",
                      b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
                      b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
                      b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                      b"/Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
                      _stream(content, compress=True)])


def rewritten(pdf: bytes, *, outline: tuple[tuple[str, int, str | None], ...] = (),
              password: str | None = None) -> bytes:
    """``pdf`` with outline entries (title, 0-based page, parent title or None) and, with
    ``password``, encrypted so that it needs it."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    items = {}
    for title, page, parent in outline:
        items[title] = writer.add_outline_item(title=title, page_number=page,
                                               parent=items.get(parent or ""))
    if password is not None:
        writer.encrypt(user_password=password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
