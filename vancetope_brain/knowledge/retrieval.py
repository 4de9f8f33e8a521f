"""Retrieval: the passages of a project's documents that bear on a piece of text (issue 29;
arthur-engine §3.8 item 4).

``Retriever.search`` is the one entry: it turns the user's free text into a bounded query,
asks each search path for its ranked hits, and keeps the best ``top_k`` that reach
``min_score``. Nothing here knows who asks: the caller gives the tenant and the projects,
and the store never reads beyond them.

**Paths.** Lexical always (``DocumentStore.search_chunks``: BM25, normalised to 0..1).
Vector when the project has an embedding endpoint (``rag.embedding.profile``, read for the
first project searched; ``llm/embeddings.py``): the text's vector (its first
``MAX_QUERY_CHARS`` characters, at most ``QUERY_TIMEOUT`` seconds, no retry) against the
chunks' vectors of the same model (``DocumentVectors.search_vectors``: the cosine, 0..1).

**Fusion.** Each path's hits below ``min_score`` are dropped first — so ``rag.minScore``
means the same on either path: a BM25 share for a lexical hit, a cosine for a vector hit —
and the rest (``FUSION_DEPTH`` a path) fused by reciprocal rank: a chunk's weight is the
sum over the lists holding it of ``1 / (RRF_K + rank)``, best weight first (ties: the
higher score, then lexical order). A fused hit's score is the best of its paths' scores,
its ``via`` ``"hybrid"`` when both found it. With no embedding endpoint the search is
lexical only, exactly as without this path.

**Failures.** An embedding that fails or answers garbage (``EmbeddingFailed``) makes that
search lexical only, after a WARNING line (no key: see ``llm/embeddings.py``) and a count
in ``vancetope_embedding_fallbacks_total`` (stage ``query``): it never fails the caller. A
failing store raises ``StoreError`` after a WARNING log line and a count in
``vancetope_retrieval_failures_total`` (stage ``lexical`` or ``vector``); whether that fails
the caller is the caller's choice (Arthur's autoInject skips silently, arthur-engine §3.8).
"""

from __future__ import annotations

import contextvars
import logging
import re
import unicodedata
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from vancetope_brain.errors import EmbeddingFailed, StoreError
from vancetope_brain.llm.embeddings import Embedder, Embeddings
from vancetope_brain.models.knowledge import Chunk, KnowledgeDocument, SearchHit
from vancetope_brain.observability import metrics
from vancetope_brain.store.documents import MAX_QUERY_TERMS, DocumentStore
from vancetope_brain.store.vectors import DocumentVectors

if TYPE_CHECKING:
    from vancetope_brain.settings import SettingsApi

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4_000
"""Characters of the text a search reads (the start of it); the rest is ignored."""
MAX_TOP_K = 20
"""Hits one search returns at most, whatever ``top_k`` asks."""
FUSION_DEPTH = 20
"""Hits of each path a hybrid search fuses."""
RRF_K = 60
"""Reciprocal-rank fusion's constant (the usual one: a first rank weighs 1/61)."""
VECTOR_THREADS = 16
"""Threads of a process that run hybrid searches' vector paths beside their lexical ones
(more searches at once wait for one)."""
_PATHS = ThreadPoolExecutor(max_workers=VECTOR_THREADS, thread_name_prefix="vector-search")
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
    """Search over the documents of a tenant's projects, through ``DocumentStore`` and, when
    configured, an embedding endpoint (``embeddings``; None: lexical only) and
    ``DocumentVectors``. Thread-safe (it keeps no state of its own)."""

    def __init__(self, documents: DocumentStore, vectors: DocumentVectors,
                 embeddings: Embeddings | None = None) -> None:
        self._documents = documents
        self._vectors = vectors
        self._embeddings = embeddings

    def search(self, tenant_id: str, project_ids: Sequence[str], text: str, *, top_k: int,
               min_score: float, settings: SettingsApi | None = None) -> list[SearchHit]:
        """The hits for ``text`` in the READY documents of ``project_ids`` of the tenant,
        best first, at most ``min(top_k, MAX_TOP_K)``, each scoring at least ``min_score``
        (0..1) on its path (module docstring). ``settings``: the first project's, already
        read (``SettingsApi.without_user``; None: read here). Text without searchable
        words, no projects or ``top_k`` < 1 finds nothing (and asks nothing). Raises ``StoreError`` when the
        store fails (logged and counted); a failing embedding only makes it lexical."""
        limit = min(top_k, MAX_TOP_K)
        query = query_text(text)
        if limit < 1 or not query or not project_ids:
            return []
        projects = list(project_ids)
        embedder = self._embedder(tenant_id, projects, settings)
        if embedder is None:
            return [hit for hit in self._lexical(tenant_id, projects, query, limit)
                    if hit.score >= min_score]
        # The vector path (an HTTP call, then a scan that frees the GIL) runs beside the
        # lexical one, so a hybrid search takes about the longer of the two, not their sum.
        pending = _PATHS.submit(contextvars.copy_context().run, self._vector, tenant_id,
                                projects, text, embedder)
        lexical = [hit for hit in self._lexical(tenant_id, projects, query, FUSION_DEPTH)
                   if hit.score >= min_score]
        vector = pending.result()
        if vector is None:
            return lexical[:limit]
        return fuse(lexical, [hit for hit in vector if hit.score >= min_score])[:limit]

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

    def _lexical(self, tenant_id: str, project_ids: list[str], query: str,
                 limit: int) -> list[SearchHit]:
        try:
            return self._documents.search_chunks(tenant_id, project_ids, query, limit)
        except StoreError as e:
            _failed("lexical", tenant_id, e)
            raise

    def _embedder(self, tenant_id: str, project_ids: list[str],
                  settings: SettingsApi | None) -> Embedder | None:
        """The embedder of the first project searched; None when it has no embedding
        endpoint, or when its setting names a profile that cannot embed (logged and
        counted)."""
        if self._embeddings is None:
            return None
        try:
            return self._embeddings.for_project(tenant_id, project_ids[0], query=True,
                                                settings=settings)
        except EmbeddingFailed as e:
            _lexical_only(tenant_id, e)
            return None
        except StoreError as e:  # reading the settings
            _failed("vector", tenant_id, e)
            raise

    def _vector(self, tenant_id: str, project_ids: list[str], text: str,
                embedder: Embedder) -> list[SearchHit] | None:
        """The vector path's best ``FUSION_DEPTH`` hits; None when embedding the text failed
        (logged and counted)."""
        try:
            [vector] = embedder.embed([text[:MAX_QUERY_CHARS]])
        except EmbeddingFailed as e:
            _lexical_only(tenant_id, e)
            return None
        try:
            return self._vectors.search_vectors(tenant_id, project_ids, embedder.model, vector,
                                                FUSION_DEPTH)
        except StoreError as e:
            _failed("vector", tenant_id, e)
            raise


def _lexical_only(tenant_id: str, error: EmbeddingFailed) -> None:
    log.warning("knowledge search goes on lexical only (tenant %s): %s", tenant_id, error)
    metrics.EMBEDDING_FALLBACKS.labels(stage="query", code=error.code).inc()


def _failed(stage: str, tenant_id: str, error: StoreError) -> None:
    log.warning("knowledge search failed (stage %s, tenant %s): %s", stage, tenant_id, error)
    metrics.RETRIEVAL_FAILURES.labels(stage=stage).inc()


def fuse(*ranked: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits of the ``ranked`` lists (each best first) fused by reciprocal rank (module
    docstring): each chunk once, best first, scored by its best path, ``via`` ``"hybrid"``
    when more than one list holds it."""
    fused: dict[str, tuple[float, SearchHit, set[str]]] = {}
    for hits in ranked:
        for rank, hit in enumerate(hits, start=1):
            weight, kept, vias = fused.get(hit.chunk.id, (0.0, hit, set()))
            best = hit if hit.score > kept.score else kept
            fused[hit.chunk.id] = (weight + 1 / (RRF_K + rank), best, vias | {hit.via})
    order = sorted(fused.values(), key=lambda entry: (-entry[0], -entry[1].score))
    return [hit.model_copy(update={"via": "hybrid"}) if len(vias) > 1 else hit
            for _, hit, vias in order]
