"""Retrieval: the passages of a project's documents that bear on a piece of text (issue 29;
arthur-engine §3.8 item 4).

``Retriever.search`` is the one entry: it turns the user's free text into a bounded query,
asks each search path for its ranked hits, and keeps the best ``top_k`` that reach
``min_score``. Today there is one path, lexical (``DocumentStore.search_chunks``: BM25,
scores normalised to 0..1). A vector path (an embedding endpoint and a vector index) adds
its own ranked list in ``_ranked``, and the lists are then fused by reciprocal rank
(``via="hybrid"``); a failing vector path degrades to the lexical one. Nothing here knows
who asks: the caller gives the tenant and the projects, and the store never reads beyond
them.

A failing store raises ``StoreError`` after a WARNING log line and a count in
``vancetope_retrieval_failures_total`` (stage ``lexical``); whether that fails the caller is
the caller's choice (Arthur's autoInject skips silently, arthur-engine §3.8).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence

from vancetope_brain.errors import StoreError
from vancetope_brain.models.knowledge import Chunk, KnowledgeDocument, SearchHit
from vancetope_brain.observability import metrics
from vancetope_brain.store.documents import MAX_QUERY_TERMS, DocumentStore

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4_000
"""Characters of the text a search reads (the start of it); the rest is ignored."""
MAX_TOP_K = 20
"""Hits one search returns at most, whatever ``top_k`` asks."""
STOP_WORDS = frozenset(["a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "please", "say", "says", "should", "so", "tell", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "us", "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your", "about", "documents", "document", "docs", "doc", "files", "file"])
"""English words that say how a question is asked, not what about (and the words a user
names the documents by: "what do my documents say about X" searches for X). They weigh like
any rare word in BM25, so a small project's passages would match on them; they are left out
of the query, unless nothing else is left."""
_WORD = re.compile(r"[^\W_]+")


def query_text(text: str) -> str:
    """The lexical query for ``text``: its distinct lowercase words (runs of letters and
    digits, as the store tokenises) from the first ``MAX_QUERY_CHARS`` characters, stop
    words left out (all of them kept when nothing else is left), at most
    ``MAX_QUERY_TERMS``, separated by spaces. Nothing of the text is query syntax."""
    words = list(dict.fromkeys(
        _WORD.findall(unicodedata.normalize("NFC", text[:MAX_QUERY_CHARS]).lower())))
    kept = [word for word in words if word not in STOP_WORDS] or words
    return " ".join(kept[:MAX_QUERY_TERMS])


class Retriever:
    """Search over the documents of a tenant's projects, through ``DocumentStore``.
    Thread-safe (it keeps no state of its own)."""

    def __init__(self, documents: DocumentStore) -> None:
        self._documents = documents

    def search(self, tenant_id: str, project_ids: Sequence[str], text: str, *, top_k: int,
               min_score: float) -> list[SearchHit]:
        """The hits for ``text`` in the READY documents of ``project_ids`` of the tenant,
        best first, at most ``min(top_k, MAX_TOP_K)``, each scoring at least ``min_score``
        (0..1). Text without searchable words, no projects or ``top_k`` < 1 finds nothing
        (and asks the store nothing). Raises ``StoreError`` when the store fails (logged and
        counted)."""
        limit = min(top_k, MAX_TOP_K)
        query = query_text(text)
        if limit < 1 or not query or not project_ids:
            return []
        return [hit for hit in self._ranked(tenant_id, project_ids, query, limit)
                if hit.score >= min_score]

    def documents(self, tenant_id: str, project_id: str) -> list[KnowledgeDocument]:
        """The project's documents by name, whatever their status."""
        return self._documents.list_documents(tenant_id, project_id)

    def read(self, tenant_id: str, project_id: str, document_id: str, *,
             section: str | None = None, page: int | None = None,
             lines: tuple[int, int] | None = None, limit: int) -> list[Chunk]:
        """The passages of a READY document of the project at a position, in document order
        (``DocumentStore.read_chunks``)."""
        return self._documents.read_chunks(tenant_id, project_id, document_id,
                                           section=section, page=page, lines=lines,
                                           limit=limit)

    def _ranked(self, tenant_id: str, project_ids: Sequence[str], query: str,
                limit: int) -> list[SearchHit]:
        """The best ``limit`` hits of every search path, fused, best first (one path today:
        lexical)."""
        try:
            return self._documents.search_chunks(tenant_id, list(project_ids), query, limit)
        except StoreError as e:
            log.warning("knowledge search failed (stage lexical, tenant %s): %s", tenant_id, e)
            metrics.RETRIEVAL_FAILURES.labels(stage="lexical").inc()
            raise
