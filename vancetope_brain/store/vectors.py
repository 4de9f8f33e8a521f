"""The document vector port: one vector per chunk of a document's current version, and an
exact cosine search over them (``DocumentVectors``), with what both adapters share (no
I/O): checking the vectors written, the exact cosine scan and the hit it makes.

Split from ``DocumentStore`` (STYLE.md: a port past a dozen methods is two ports), it works
on the documents and chunks that port writes, on the same storage: a backend's two adapters
read each other's tables or collections, and the chunks' vectors go with them when
``DocumentStore.write_chunks`` replaces them or ``delete_document`` deletes them.

**Score**: vectors are stored with unit length, so a dot product is the cosine; a hit's score
is the cosine, and a chunk whose cosine is 0 or less is no hit (0..1, like the lexical
score; ``knowledge/retrieval.py`` says how the two are fused).
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vancetope_brain.models.knowledge import Chunk, KnowledgeDocument, SearchHit
from vancetope_brain.store.backend import Port
from vancetope_brain.store.documents import MAX_SEARCH_LIMIT, lexical_hit

MAX_VECTOR_DIM = 4_096
"""The most numbers one vector may have."""
MAX_VECTOR_SCAN = 200_000
"""Vectors one search compares at most per project searched (in storage order): a project
with more chunks embedded finds by vector only among the first of them."""
MAX_SCAN_BYTES = 512 * 1024 * 1024
"""Bytes of float32 vectors one search reads at most per project: long vectors lower the
count ``scan_rows`` allows (3,072 numbers: 43,690 vectors)."""


def scan_rows(dim: int) -> int:
    """Vectors of ``dim`` numbers one search compares at most per project."""
    return min(MAX_VECTOR_SCAN, MAX_SCAN_BYTES // (4 * dim))
MAX_MODEL_CHARS = 200
"""Characters of an embedding model's name."""


def unit_rows(vectors: np.ndarray | Sequence[Sequence[float]], count: int) -> np.ndarray:
    """``vectors`` as a C-contiguous float32 matrix of unit rows; ``ValueError`` unless it
    has ``count`` rows of one dimension (1 to ``MAX_VECTOR_DIM``), finite and not zero."""
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != count or \
            not 1 <= matrix.shape[1] <= MAX_VECTOR_DIM:
        raise ValueError(f"expected {count} vectors of 1 to {MAX_VECTOR_DIM} numbers, got an "
                         f"array of shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1)
    if not np.isfinite(matrix).all() or not (norms > 0).all():
        raise ValueError("a vector is not finite, or all zero")
    return np.ascontiguousarray(matrix / norms[:, None], dtype=np.float32)


def unit_query(vector: np.ndarray | Sequence[float]) -> np.ndarray:
    """The query ``vector`` as a float32 unit vector (``unit_rows`` of one row, flattened)."""
    flat = np.asarray(vector, dtype=np.float64)
    if flat.ndim != 1:
        raise ValueError(f"a query vector is flat, not of shape {flat.shape}")
    return unit_rows(flat[None, :], 1)[0]


def check_model(model: str) -> None:
    """``ValueError`` unless ``model`` is a model's name (1 to ``MAX_MODEL_CHARS``)."""
    if not 1 <= len(model) <= MAX_MODEL_CHARS:
        raise ValueError(f"an embedding model's name has 1 to {MAX_MODEL_CHARS} characters")


def vector_query(model: str, vector: np.ndarray, project_ids: Sequence[str],
                 limit: int) -> tuple[np.ndarray, list[str], int]:
    """A vector search's checked arguments: the unit query vector, the distinct projects in
    order, the limit (at most ``MAX_SEARCH_LIMIT``). ``ValueError`` for a bad model or
    vector."""
    check_model(model)
    return unit_query(vector), sorted(set(project_ids)), min(limit, MAX_SEARCH_LIMIT)


def nearest(matrix: np.ndarray, query: np.ndarray, keep: np.ndarray | None,
            limit: int) -> list[tuple[int, float]]:
    """The best ``limit`` rows of ``matrix`` by cosine with ``query`` (both unit), among
    the rows ``keep`` marks (None: all), as (row, score) best first, ties by row; rows
    scoring 0 or less left out."""
    if limit <= 0 or matrix.shape[0] == 0:
        return []
    scores = matrix @ query
    if keep is not None:
        scores = np.where(keep, scores, -1.0)
    if limit < scores.shape[0]:
        rows = np.argpartition(-scores, limit - 1)[:limit]
    else:
        rows = np.arange(scores.shape[0])
    rows = rows[np.lexsort((rows, -scores[rows]))]
    return [(int(row), min(float(scores[row]), 1.0)) for row in rows if scores[row] > 0]


def vector_hit(chunk: Chunk, document_name: str, score: float) -> SearchHit:
    """The hit of ``chunk`` of the document named ``document_name`` found by vector."""
    return lexical_hit(chunk, document_name, score).model_copy(update={"via": "vector"})



MAX_CACHED_BYTES = 512 * 1024 * 1024
"""Bytes of project matrices that one OS process keeps per SQL backend (``MatrixCache``;
the least recently used go first)."""


@dataclass(frozen=True)
class Matrix:
    """One project's vectors of one model and dimension, read at ``generation``: row i is
    chunk ``ids[i]`` of the (document, version) ``pairs[codes[i]]``."""

    generation: int
    ids: np.ndarray
    codes: np.ndarray
    pairs: list[tuple[str, int]]
    matrix: np.ndarray

    @classmethod
    def of(cls, generation: int, rows: Sequence[Sequence[Any]], dim: int) -> Matrix:
        """The matrix of stored rows (chunk id, document id, version, float32 bytes)."""
        codes: dict[tuple[str, int], int] = {}
        matrix = np.frombuffer(b"".join(bytes(row[3]) for row in rows),
                               np.float32).reshape(-1, dim)
        return cls(generation, np.fromiter((row[0] for row in rows), np.int64, len(rows)),
                   np.fromiter((codes.setdefault((row[1], row[2]), len(codes))
                                for row in rows), np.int32, len(rows)),
                   list(codes), matrix)

    def keep(self, ready: dict[tuple[str, int], str]) -> np.ndarray | None:
        """Which rows are of a (document, version) in ``ready`` (None: all of them)."""
        kept = np.fromiter((pair in ready for pair in self.pairs), bool, len(self.pairs))
        return None if kept.all() else kept[self.codes]


class MatrixCache:
    """The project matrices a SQL backend read in this OS process, each used while its
    generation is the one stored (bumped in the transaction of every vector write and
    chunk drop, so every process sharing the store sees a change at its next search)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: OrderedDict[tuple[str, ...], Matrix] = OrderedDict()

    def get(self, key: tuple[str, ...], generation: int, read: Callable[[], Matrix]) -> Matrix:
        """The matrix of ``key`` at ``generation``: the one held, else ``read()`` (kept if
        it fits in ``MAX_CACHED_BYTES``)."""
        with self._lock:
            held = self._held.get(key)
            if held is not None and held.generation == generation:
                self._held.move_to_end(key)
                return held
        fresh = read()
        with self._lock:
            self._held.pop(key, None)
            if fresh.matrix.nbytes <= MAX_CACHED_BYTES:
                self._held[key] = fresh
                while sum(m.matrix.nbytes for m in self._held.values()) > MAX_CACHED_BYTES:
                    self._held.popitem(last=False)
        return fresh


class DocumentVectors(Port):
    """The vectors of the ``Chunk``s of each ``KnowledgeDocument``'s current version, as
    ``DocumentStore`` keeps them on the same storage; each adapter's docstring says what is
    atomic. A document's vectors are gone once its chunks are replaced or it is deleted.
    """

    @abstractmethod
    def write_vectors(self, tenant_id: str, project_id: str, document_id: str, version: int,
                      model: str, vectors: np.ndarray) -> bool:
        """Store ``vectors`` (row i: chunk i) as the document's vectors of ``model``,
        replacing any it had (of any model), stored at unit length. False, writing nothing,
        unless the document is READY at ``version``. ``ValueError`` unless there is one
        vector per chunk, of one dimension (1 to ``MAX_VECTOR_DIM``), finite, not zero."""

    @abstractmethod
    def search_vectors(self, tenant_id: str, project_ids: Sequence[str], model: str,
                       vector: np.ndarray, limit: int) -> list[SearchHit]:
        """The chunks nearest ``vector`` among the current chunks of the READY documents of
        those projects of the tenant that have vectors of ``model`` and of its dimension
        (others are not compared): at most ``min(limit, MAX_SEARCH_LIMIT)`` hits, ``via``
        ``"vector"``, the score the cosine (0 or less: no hit), best first. At most
        ``scan_rows(dim)`` vectors per project are compared. ``ValueError`` for a vector
        that is not flat, finite and non-zero."""

    @abstractmethod
    def without_vectors(self, tenant_id: str, project_id: str, model: str,
                        limit: int) -> list[KnowledgeDocument]:
        """At most ``limit`` READY documents of the project with chunks but no vectors of
        ``model`` for their current version, by name."""
