"""Moving a whole store into a file and back (issue 30 item 6; ``docs/operations.md``,
"Moving between stores"): the engine of ``vancetope admin export`` and ``import``, over the
transfer port (``store.transfer.TransferStore``).

The file is JSON Lines (gzip when its name ends in ``.gz``; ``-`` streams through stdout or
stdin)::

    {"format": "vancetope-export", "formatVersion": 1, "recordForm": 1, "source": {...},
     "createdAt": "...", "kinds": ["tenants", ...]}
    {"kind": "tenants", "record": {...}}          one line per record, kind by kind
    {"checkpoint": "tenants", "after": "..."}     after each page: where a resume goes on
    {"end": "tenants", "count": 2, "digest": "..."}
    ...
    {"done": true, "count": 1234, "digest": "..."}

Every line is canonical JSON (sorted keys, no spaces, UTF-8), so two exports of the same
data hold the same record, ``end`` and ``done`` lines byte for byte, in the same order on
SQLite and PostgreSQL; the header (the time, the source) and the checkpoints (the source's
cursors, one per page) are bookkeeping. A kind's digest is the sum of the SHA-256 of its
record lines modulo 2**256, so it does not depend on their order (MongoDB's may differ);
the ``done`` digest is the SHA-256 of the kinds' (name, count, digest).

What is atomic: an export to a path is written under ``PATH.partial`` (mode 0600: the file
holds settings and token hashes) and renamed to ``PATH`` once whole; after an interruption,
``resume`` keeps the partial file up to its last checkpoint and goes on from that cursor.
An import writes each page in one ``import_records`` call (one transaction on the SQL
stores) and checks each kind's count and digest when its ``end`` line comes, so a damaged
or cut file fails at its first bad kind with the pages before it written; run again with
``resume``, which skips the records already there. At the end the destination is read back
and its counts and digests compared with the file's.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol, cast

from vancetope_brain.errors import Conflict, InvalidInput, RuntimeFailure
from vancetope_brain.store.backend import Backend
from vancetope_brain.store.transfer import KIND_BY_NAME, KINDS, RECORD_FORM, TransferStore

FORMAT = "vancetope-export"
FORMAT_VERSION = 1
"""The file format's version; an import refuses any other."""
EXPORT_PAGE = 1000
"""Records per ``export_page`` call (``--page``), and so per checkpoint."""
IMPORT_PAGE = 500
"""Records per ``import_records`` call: one transaction each on the SQL stores."""
PROGRESS_SECONDS = 5.0
"""How often a long kind reports its count while it runs."""

class Writable(Protocol):
    def write(self, data: bytes, /) -> int: ...


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...

    def readline(self, size: int = -1, /) -> bytes: ...


Notes = Callable[[str], None]
"""Where progress goes (the CLI: stderr, nothing with ``--quiet``)."""


def canonical(value: Any) -> bytes:
    """One line of the file, without its newline: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


@dataclass
class Tally:
    """A kind's count and order-independent digest (the sum of its lines' SHA-256)."""

    count: int = 0
    total: int = 0

    def add(self, line: bytes) -> None:
        self.count += 1
        self.total = (self.total + int.from_bytes(hashlib.sha256(line).digest())) % 2**256

    def merge(self, other: Tally) -> None:
        self.count += other.count
        self.total = (self.total + other.total) % 2**256

    @property
    def digest(self) -> str:
        return f"{self.total:064x}"


@dataclass
class Summary:
    """Counts and digests per kind, in the file's kind order."""

    kinds: dict[str, Tally] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(t.count for t in self.kinds.values())

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical(
            [[name, t.count, t.digest] for name, t in self.kinds.items()])).hexdigest()

    def differences(self, file: Summary) -> list[str]:
        """Kinds whose count or digest differ from the ``file``'s, each with both counts."""
        found = []
        for name in dict.fromkeys([*self.kinds, *file.kinds]):
            mine, theirs = self.kinds.get(name, Tally()), file.kinds.get(name, Tally())
            if mine != theirs:
                found.append(f"{name} ({mine.count} here, {theirs.count} in the file)")
        return found


def record_line(kind: str, record: dict[str, Any]) -> bytes:
    return canonical({"kind": kind, "record": record})


def source_of(backend: Backend) -> dict[str, Any]:
    """The header's ``source``: the backend's kind and its schema version (None: per record)."""
    return {"backend": type(backend).__name__.removesuffix("Backend").lower(),
            "schemaVersion": backend.schema_version()}


class Progress:
    """A kind's count on ``notes`` every ``PROGRESS_SECONDS`` while it runs, and at its end."""

    def __init__(self, notes: Notes | None, verb: str) -> None:
        self._notes, self._verb = notes, verb
        self._last = time.monotonic()

    def running(self, kind: str, count: int) -> None:
        if self._notes and time.monotonic() - self._last >= PROGRESS_SECONDS:
            self._last = time.monotonic()
            self._notes(f"{kind}: {count} {self._verb} so far")

    def ended(self, kind: str, count: int) -> None:
        if self._notes:
            self._last = time.monotonic()
            self._notes(f"{kind}: {count} {self._verb}")


# --- export ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    """Where an export goes on: kind ``index`` of ``KINDS``, after ``cursor``; ``ended``: that
    kind's last page is written (its ``end`` line is next)."""

    index: int = 0
    cursor: str | None = None
    ended: bool = False


def _pages(store: TransferStore, kind: str, after: str | None, page: int
           ) -> Iterator[tuple[list[dict[str, Any]], str | None]]:
    """The kind's pages after ``after``, each with the cursor after it (None: the last)."""
    while True:
        records, after = store.export_page(kind, after, page)
        yield records, after
        if after is None:
            return


def tally_store(store: TransferStore, page: int = EXPORT_PAGE) -> Summary:
    """The store's counts and digests, read as an export reads them (no file)."""
    summary = Summary()
    for kind in KINDS:
        tally = summary.kinds[kind.name] = Tally()
        for records, _ in _pages(store, kind.name, None, page):
            for record in records:
                tally.add(record_line(kind.name, record))
    return summary


def write_export(store: TransferStore, out: Writable, *, page: int = EXPORT_PAGE,
                 start: Position = Position(), summary: Summary | None = None,
                 notes: Notes | None = None) -> Summary:
    """Write every kind from ``start`` on (the header is the caller's), then the ``done``
    line; ``summary`` holds what the file already has before ``start``."""
    summary = summary or Summary()
    progress = Progress(notes, "exported")
    for index in range(start.index, len(KINDS)):
        name = KINDS[index].name
        tally = summary.kinds.setdefault(name, Tally())
        here = start if index == start.index else Position(index)
        for records, after in () if here.ended else _pages(store, name, here.cursor, page):
            for record in records:
                line = record_line(name, record)
                tally.add(line)
                out.write(line + b"\n")
            out.write(canonical({"checkpoint": name, "after": after}) + b"\n")
            progress.running(name, tally.count)
        out.write(canonical({"end": name, "count": tally.count, "digest": tally.digest}) + b"\n")
        progress.ended(name, tally.count)
    out.write(canonical({"done": True, "count": summary.count, "digest": summary.digest})
              + b"\n")
    return summary


def header(source: dict[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, "formatVersion": FORMAT_VERSION, "recordForm": RECORD_FORM,
            "source": source, "kinds": [kind.name for kind in KINDS],
            "createdAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


@dataclass(frozen=True)
class Exported:
    """An export's result: its summary, and whether the file was complete already."""

    summary: Summary
    already_complete: bool = False


def export_store(store: TransferStore, source: dict[str, Any], path: str, *,
                 page: int = EXPORT_PAGE, resume: bool = False,
                 notes: Notes | None = None) -> Exported:
    """Export the whole store to ``path`` (``-``: stdout), or with ``resume`` finish the
    interrupted export whose ``PATH.partial`` is there."""
    if page < 1:
        raise InvalidInput(f"--page must be at least 1, not {page}")
    if path == "-":
        if resume:
            raise InvalidInput("--resume needs the export's PATH: an export to stdout "
                               "cannot be resumed, run it again")
        out = sys.stdout.buffer
        try:
            out.write(canonical(header(source)) + b"\n")
            summary = write_export(store, out, page=page, notes=notes)
            out.flush()
        except BrokenPipeError:
            raise RuntimeFailure("the export's reader stopped before its end (a closed "
                                 "pipe): run it again") from None
        return Exported(summary)
    final, partial = Path(path), Path(path + ".partial")
    if resume and not partial.exists():
        if final.exists():
            return Exported(_finished(final), already_complete=True)
        if notes:
            notes(f"no {partial.name} to resume: exporting from the start")
        resume = False
    kept: int | None = None
    with _stopped(partial):
        if not resume:
            with _writer(partial) as out:
                out.write(canonical(header(source)) + b"\n")
                summary = write_export(store, out, page=page, notes=notes)
        else:
            start, summary, kept = _resume_point(partial, source)
            if kept is not None:  # else: whole, not renamed yet
                if notes:
                    notes(f"resuming {partial} at {KINDS[start.index].name}, after "
                          f"{summary.count} records")
                with _writer(partial, keep=kept) as out:
                    summary = write_export(store, out, page=page, start=start,
                                           summary=summary, notes=notes)
        os.replace(partial, final)
    return Exported(summary, already_complete=resume and kept is None)


@contextmanager
def _stopped(partial: Path) -> Iterator[None]:
    """Say how to go on when the store or the disk fails an export to a path."""
    go_on = f"the export so far is kept in {partial}: run the same command with --resume"
    try:
        yield
    except RuntimeFailure as e:
        raise type(e)(f"{e}; {go_on} once the store answers") from e
    except OSError as e:
        raise RuntimeFailure(f"{e.filename or partial}: {e.strerror}; {go_on} once that is "
                             "fixed") from e


@contextmanager
def _writer(partial: Path, keep: int | None = None) -> Iterator[Writable]:
    """The partial file to write (mode 0600; gzip by the name), synced when closed; with
    ``keep``, its first ``keep`` bytes (uncompressed) stay and writes go after them."""
    if not partial.name.removesuffix(".partial").endswith(".gz"):
        if keep is not None:
            os.truncate(partial, keep)
        with _create(partial, append=keep is not None) as raw:
            yield raw
        return
    # A gzip stream is written whole again: the kept text first, into a new file that takes
    # the partial file's place once closed (interrupted, the partial file is still there).
    target = partial if keep is None else partial.with_name(partial.name + ".new")
    # No name or time in the gzip header: the same data makes the same file.
    with _create(target, append=False) as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        if keep is not None:
            with open(partial, "rb") as old, gzip.GzipFile(fileobj=old, mode="rb") as text:
                _copy(text, out, keep)
        yield out
    if keep is not None:
        os.replace(target, partial)


@contextmanager
def _create(path: Path, *, append: bool) -> Iterator[IO[bytes]]:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)  # a file that was there (resumed, or replaced) keeps its own mode
    with os.fdopen(fd, "ab" if append else "wb") as raw:
        yield raw
        raw.flush()
        os.fsync(raw.fileno())


def _copy(source: Readable, out: Writable, size: int) -> None:
    while size:
        chunk = source.read(min(size, 1 << 20))
        out.write(chunk)
        size -= len(chunk)


def _finished(final: Path) -> Summary:
    """The summary of a complete export file, from its ``end`` lines."""
    summary = Summary()
    with _reader(str(final)) as lines:
        for number, line in lines:
            entry = _parse(line, number, lines.name)
            if "end" in entry:
                summary.kinds[entry["end"]] = Tally(entry["count"], int(entry["digest"], 16))
            elif entry.get("done"):
                return summary
    raise InvalidInput(f"{final} ends before its done line: it is not a complete export; "
                       "export again")


def _resume_point(partial: Path, source: dict[str, Any]
                  ) -> tuple[Position, Summary, int | None]:
    """Read a partial export: its summary up to its last checkpoint, the position after it
    and the offset (in its uncompressed text) to keep; the offset is None when the file
    reached its ``done`` line (whole, not renamed yet)."""
    summary, pending = Summary(), Tally()
    position: Position | None = None
    kept = 0
    # A cut line, and any after the last checkpoint, are written again.
    with _reader(str(partial)) as lines:
        for number, line in lines:
            entry = _parse(line, number, partial.name)
            if number == 1:
                _check_header(entry, partial.name)
                _check_source(entry["source"], source, partial.name)
                position, kept = Position(), lines.offset
            elif "kind" in entry:
                pending.add(line[:-1])
            elif "checkpoint" in entry:
                name = entry["checkpoint"]
                summary.kinds.setdefault(name, Tally()).merge(pending)
                pending = Tally()
                position = Position(_index(name, partial.name), entry["after"],
                                    entry["after"] is None)
                kept = lines.offset
            elif entry.get("done"):
                return Position(), summary, None
    if position is None:
        raise InvalidInput(f"{partial} has no complete header: export again without --resume")
    return position, summary, kept


def _check_source(found: dict[str, Any], source: dict[str, Any], name: str) -> None:
    if found != source:
        raise InvalidInput(
            f"{name} was exported from a {found.get('backend')} store at schema version "
            f"{found.get('schemaVersion')}, this is {source['backend']} at "
            f"{source['schemaVersion']}: resume on the store the export started from "
            "(VANCETOPE_STORE_URL), or export again without --resume")


def _index(name: str, file: str) -> int:
    for index, kind in enumerate(KINDS):
        if kind.name == name:
            return index
    raise InvalidInput(f"{file} names a kind this server does not know: {name!r}")


# --- reading --------------------------------------------------------------------------------


class _Lines:
    """A file's lines (each with its newline), numbered from 1; ``offset``: the uncompressed
    bytes up to the end of the last line given; ``cut``: the file ended inside a line, or its
    gzip stream ended early (the lines stop before it)."""

    def __init__(self, stream: Readable, name: str) -> None:
        self._stream, self.name = stream, name
        self.offset = 0
        self.cut = False

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        number = 0
        while True:
            try:
                line = self._stream.readline()
            except EOFError:
                self.cut = True
                return
            except (gzip.BadGzipFile, zlib.error) as e:
                raise InvalidInput(f"{self.name} is damaged: its gzip data does not read "
                                   f"({e})") from None
            if not line:
                return
            if not line.endswith(b"\n"):
                self.cut = True
                return
            number += 1
            self.offset += len(line)
            yield number, line


@contextmanager
def _reader(path: str) -> Iterator[_Lines]:
    """The lines of ``path`` (``-``: stdin), gunzipped when it starts as gzip does."""
    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
        name = "the input"
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as e:
            raise InvalidInput(f"cannot read {path}: {e.strerror}") from e
        name = path
    try:
        buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(cast(Any, raw))
        if buffered.peek(2)[:2] == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=buffered, mode="rb") as unzipped:
                yield _Lines(unzipped, name)
        else:
            yield _Lines(buffered, name)
    finally:
        if path != "-":
            raw.close()


def _parse(line: bytes, number: int, name: str) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except ValueError:
        entry = None
    if not isinstance(entry, dict):
        raise InvalidInput(f"{name}, line {number}, is not a line of an export: the file is "
                           "damaged")
    return entry


def _check_header(entry: dict[str, Any], name: str) -> None:
    if entry.get("format") != FORMAT:
        raise InvalidInput(f"{name} is not a Vancetope export (its first line is not the "
                           f"header of format {FORMAT!r})")
    if entry.get("formatVersion") != FORMAT_VERSION or entry.get("recordForm") != RECORD_FORM:
        raise InvalidInput(
            f"{name} is an export of format version {entry.get('formatVersion')}, record "
            f"form {entry.get('recordForm')}; this server reads format version "
            f"{FORMAT_VERSION}, record form {RECORD_FORM}: import it with the Vancetope "
            "version that exported it")
    kinds = entry.get("kinds")
    if not isinstance(kinds, list) or kinds != [k.name for k in KINDS if k.name in kinds]:
        unknown = [k for k in kinds or () if k not in KIND_BY_NAME]
        raise InvalidInput(
            f"{name} holds kinds this server does not know ({', '.join(map(str, unknown))}): "
            "import it with the Vancetope version that exported it" if unknown else
            f"{name} has a damaged header (its kinds are not a list in import order)")


# --- import ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Imported:
    """An import's result: the file's summary, the records written (the others were there
    already), and the kinds where the destination, read back, differs from the file."""

    summary: Summary
    written: int
    differences: list[str]


def import_store(store: TransferStore, path: str, *, resume: bool = False,
                 notes: Notes | None = None) -> Imported:
    """Import the export at ``path`` (``-``: stdin) into an empty store, or with ``resume``
    into one that holds part of it; then read the store back and compare."""
    if not resume and not store.is_empty():
        raise Conflict("the destination store is not empty: import into a new one (set "
                       "VANCETOPE_STORE_URL to it and run `vancetope admin migrate`), or "
                       "add --resume to finish an interrupted import of this file")
    with _reader(path) as lines:
        importer = _Importer(store, lines.name, notes)
        try:
            importer.read(lines)
        except RuntimeFailure as e:
            raise type(e)(f"{e}; the import stopped at line {importer.line}: run it again "
                          "with --resume once the store answers (the records there are "
                          "skipped)") from e
    if notes:
        read = importer.summary.count
        notes(f"imported {read} records ({importer.written} written, "
              f"{read - importer.written} there already); verifying: reading the store back")
    check = tally_store(store)
    return Imported(importer.summary, importer.written, check.differences(importer.summary))


class _Importer:
    """Reads an export's lines, writes its records page by page and checks each kind."""

    def __init__(self, store: TransferStore, name: str, notes: Notes | None) -> None:
        self._store, self._name = store, name
        self._progress = Progress(notes, "imported")
        self.summary = Summary()
        self.written = 0
        self.pages = 0
        """``import_records`` calls made: the destination holds part of the file."""
        self.line = 0
        self._expected: list[str] = []
        self._kind: str | None = None
        self._tally = Tally()
        self._page: list[dict[str, Any]] = []

    def read(self, lines: _Lines) -> None:
        for self.line, line in lines:
            entry = _parse(line, self.line, self._name)
            if self.line == 1:
                _check_header(entry, self._name)
                self._expected = list(entry["kinds"])
            elif "kind" in entry:
                self._record(entry, line[:-1])
            elif "checkpoint" in entry:
                self._begin(entry["checkpoint"])
            elif "end" in entry:
                self._end(entry)
            elif entry.get("done") is True:
                self._done(entry)
                return
            else:
                self.fail(f"line {self.line} is not a line of an export")
        if self.line == 0 and not lines.cut:
            raise InvalidInput(f"{self._name} is empty: not an export")
        self.fail(f"ends early, after line {self.line} (it was cut)")

    def fail(self, what: str) -> None:
        partial = (" The destination holds the records before it: fix the file (or export "
                   "again) and run the import again with --resume, or drop the destination "
                   "and start over." if self.pages else "")
        raise InvalidInput(f"{self._name} {what}: the file is damaged.{partial}")

    def _begin(self, kind: str) -> None:
        """Make ``kind`` the current one: it is, or it is the next the header lists."""
        if kind == self._kind:
            return
        if self._kind is not None or not self._expected or self._expected[0] != kind:
            self.fail(f"has a line of {kind!r} on line {self.line}, where "
                      f"{self._kind or (self._expected or ['its done line'])[0]!r} "
                      "was to go on")
        self._expected.pop(0)
        self._kind, self._tally = kind, Tally()

    def _record(self, entry: dict[str, Any], line: bytes) -> None:
        kind, record = entry["kind"], entry.get("record")
        self._begin(kind)
        if not isinstance(record, dict) or set(record) != set(KIND_BY_NAME[kind].columns):
            self.fail(f"has a record of {kind} on line {self.line} without the columns of "
                      "its record form")
        self._tally.add(line)
        self._page.append(record)  # type: ignore[arg-type]
        if len(self._page) >= IMPORT_PAGE:
            self._flush()
            self._progress.running(kind, self._tally.count)

    def _flush(self) -> None:
        if self._page and self._kind is not None:
            self.pages += 1
            self.written += self._store.import_records(self._kind, self._page)
            self._page = []

    def _end(self, entry: dict[str, Any]) -> None:
        kind = entry["end"]
        self._begin(kind)
        self._flush()
        if (entry.get("count"), entry.get("digest")) != (self._tally.count,
                                                          self._tally.digest):
            self.fail(f"holds {self._tally.count} records of {kind} whose digest is "
                      f"{self._tally.digest}, its end line (line {self.line}) says "
                      f"{entry.get('count')} with digest {entry.get('digest')}")
        self.summary.kinds[kind] = self._tally
        self._kind = None
        self._progress.ended(kind, self._tally.count)

    def _done(self, entry: dict[str, Any]) -> None:
        if self._kind is not None or self._expected:
            self.fail(f"ends on line {self.line} before the end of "
                      f"{self._kind or self._expected[0]}")
        if (entry.get("count"), entry.get("digest")) != (self.summary.count,
                                                          self.summary.digest):
            self.fail(f"holds {self.summary.count} records in all, its done line says "
                      f"{entry.get('count')}, or their digests differ")
