"""``vancetope admin docs add|list|rm`` on a temporary SQLite store: an add is indexed in the
admin process before it returns; refusals exit 2 with the stable code's message."""

from __future__ import annotations

from pathlib import Path

from tests.test_admin_cli import admin, store_url  # noqa: F401 (fixtures)


def test_admin_docs_add_list_rm(admin, tmp_path: Path):  # noqa: F811
    assert admin("tenant", "create", "Acme", "--id", "acme").code == 0
    guide = tmp_path / "guide.md"
    guide.write_text("# Setup\n\nTurn the crank twice.\n")
    added = admin("docs", "add", "--tenant", "acme", str(guide))
    assert added.code == 0 and added.out.startswith("doc_")
    assert "guide.md: READY, 1 chunk" in added.err
    again = admin("docs", "add", "--tenant", "acme", str(guide))
    assert again.out == added.out and "unchanged" in again.err

    listed = admin("docs", "list", "--tenant", "acme")
    assert listed.rows[0][:4] == [added.out.strip(), "READY", str(guide.stat().st_size), "1"]
    assert listed.rows[0][-1] == "guide.md"

    removed = admin("docs", "rm", "--tenant", "acme", "guide.md")
    assert removed.code == 0 and "deleted guide.md" in removed.err
    assert admin("docs", "list", "--tenant", "acme").rows == []


def test_admin_docs_refusals(admin, tmp_path: Path):  # noqa: F811
    admin("tenant", "create", "Acme", "--id", "acme")
    image = tmp_path / "photo.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    refused = admin("docs", "add", "--tenant", "acme", str(image))
    assert refused.code == 2 and ".png files are not read" in refused.err
    scanned = tmp_path / "scan.pdf"
    scanned.write_bytes(b"%PDF-1.4\ngarbage")
    failed = admin("docs", "add", "--tenant", "acme", str(scanned))
    assert failed.code == 2 and "scan.pdf: FAILED (unreadable_document)" in failed.err
    assert admin("docs", "list", "--tenant", "acme").rows[0][1] == "FAILED"
    assert admin("docs", "list", "--tenant", "acme", "--project", "nope").code == 2
    assert admin("docs", "rm", "--tenant", "acme", "missing.txt").code == 2
    assert admin("docs", "list", "--tenant", "umbrella").code == 2
