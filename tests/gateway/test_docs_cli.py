"""``vancetope docs add|list|rm`` against a served embedded gateway: the upload over REST, the
status over the WebSocket until READY or FAILED, and what a refusal tells the user to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from vancetope_gateway.cli import main


@pytest.fixture(scope="module")
def where(embedded, served):
    return ["--url", f"ws://{served}/ws",
            "--token", embedded.brain.identity.issue_token("acme", "ada")]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_docs_add_waits_for_ready_then_list_and_rm(tmp_path: Path, capsys, where):
    notes = tmp_path / "ferns.md"
    notes.write_text("# Ferns\n\nFerns reproduce by spores.\n")
    code, out, err = run(capsys, "docs", "add", str(notes), *where)
    assert code == 0, err
    assert "ferns.md: READY, 1 chunk " in out
    assert f"ferns.md: uploaded {notes.stat().st_size} B" in err
    code, out, err = run(capsys, "docs", "add", str(notes), *where)
    assert code == 0 and "unchanged" in err

    code, out, _ = run(capsys, "docs", "list", *where)
    row = next(line for line in out.splitlines() if line.endswith("ferns.md"))
    assert row.split()[1] == "READY"
    code, out, _ = run(capsys, "docs", "rm", "ferns.md", *where)
    assert code == 0 and "deleted ferns.md" in out
    code, out, _ = run(capsys, "docs", "list", *where)
    assert "ferns.md" not in out


def test_docs_add_says_what_to_do_about_a_refused_or_failed_file(tmp_path: Path, capsys,
                                                                  where):
    image = tmp_path / "photo.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\nthis is no PDF body")
    code, _, err = run(capsys, "docs", "add", str(image), str(broken), *where)
    assert code == 1
    assert "unsupported_document" in err and "convert it to text, Markdown, HTML or PDF" in err
    assert "broken.pdf: FAILED (unreadable_document)" in err and "add it again" in err
    code, _, err = run(capsys, "docs", "add", str(image), "--project", "nope", *where)
    assert code == 1 and "check --project" in err
    code, _, err = run(capsys, "docs", "rm", "never-added.txt", *where)
    assert code == 1 and "see `vancetope docs list`" in err


def test_docs_with_a_bad_token_says_where_the_token_came_from(capsys, served):
    code, _, err = run(capsys, "docs", "list", "--url", f"ws://{served}/ws", "--token", "vt_x")
    assert code == 2 and "check the token passed with --token" in err
