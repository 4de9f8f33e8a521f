"""The document port: a project's knowledge documents, their chunks, and lexical search.

Both adapters share what needs no I/O, here: the tokeniser (``query_words``,
``index_terms``), the caps check and the replacement rule (``admitted``), and the score
(``ranking``, with ``lexical_hit`` making the hit).

**Score.** ``search_chunks`` ranks with ``store/ranking.py`` (BM25, k1 = 1.2, b = 0.75,
Lucene's IDF, normalised to 0..1 as the share of the query's weight a chunk carries), the
same function on every backend, over the tokens of ``index_terms``; N, n and the mean
length are counted over the current chunks of the READY documents of the tenant's projects
searched, never over another tenant's, another project's or an old version's chunks.
"""

from __future__ import annotations

import re
import unicodedata
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from vancetope_brain.errors import ProjectKnowledgeFull, TenantKnowledgeFull
from vancetope_brain.models import utcnow
from vancetope_brain.models.knowledge import (
    Chunk,
    Citation,
    DocumentStatus,
    KnowledgeDocument,
    SearchHit,
)
from vancetope_brain.store.backend import Port
from vancetope_brain.store.ranking import Candidate, frequencies, score

MAX_QUERY_TERMS = 32
"""Distinct words of a query searched; the rest are ignored."""
MAX_SEARCH_LIMIT = 100
"""Hits one search returns at most, whatever ``limit`` asks."""
MAX_CANDIDATES = 500
"""Chunks one search ranks at most. An adapter takes the chunks holding the query's rarest
term first, then the next term's, …, so only the list of a term held by many chunks is cut
(in index order): a search whose terms are all that common ranks only these and may miss
better hits. n per term is still counted over the whole scope. (10,000 before: ranking that
many took 0.3–1 s per search on 100,000 chunks, ``benchmarks/retrieval.py``.)"""
MAX_READ_CHUNKS = 100
"""Chunks one ``read_chunks`` returns at most, whatever ``limit`` asks."""

_WORD = re.compile(r"[^\W_]+")
"""A run of letters and digits: what FTS5's ``unicode61`` tokenizer keeps as one token."""


def query_words(text: str) -> list[str]:
    """The distinct lowercase words of a user's free text, in order, at most
    ``MAX_QUERY_TERMS``. Nothing in the text is syntax: quotes, ``AND``, ``NEAR``, ``*``,
    ``^``, parentheses and ``column:`` are words or separators like any other."""
    words = dict.fromkeys(_WORD.findall(unicodedata.normalize("NFC", text).lower()))
    return list(words)[:MAX_QUERY_TERMS]


def fold(word: str) -> str:
    """``word`` without the diacritics of Latin letters (``café`` → ``cafe``), as
    ``unicode61 remove_diacritics 2`` folds them; other scripts keep theirs."""
    if word.isascii():
        return word
    kept: list[str] = []
    for char in unicodedata.normalize("NFD", word):
        if unicodedata.combining(char) and kept and kept[-1] < "\u0250":
            continue
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept))


def index_terms(text: str) -> list[str]:
    """Every token of ``text`` in order, lowercased and folded (what MongoDB indexes, and
    what a chunk's ``length`` and term frequencies count on every backend)."""
    return [fold(word) for word in _WORD.findall(unicodedata.normalize("NFC", text).lower())]


def counter(terms: Sequence[str]) -> Callable[[str], dict[str, int]]:
    """A function giving how often each of ``terms`` (folded, as ``search_terms`` gives them)
    occurs among the tokens of a text — ``ranking.frequencies(index_terms(text), terms)``,
    without tokenising the whole of an ASCII text: each term is looked for with
    ``str.find`` and counted where it is a whole token (no letter or digit either side;
    a regular expression doing the same took ~50 µs per 1,200 characters, this ~5)."""
    ascii_terms = [term for term in terms if term.isascii()]

    def count(text: str) -> dict[str, int]:
        if not text.isascii():
            return frequencies(index_terms(text), terms)
        text = text.lower()
        counts = {}
        for term in ascii_terms:
            n, at = 0, text.find(term)
            while at >= 0:
                end = at + len(term)
                if (at == 0 or not text[at - 1].isalnum()) and \
                        (end == len(text) or not text[end].isalnum()):
                    n += 1
                at = text.find(term, end)
            if n:
                counts[term] = n
        return counts
    return count


def search_terms(query: str) -> list[str]:
    """The distinct folded terms of a user's free text (``query_words``, then ``fold``)."""
    return list(dict.fromkeys(fold(word) for word in query_words(query)))


class Found(NamedTuple):
    """A candidate chunk as an adapter found it: its query-term frequencies and length, the
    name of its document, its ordinal and document id (the tie order), and the adapter's
    ``key`` to read it whole."""

    candidate: Candidate
    document_name: str
    ordinal: int
    document_id: str
    key: Any


def best(found: Sequence[Found], terms: Sequence[str], *, chunks: int, tokens: int,
         holding: Mapping[str, int] | None, limit: int) -> list[tuple[Found, float]]:
    """The best ``limit`` of ``found`` with their normalised scores, best first by raw BM25
    (``ranking.score`` over ``chunks`` chunks of ``tokens`` tokens in all), ties by
    document name, ordinal, document id; chunks scoring 0 left out."""
    scores = score([hit.candidate for hit in found], terms, items=chunks, total_length=tokens,
                   holding=holding)
    order = sorted(((scored, hit) for scored, hit in zip(scores, found, strict=True)
                    if scored.raw > 0),
                   key=lambda pair: (-pair[0].raw, pair[1].document_name, pair[1].ordinal,
                                     pair[1].document_id))
    return [(hit, scored.score) for scored, hit in order[:limit]]


def lexical_hit(chunk: Chunk, document_name: str, score: float) -> SearchHit:
    """The hit of ``chunk`` of the document named ``document_name``, normalised ``score``."""
    citation = Citation(document_id=chunk.document_id, document_name=document_name,
                        section=chunk.section, page=chunk.page, line_start=chunk.line_start,
                        line_end=chunk.line_end)
    return SearchHit(chunk=chunk, citation=citation, score=score, via="lexical")


def admitted(doc: KnowledgeDocument, stored: KnowledgeDocument | None, *,
             project: tuple[int, int], tenant_bytes: int, max_project_documents: int,
             max_project_bytes: int, max_tenant_bytes: int) -> KnowledgeDocument | None:
    """What ``add_document`` stores for ``doc``, given the document of that name already
    stored (or None) and the usage before — the project's (documents, bytes) and the
    tenant's bytes; None when nothing changes (``stored`` is READY with the same
    ``sha256``). Raises ``ProjectKnowledgeFull`` / ``TenantKnowledgeFull`` when the change
    would pass a cap; a change that does not grow a count never does."""
    if stored is not None and stored.sha256 == doc.sha256 and \
            stored.status is DocumentStatus.READY:
        return None
    added = 0 if stored is not None else 1
    grown = doc.size - (stored.size if stored is not None else 0)
    if added and project[0] + 1 > max_project_documents:
        raise ProjectKnowledgeFull(
            f"project {doc.project_id} already holds {project[0]} documents, "
            f"the cap is {max_project_documents}")
    if grown > 0 and project[1] + grown > max_project_bytes:
        raise ProjectKnowledgeFull(
            f"project {doc.project_id} would hold {project[1] + grown} bytes of documents, "
            f"the cap is {max_project_bytes}")
    if grown > 0 and tenant_bytes + grown > max_tenant_bytes:
        raise TenantKnowledgeFull(
            f"the tenant would hold {tenant_bytes + grown} bytes of documents, "
            f"the cap is {max_tenant_bytes}")
    fresh = {"version": 1, "status": DocumentStatus.PENDING, "chunk_count": 0, "pages": None,
             "error_code": None, "error": None, "updated_at": utcnow(), "added_at": utcnow()}
    if stored is None:
        return doc.model_copy(update=fresh)
    return doc.model_copy(update={**fresh, "id": stored.id, "version": stored.version + 1,
                                  "created_at": stored.created_at})


def check_chunks(tenant_id: str, project_id: str, document_id: str, version: int,
                 chunks: Sequence[Chunk]) -> None:
    """Raise ``ValueError`` unless ``chunks`` all belong to that document version and their
    ordinals are 0, 1, 2, … in order."""
    for ordinal, chunk in enumerate(chunks):
        if (chunk.tenant_id, chunk.project_id, chunk.document_id, chunk.document_version,
                chunk.ordinal) != (tenant_id, project_id, document_id, version, ordinal):
            raise ValueError(f"chunk {chunk.id} is not chunk {ordinal} of "
                             f"{document_id} version {version}")


class DocumentStore(Port):
    """``KnowledgeDocument``s keyed by (tenant, id), their name unique in their project,
    and the ``Chunk``s of each document's current version. Each call is atomic as its
    docstring says; the MongoDB adapter's docstring says how ``write_chunks`` is made
    safe without transactions. Writes of a worker carry the document ``version`` it was
    given and write nothing once the document moved on (it was added again or deleted).
    The chunks' vectors are another port's (``DocumentVectors``, ``store/vectors.py``) on
    the same storage: ``write_chunks`` and ``delete_document`` drop them with the chunks.
    """

    @abstractmethod
    def add_document(self, doc: KnowledgeDocument, *, max_project_documents: int,
                     max_project_bytes: int, max_tenant_bytes: int) -> KnowledgeDocument:
        """Store ``doc`` PENDING, and return what is stored. Atomic with the caps check:
        ``ProjectKnowledgeFull`` / ``TenantKnowledgeFull`` store nothing.

        When the project holds a document of that name it is replaced: same ``id`` and
        ``created_at``, ``version`` + 1, status PENDING, no chunk count, pages or error,
        the rest from ``doc`` (its size counts against the caps by the difference); its old
        chunks stay until ``write_chunks`` of the new version but are never searched. When
        that document is READY with the same ``sha256``, nothing changes and it is returned
        as stored. A new document gets version 1 whatever ``doc`` says."""

    @abstractmethod
    def get_document(self, tenant_id: str, project_id: str,
                     document_id: str) -> KnowledgeDocument | None:
        """The document, or None (also for another tenant's or project's)."""

    @abstractmethod
    def list_documents(self, tenant_id: str, project_id: str) -> list[KnowledgeDocument]:
        """The project's documents by name (code point order)."""

    @abstractmethod
    def mark_document(self, tenant_id: str, project_id: str, document_id: str, version: int,
                      status: DocumentStatus, *, error_code: str | None = None,
                      error: str | None = None) -> bool:
        """Set the status (INDEXING, FAILED, PENDING; READY only comes with ``write_chunks``)
        and the error fields of the document if its version is still ``version``; False,
        writing nothing, when it moved on or is gone. One atomic conditional write."""

    @abstractmethod
    def write_chunks(self, tenant_id: str, project_id: str, document_id: str, version: int,
                     chunks: Sequence[Chunk], *, pages: int | None) -> bool:
        """Replace every chunk of the document with ``chunks`` (ordinals 0, 1, … of this
        document and ``version``, else ``ValueError``) and make it READY with their count
        and ``pages``, clearing its error. False, leaving nothing searchable of it, when
        its version is no longer ``version`` or it is gone. A search sees the old chunks or
        the new ones, never a mix of versions."""

    @abstractmethod
    def delete_document(self, tenant_id: str, project_id: str, document_id: str) -> bool:
        """Delete the document and all its chunks; False if there was none. A search after
        it returns never finds them."""

    @abstractmethod
    def search_chunks(self, tenant_id: str, project_ids: Sequence[str], query: str,
                      limit: int) -> list[SearchHit]:
        """Lexical search of the user's free text ``query`` (any words of it: see
        ``query_words``; none → ``[]``) over the current chunks of the READY documents of
        those projects of the tenant. At most ``min(limit, MAX_SEARCH_LIMIT)`` hits, ``via``
        ``"lexical"``, the score normalised (module docstring), best first by raw BM25, ties
        by document name, then ordinal, then document id. At most ``MAX_CANDIDATES`` chunks
        are ranked."""

    @abstractmethod
    def read_chunks(self, tenant_id: str, project_id: str, document_id: str, *,
                    section: str | None = None, page: int | None = None,
                    lines: tuple[int, int] | None = None,
                    limit: int = MAX_READ_CHUNKS) -> list[Chunk]:
        """The current chunks of the READY document at a position, as a ``Citation`` names
        it: of that ``section`` (the whole heading path, equal), on that ``page``, and
        overlapping ``lines`` (first and last, inclusive) — each given one narrows, none
        reads from the start. In document order (ordinal), at most
        ``min(limit, MAX_READ_CHUNKS)``. ``[]`` for a document that is not READY, missing,
        or another project's or tenant's. One read."""

    @abstractmethod
    def stalled_documents(self, before: datetime, limit: int) -> list[KnowledgeDocument]:
        """The documents of every tenant still PENDING or INDEXING whose last change
        (``updated_at``) is older than ``before``, oldest first, at most ``limit``: the
        housekeeping's, for an ingestion job a crash or a broker restart lost."""

    @abstractmethod
    def usage(self, tenant_id: str, project_id: str | None = None) -> tuple[int, int]:
        """(documents, bytes) of the tenant's knowledge, of one project or of all; the
        bytes are the documents' ``size``."""
