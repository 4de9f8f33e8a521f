"""The export file and its import (``services/transfer.py``) over an in-memory transfer port:
the format, canonical bytes whatever the page size, resuming a cut export, refusing a
non-empty destination, finishing a cut import with --resume, and a damaged, cut or foreign
file caught with a clear error. ``test_transfer_stores.py`` runs them on the real stores."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from vancetope_brain.errors import Conflict, InvalidInput, StoreError
from vancetope_brain.services.transfer import (
    FORMAT_VERSION,
    export_store,
    import_store,
    tally_store,
)
from vancetope_brain.store.transfer import KIND_BY_NAME, KINDS, RECORD_FORM, TransferStore

SOURCE = {"backend": "memory", "schemaVersion": 7}


class MemoryTransfer(TransferStore):
    """The port on lists: a kind's records in the order they were imported, the cursor the
    index of the next one; a record whose key is there already is skipped."""

    def __init__(self) -> None:
        self.kinds: dict[str, list[dict[str, Any]]] = {kind.name: [] for kind in KINDS}

    def export_page(self, kind: str, after: str | None, limit: int
                    ) -> tuple[list[dict[str, Any]], str | None]:
        start = int(after or 0)
        records = self.kinds[kind][start:start + limit]
        end = start + len(records)
        return records, str(end) if end < len(self.kinds[kind]) else None

    def import_records(self, kind: str, records: list[dict[str, Any]]) -> int:
        key = KIND_BY_NAME[kind].key
        there = {tuple(r[c] for c in key) for r in self.kinds[kind]}
        new = [r for r in records if tuple(r[c] for c in key) not in there]
        self.kinds[kind] += new
        return len(new)

    def is_empty(self) -> bool:
        return not any(self.kinds.values())


def _value(column: str, typ: str, i: int) -> Any:
    return {"text": f"{column}-{i:03d}-é☃\u2028\"q\"", "int": i * 7, "bool": i % 2 == 0,
            "json": {"n": i, "text": "line one\nline two ✓", "nested": {"b": [1, 2.5, None]}},
            "bytes": base64.b64encode(bytes([i, 0, 255])).decode()}[typ]


@pytest.fixture
def source() -> MemoryTransfer:
    """Records of every kind but one (an empty kind still has its checkpoint and end)."""
    store = MemoryTransfer()
    for n, kind in enumerate(KINDS[:-1]):
        store.import_records(kind.name, [{c: _value(c, t, i) for c, t in kind.columns.items()}
                                         for i in range(n % 5 + 1)])
    return store


def _export(store: TransferStore, path: Path, **options: Any) -> bytes:
    export_store(store, SOURCE, str(path), **options)
    return path.read_bytes()


def _lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def _content(data: bytes) -> bytes:
    """The record, end and done lines: what two exports of the same data share."""
    return b"".join(line + b"\n" for line in data.splitlines()[1:]
                    if not line.startswith(b'{"after"'))


def test_the_file_holds_a_header_every_kind_in_order_and_counts(source, tmp_path) -> None:
    data = _export(source, tmp_path / "x.jsonl", page=2)
    lines = _lines(data)
    assert lines[0]["format"] == "vancetope-export"
    assert (lines[0]["formatVersion"], lines[0]["recordForm"]) == (FORMAT_VERSION, RECORD_FORM)
    assert lines[0]["source"] == SOURCE
    assert lines[0]["kinds"] == [kind.name for kind in KINDS]
    ends = [line for line in lines if "end" in line]
    assert [e["end"] for e in ends] == [kind.name for kind in KINDS]
    assert [e["count"] for e in ends] == [len(source.kinds[k.name]) for k in KINDS]
    assert lines[-1]["done"] is True
    assert lines[-1]["count"] == sum(len(r) for r in source.kinds.values())
    # Canonical: sorted keys, no spaces, UTF-8 text (not \\u escapes).
    for raw in data.splitlines():
        assert raw == json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":"),
                                 ensure_ascii=False).encode()
    assert "é☃".encode() in data
    assert (tmp_path / "x.jsonl").stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "x.jsonl.partial").exists()


def test_an_export_imported_and_exported_again_is_the_same(source, tmp_path) -> None:
    first = _export(source, tmp_path / "a.jsonl")
    copy = MemoryTransfer()
    done = import_store(copy, str(tmp_path / "a.jsonl"))
    assert done.differences == []
    assert done.written == done.summary.count == sum(len(r) for r in source.kinds.values())
    assert copy.kinds == source.kinds
    second = _export(copy, tmp_path / "b.jsonl")
    assert second.splitlines()[1:] == first.splitlines()[1:]
    assert tally_store(copy).digest == _lines(first)[-1]["digest"]


def test_the_page_size_changes_only_the_checkpoints(source, tmp_path) -> None:
    one = _export(source, tmp_path / "one.jsonl", page=1)
    many = _export(source, tmp_path / "many.jsonl", page=1000)
    assert one.count(b'{"after"') > many.count(b'{"after"') == len(KINDS)
    assert _content(one) == _content(many)


def _cut_points(data: bytes) -> dict[str, int]:
    lines = data.splitlines(keepends=True)
    ends = [sum(map(len, lines[:n + 1])) for n in range(len(lines))]
    checkpoints = [end for end, line in zip(ends, lines, strict=True)
                   if line.startswith(b'{"after"')]
    records = [end for end, line in zip(ends, lines, strict=True)
               if line.startswith(b'{"kind"')]
    return {"after the header": ends[0], "mid-line": records[len(records) // 2] - 5,
            "after a checkpoint": checkpoints[len(checkpoints) // 2],
            "after a record": records[len(records) // 3],
            "after an end line": next(e for e, line in zip(ends, lines, strict=True)
                                      if line.startswith(b'{"count"')),
            "before the done line": ends[-2], "mid done line": ends[-1] - 3}


@pytest.mark.parametrize("cut", ["after the header", "mid-line", "after a checkpoint",
                                 "after a record", "after an end line", "before the done line",
                                 "mid done line"])
def test_a_resumed_export_is_the_uninterrupted_one(source, tmp_path, cut: str) -> None:
    path = tmp_path / "x.jsonl"
    whole = _export(source, path, page=2)
    path.unlink()
    (tmp_path / "x.jsonl.partial").write_bytes(whole[:_cut_points(whole)[cut]])
    done = export_store(source, SOURCE, str(path), page=2, resume=True)
    assert path.read_bytes() == whole  # the header, with its time, is the partial file's
    assert not (tmp_path / "x.jsonl.partial").exists()
    assert done.summary.digest == _lines(whole)[-1]["digest"]
    assert (done.already_complete, path.stat().st_mode & 0o777) == (False, 0o600)


def test_a_resumed_gzip_export_is_the_uninterrupted_one(source, tmp_path) -> None:
    path = tmp_path / "x.jsonl.gz"
    whole = _export(source, path, page=3)
    text = gzip.decompress(whole)
    assert text.startswith(b'{"createdAt"')
    cut = gzip.compress(text[:_cut_points(text)["mid-line"]], mtime=0)
    (tmp_path / "x.jsonl.gz.partial").write_bytes(cut[:len(cut) - 20])  # the stream cut too
    path.unlink()
    export_store(source, SOURCE, str(path), page=3, resume=True)
    assert gzip.decompress(path.read_bytes()) == text
    assert path.read_bytes() == whole


def test_resuming_a_finished_export_says_so(source, tmp_path) -> None:
    path = tmp_path / "x.jsonl"
    whole = _export(source, path)
    again = export_store(source, SOURCE, str(path), resume=True)
    assert again.already_complete and path.read_bytes() == whole
    assert again.summary.digest == _lines(whole)[-1]["digest"]
    # Whole but not renamed yet (stopped between the done line and the rename):
    path.rename(tmp_path / "x.jsonl.partial")
    again = export_store(source, SOURCE, str(path), resume=True)
    assert again.already_complete and path.read_bytes() == whole


def test_a_resume_refuses_another_store_or_no_header(source, tmp_path) -> None:
    path = tmp_path / "x.jsonl"
    whole = _export(source, path)
    (tmp_path / "x.jsonl.partial").write_bytes(whole[:whole.index(b"\n") + 1])
    with pytest.raises(InvalidInput, match="exported from a memory store.*export again"):
        export_store(source, {"backend": "sqlite", "schemaVersion": 7}, str(path),
                     resume=True)
    (tmp_path / "x.jsonl.partial").write_bytes(whole[:30])
    with pytest.raises(InvalidInput, match="no complete header: export again"):
        export_store(source, SOURCE, str(path), resume=True)


def test_an_import_refuses_a_store_that_is_not_empty(source, tmp_path) -> None:
    _export(source, tmp_path / "x.jsonl")
    with pytest.raises(Conflict, match="not empty.*--resume"):
        import_store(source, str(tmp_path / "x.jsonl"))


def test_an_import_cut_short_is_finished_by_resume(source, tmp_path) -> None:
    whole = _export(source, tmp_path / "x.jsonl", page=2)
    (tmp_path / "cut.jsonl").write_bytes(whole[:_cut_points(whole)["mid-line"]])
    copy = MemoryTransfer()
    with pytest.raises(InvalidInput, match="ends early.*holds the records before it.*--resume"):
        import_store(copy, str(tmp_path / "cut.jsonl"))
    assert not copy.is_empty()
    with pytest.raises(Conflict):
        import_store(copy, str(tmp_path / "x.jsonl"))
    done = import_store(copy, str(tmp_path / "x.jsonl"), resume=True)
    assert done.differences == [] and 0 < done.written < done.summary.count
    assert copy.kinds == source.kinds


def test_a_changed_byte_is_caught_by_the_digest(source, tmp_path) -> None:
    whole = _export(source, tmp_path / "x.jsonl")
    at = whole.index(b"-001-")  # inside a text column of a record
    (tmp_path / "bad.jsonl").write_bytes(whole[:at] + b"-002-" + whole[at + 5:])
    with pytest.raises(InvalidInput, match="digest.*the file is damaged"):
        import_store(MemoryTransfer(), str(tmp_path / "bad.jsonl"))


def test_a_dropped_record_or_a_lost_end_is_caught(source, tmp_path) -> None:
    whole = _export(source, tmp_path / "x.jsonl")
    lines = whole.splitlines(keepends=True)
    record = next(n for n, line in enumerate(lines) if line.startswith(b'{"kind":"users"'))
    (tmp_path / "bad.jsonl").write_bytes(b"".join(lines[:record] + lines[record + 1:]))
    with pytest.raises(InvalidInput, match="records of users.*end line.*damaged"):
        import_store(MemoryTransfer(), str(tmp_path / "bad.jsonl"))
    end = next(n for n, line in enumerate(lines) if b'"end":"users"' in line)
    (tmp_path / "bad.jsonl").write_bytes(b"".join(lines[:end] + lines[end + 1:]))
    with pytest.raises(InvalidInput, match="line of 'api_tokens'.*'users' was to go on"):
        import_store(MemoryTransfer(), str(tmp_path / "bad.jsonl"))


@pytest.mark.parametrize(("change", "error"), [
    ({"formatVersion": FORMAT_VERSION + 1}, "format version 2.*Vancetope version that "
                                            "exported it"),
    ({"recordForm": RECORD_FORM + 1}, "record form 2"),
    ({"format": "something-else"}, "not a Vancetope export"),
    ({"kinds": ["tenants", "spaceships"]}, "kinds this server does not know \\(spaceships\\)"),
])
def test_a_foreign_file_is_refused_before_anything_is_written(source, tmp_path, change,
                                                              error: str) -> None:
    whole = _export(source, tmp_path / "x.jsonl")
    head, _, rest = whole.partition(b"\n")
    (tmp_path / "other.jsonl").write_bytes(
        json.dumps({**json.loads(head), **change}).encode() + b"\n" + rest)
    copy = MemoryTransfer()
    with pytest.raises(InvalidInput, match=error):
        import_store(copy, str(tmp_path / "other.jsonl"))
    assert copy.is_empty()


def test_an_import_reads_gzip_by_its_bytes_and_says_what_is_not_an_export(source,
                                                                          tmp_path) -> None:
    _export(source, tmp_path / "x.jsonl.gz")
    (tmp_path / "renamed.jsonl").write_bytes((tmp_path / "x.jsonl.gz").read_bytes())
    assert import_store(MemoryTransfer(), str(tmp_path / "renamed.jsonl")).differences == []
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(InvalidInput, match="empty"):
        import_store(MemoryTransfer(), str(tmp_path / "empty.jsonl"))
    with pytest.raises(InvalidInput, match="cannot read"):
        import_store(MemoryTransfer(), str(tmp_path / "missing.jsonl"))


class Failing(MemoryTransfer):
    """Fails every call after ``calls`` calls, as a store that went away does."""

    def __init__(self, copy: MemoryTransfer, calls: int) -> None:
        super().__init__()
        self.kinds, self.calls = copy.kinds, calls

    def _call(self) -> None:
        self.calls -= 1
        if self.calls < 0:
            raise StoreError("the store is not answering")

    def export_page(self, kind: str, after: str | None, limit: int
                    ) -> tuple[list[dict[str, Any]], str | None]:
        self._call()
        return super().export_page(kind, after, limit)

    def import_records(self, kind: str, records: list[dict[str, Any]]) -> int:
        self._call()
        return super().import_records(kind, records)


def test_a_store_failing_mid_export_leaves_a_partial_file_to_resume(source, tmp_path) -> None:
    whole = _export(source, tmp_path / "whole.jsonl", page=2)
    path = tmp_path / "x.jsonl"
    with pytest.raises(StoreError, match="not answering; the export so far is kept in .*"
                                         "x.jsonl.partial: run the same command with --resume"):
        export_store(Failing(source, 9), SOURCE, str(path), page=2)
    assert not path.exists()
    export_store(source, SOURCE, str(path), page=2, resume=True)
    assert _content(path.read_bytes()) == _content(whole)


def test_a_store_failing_mid_import_is_finished_by_resume(source, tmp_path) -> None:
    _export(source, tmp_path / "x.jsonl")
    copy = MemoryTransfer()
    with pytest.raises(StoreError, match="stopped at line .*--resume"):
        import_store(Failing(copy, 4), str(tmp_path / "x.jsonl"))
    assert import_store(copy, str(tmp_path / "x.jsonl"), resume=True).differences == []
    assert copy.kinds == source.kinds
