"""parse for the text formats: sections from headings and definitions, exact line ranges,
and passages cut at paragraph, line and word boundaries."""

from __future__ import annotations

import pytest

from vancetope_brain.errors import DocumentTooLarge, UnreadableDocument
from vancetope_brain.knowledge.chunking import CHUNK_CHARS
from vancetope_brain.knowledge.code import code_lines
from vancetope_brain.knowledge.parsing import parse
from vancetope_brain.models.knowledge import MAX_DOCUMENT_BYTES
from vancetope_brain.models.knowledge import DocumentFormat as F


def cited(data: str | bytes, fmt: F, name: str = "doc", **bounds):
    raw = data.encode() if isinstance(data, str) else data
    return [(p.section, p.line_start, p.line_end, p.text)
            for p in parse(raw, fmt, name=name, **bounds).passages]


def test_plain_text_passages_keep_their_lines():
    text = "first paragraph\nstill first\n\n\nsecond\r\nparagraph\n"
    assert cited(text, F.TEXT) == [("", 1, 6, "first paragraph\nstill first\n\nsecond\nparagraph")]
    assert cited(text, F.TEXT, chunk_chars=30) == [("", 1, 2, "first paragraph\nstill first"),
                                                   ("", 5, 6, "second\nparagraph")]


def test_a_utf8_bom_is_not_text():
    assert cited(b"\xef\xbb\xbfhello", F.TEXT) == [("", 1, 1, "hello")]


def test_markdown_headings_make_the_section_path():
    text = "\n".join([
        "---", "title: front matter", "---",                 # 1-3
        "Intro before any heading.",                          # 4
        "# Install",                                          # 5
        "Get it.",                                            # 6
        "## Linux ##",                                        # 7
        "apt install it",                                     # 8
        "```sh", "# not a heading", "```",                    # 9-11
        "Setext Title", "============",                       # 12-13
        "under setext", "",                                   # 14-15
        "Sub part", "--------",                               # 16-17
        "deep",                                               # 18
        "- a list item", "---",                               # 19-20 (a rule, not a heading)
        "#hashtag is text",                                   # 21
    ])
    got = [(section, start, end) for section, start, end, _ in cited(text, F.MARKDOWN)]
    assert got == [("", 1, 4), ("Install", 5, 6), ("Install › Linux", 7, 11),
                   ("Setext Title", 12, 14), ("Setext Title › Sub part", 16, 21)]


def test_markdown_passages_never_span_sections():
    text = "# A\n" + "word " * 10 + "\n# B\ntail"
    assert [p[0] for p in cited(text, F.MARKDOWN)] == ["A", "B"]


def test_html_text_has_no_markup_and_headings_make_sections():
    page = "\n".join([
        "<!doctype html><html><head><title>Tab title</title>",          # 1
        "<style>p { color: red }</style>",                               # 2
        "<script>alert('x'); document.write('<h1>fake</h1>')</script>",   # 3
        "</head><body>",                                                 # 4
        "<h1>Guide &amp; <em>notes</em></h1>",                           # 5
        "<p>Shown &lt;script&gt;text&lt;/script&gt; and &amp;lt;b&gt;",  # 6
        "over two lines</p><!-- a comment -->",                          # 7
        "<h2>Part <b>two</b></h2><ul><li>one</li><li>two</li></ul>",     # 8
        "<pre>code  kept\n  indented</pre>",                             # 9-10
        "<table><tr><td>a</td><td>b</td></tr></table>",                  # 11
        "<h1>Second</h1><p>x<br>y</p><svg><text>drawn</text></svg>",     # 12
        "</body></html>",
    ])
    passages = cited(page, F.HTML)
    assert [(s, a, b) for s, a, b, _ in passages] == [
        ("Guide & notes", 5, 7), ("Guide & notes › Part two", 8, 11), ("Second", 12, 12)]
    assert passages[0][3] == ("Guide & notes\n"
                              "Shown <script>text</script> and &lt;b> over two lines")
    assert passages[1][3] == "Part two\none\ntwo\ncode  kept\n  indented\na b"
    assert passages[2][3] == "Second\nx\ny"
    joined = "\n".join(p[3] for p in passages)
    for absent in ("alert", "fake", "color", "Tab title", "comment", "drawn", "<em>", "<p>",
                   "<h1>", "<li>", "<b>two"):
        assert absent not in joined


def test_html_entities_are_decoded_once():
    """``&lt;script&gt;`` is the text ``<script>`` (what a browser shows); it is never read
    as a tag, and ``&amp;lt;`` is not decoded a second time."""
    passages = cited("<p>&lt;script&gt;alert(1)&lt;/script&gt; &amp;lt;i&amp;gt;</p>", F.HTML)
    assert passages == [("", 1, 1, "<script>alert(1)</script> &lt;i&gt;")]


@pytest.mark.parametrize(("name", "source", "sections"), [
    ("m.py", "import os\n\n@cache\ndef load(x):\n    def inner():\n        pass\n\n"
             "class Store:\n    def get(self):\n        return 1\nVALUE = 2\n",
     ["", "", "", "load", "load", "load", "load", "Store", "Store", "Store", ""]),
    ("m.go", "package m\n\nfunc (s *S) Run() {\n\treturn\n}\n\ntype T struct {\n}\nvar x = 1\n",
     ["", "", "Run", "Run", "Run", "", "T", "T", ""]),
    ("m.ts", "import x from 'x'\nexport async function load() {\n}\n"
             "export const handler = async (e) => {\n}\n",
     ["", "load", "load", "handler", "handler", ""]),
    ("m.rs", "use std::io;\npub fn main() {\n}\nimpl Display for Point {\n}\n",
     ["", "main", "main", "Display for Point", "Display for Point", ""]),
    ("m.c", "#include <stdio.h>\nint add(int a, int b)\n{\n  return a + b;\n}\n"
            "int prototype(void);\n",
     ["", "add", "add", "add", "add", "", ""]),
    ("m.sql", "CREATE TABLE IF NOT EXISTS users (\n  id int\n);\nselect 1;\n",
     ["users", "users", "users", "", ""]),
    ("m.toml", "[tool.ruff]\nline-length = 100\n[project]\nname = 'x'\n",
     ["tool.ruff", "tool.ruff", "project", "project", "project"]),
    ("m.json", '{\n  "def": 1\n}\n', ["", "", "", ""]),
])
def test_code_lines_are_named_after_their_top_level_definition(name, source, sections):
    assert [line.section for line in code_lines(source, name=name)][:len(sections)] == sections


def test_code_passages_carry_their_definition():
    source = "import os\n\ndef load():\n    return 1\n\nclass Store:\n    pass\n"
    assert cited(source, F.CODE, name="m.py") == [
        ("", 1, 1, "import os"), ("load", 3, 4, "def load():\n    return 1"),
        ("Store", 6, 7, "class Store:\n    pass")]


def test_passages_are_cut_at_paragraphs_then_lines_then_words():
    paragraph = " ".join(["word"] * 50)  # 249 characters
    text = "\n\n".join([paragraph] * 3) + "\n" + "\n".join(["line of text"] * 40)
    passages = parse(text.encode(), F.TEXT, name="t", chunk_chars=300).passages
    assert all(len(p.text) <= 300 for p in passages)
    assert passages[0].text == paragraph and (passages[0].line_start, passages[0].line_end) \
        == (1, 1)
    for p in passages:
        assert not p.text.startswith(("ord", " ")) and not p.text.endswith(("wor", " "))
    assert "".join(p.text.replace("\n", "") for p in passages).replace(" ", "") \
        == text.replace("\n", "").replace(" ", "")


def test_one_long_line_is_cut_between_words_and_one_long_word_inside_it():
    word = "x" * (CHUNK_CHARS + 100)
    line = "short words here " + word + " tail"
    passages = parse(line.encode(), F.TEXT, name="t").passages
    assert [p.text for p in passages] == ["short words here", word[:CHUNK_CHARS],
                                          word[CHUNK_CHARS:] + " tail"]
    assert {(p.line_start, p.line_end) for p in passages} == {(1, 1)}


def test_an_empty_or_blank_document_has_no_text():
    for data, fmt in ((b"", F.TEXT), (b"\n \n\t\n", F.MARKDOWN),
                      (b"<html><script>x()</script></html>", F.HTML)):
        with pytest.raises(UnreadableDocument, match="has no text"):
            parse(data, fmt, name="empty")


def test_bytes_that_are_not_utf8_text_are_unreadable():
    with pytest.raises(UnreadableDocument, match="NUL byte"):
        parse(b"text\0more", F.TEXT, name="t.txt")
    with pytest.raises(UnreadableDocument, match="not UTF-8"):
        parse(b"caf\xe9", F.MARKDOWN, name="t.md")


def test_too_many_passages_are_refused_naming_the_limit():
    text = "\n\n".join(f"paragraph {n}" for n in range(50))
    assert len(parse(text.encode(), F.TEXT, name="t", chunk_chars=12, max_chunks=50)
               .passages) == 50
    with pytest.raises(UnreadableDocument, match="more than 49 passages"):
        parse(text.encode(), F.TEXT, name="t", chunk_chars=12, max_chunks=49)


def test_a_file_over_the_size_cap_is_refused():
    with pytest.raises(DocumentTooLarge, match="20 MiB") as caught:
        parse(b"a" * (MAX_DOCUMENT_BYTES + 1), F.TEXT, name="big.txt")
    assert caught.value.code == "document_too_large"
