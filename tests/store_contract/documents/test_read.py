"""Reading a document by position (``read_chunks``): the current chunks of a READY document
at a section, a page or a line range, in document order, capped; nothing of a document not
READY, nor of another project's or tenant's."""

from __future__ import annotations

from vancetope_brain.models.knowledge import Chunk
from vancetope_brain.store import DocumentStore
from vancetope_brain.store.documents import MAX_READ_CHUNKS

from ._build import ROOMY, chunks, document, indexed


def _texts(read: list[Chunk]) -> list[str]:
    return [chunk.text for chunk in read]


def _manual(documents: DocumentStore) -> str:
    """A READY text document of five chunks in two sections, with lines; its id."""
    doc = documents.add_document(document("manual.md"), **ROOMY)
    written = [*chunks(doc, "intro", section="Intro", line_start=1, line_end=3)]
    for ordinal, (text, section, first, last) in enumerate([
            ("oil the pump", "Care › Oil", 4, 9), ("check the level", "Care › Oil", 10, 12),
            ("clean the filter", "Care › Filter", 13, 20), ("the end", "Care › Filter", 21, 21)],
            start=1):
        written.append(Chunk(tenant_id="ten_1", project_id="prj_1", document_id=doc.id,
                             document_version=1, ordinal=ordinal, text=text, section=section,
                             line_start=first, line_end=last))
    assert documents.write_chunks("ten_1", "prj_1", doc.id, 1, written, pages=None)
    return doc.id


def test_a_section_a_line_range_or_nothing_reads_the_chunks_there_in_order(
        documents: DocumentStore) -> None:
    doc = _manual(documents)
    read = documents.read_chunks("ten_1", "prj_1", doc, section="Care › Oil")
    assert _texts(read) == ["oil the pump", "check the level"]
    assert (read[0].section, read[0].line_start, read[0].line_end, read[0].ordinal) == (
        "Care › Oil", 4, 9, 1)
    assert documents.read_chunks("ten_1", "prj_1", doc, section="Care") == []  # whole path
    # Lines overlap: 12-13 touches the end of one chunk and the start of the next.
    assert _texts(documents.read_chunks("ten_1", "prj_1", doc, lines=(12, 13))) == [
        "check the level", "clean the filter"]
    assert _texts(documents.read_chunks("ten_1", "prj_1", doc, lines=(5, 5))) == [
        "oil the pump"]
    assert _texts(documents.read_chunks("ten_1", "prj_1", doc, section="Care › Filter",
                                        lines=(1, 13))) == ["clean the filter"]
    assert _texts(documents.read_chunks("ten_1", "prj_1", doc)) == [
        "intro", "oil the pump", "check the level", "clean the filter", "the end"]
    assert _texts(documents.read_chunks("ten_1", "prj_1", doc, limit=2)) == [
        "intro", "oil the pump"]
    assert documents.read_chunks("ten_1", "prj_1", doc, limit=0) == []
    assert documents.read_chunks("ten_1", "prj_1", doc, page=1) == []  # text has no pages


def test_a_page_reads_that_pages_chunks_and_the_cap_holds(documents: DocumentStore) -> None:
    doc = documents.add_document(document("big.pdf"), **ROOMY)
    texts = [f"passage {n}" for n in range(MAX_READ_CHUNKS + 5)]
    written = [chunk.model_copy(update={"page": 1 if n < 3 else 2})
               for n, chunk in enumerate(chunks(doc, *texts))]
    assert documents.write_chunks("ten_1", "prj_1", doc.id, 1, written, pages=2)
    assert _texts(documents.read_chunks("ten_1", "prj_1", doc.id, page=1)) == texts[:3]
    on_two = documents.read_chunks("ten_1", "prj_1", doc.id, page=2, limit=10 * MAX_READ_CHUNKS)
    assert _texts(on_two) == texts[3:3 + MAX_READ_CHUNKS]


def test_only_the_current_version_of_a_ready_document_is_read(documents: DocumentStore) -> None:
    ready = indexed(documents, "old words", content="old")
    assert _texts(documents.read_chunks("ten_1", "prj_1", ready.id)) == ["old words"]
    again = documents.add_document(document(content="new"), **ROOMY)  # version 2, PENDING
    assert documents.read_chunks("ten_1", "prj_1", ready.id) == []
    assert documents.write_chunks("ten_1", "prj_1", again.id, 2, chunks(again, "new words"),
                                  pages=None)
    [read] = documents.read_chunks("ten_1", "prj_1", ready.id)
    assert (read.text, read.document_version) == ("new words", 2)
    assert documents.delete_document("ten_1", "prj_1", ready.id)
    assert documents.read_chunks("ten_1", "prj_1", ready.id) == []


def test_another_projects_or_tenants_document_reads_as_nothing(documents: DocumentStore) -> None:
    mine = indexed(documents, "secret plans")
    theirs = indexed(documents, "their plans", tenant="ten_2")
    assert documents.read_chunks("ten_1", "prj_2", mine.id) == []
    assert documents.read_chunks("ten_2", "prj_1", mine.id) == []
    assert documents.read_chunks("ten_1", "prj_1", theirs.id) == []
    assert _texts(documents.read_chunks("ten_2", "prj_1", theirs.id)) == ["their plans"]
