"""Vector and hybrid retrieval over one project of N chunks on SQLite (issue 29 target:
hybrid query p95 <= 25 ms over 100,000 chunks, not counting the embedding call).

Seeds a fresh SQLite store through the ``DocumentStore`` and ``DocumentVectors`` ports: ``--chunks`` passages of
random words from a 5,000-word vocabulary, in documents of 1,000, each with a random
``--dim``-dimensional vector. Then times, for ``--queries`` random three-word queries with a
random vector each: the lexical search (``search_chunks``), the vector search
(``search_vectors``, the matrix cached after the first) and the whole hybrid search
(``Retriever.search``; its embedder hands back the precomputed vector, so the endpoint's
time is left out). Prints p50/p95 in ms, the first (cold) vector search and the seeding time.

    python benchmarks/vectors.py --chunks 100000 --dim 384
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import cast

import numpy as np

from vancetope_brain.knowledge.retrieval import Retriever
from vancetope_brain.llm.embeddings import Embeddings
from vancetope_brain.models.knowledge import Chunk, DocumentFormat, KnowledgeDocument
from vancetope_brain.store import DocumentStore, DocumentVectors, open_store

PER_DOCUMENT = 1_000
ROOMY = {"max_project_documents": 10_000, "max_project_bytes": 10**12,
         "max_tenant_bytes": 10**12}


class _Precomputed:
    """An embedder that answers the vector set for the next query (no endpoint)."""

    model = "bench-embed"

    def __init__(self) -> None:
        self.vector = np.zeros(1, np.float32)

    def for_project(self, tenant_id: str, project_id: str, *, query: bool) -> _Precomputed:
        return self

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.vector[None, :]


def _seed(store: DocumentStore, vectors_port: DocumentVectors, chunks: int, dim: int,
          words: list[str], rng: random.Random) -> None:
    vectors = np.random.default_rng(1).standard_normal((PER_DOCUMENT, dim), np.float32)
    for start in range(0, chunks, PER_DOCUMENT):
        count = min(PER_DOCUMENT, chunks - start)
        texts = [" ".join(rng.choices(words, k=60)) for _ in range(count)]
        body = "\n".join(texts).encode()
        doc = store.add_document(KnowledgeDocument(
            tenant_id="bench", project_id="p1", name=f"doc-{start // PER_DOCUMENT:04}.txt",
            format=DocumentFormat.TEXT, media_type="text/plain", size=len(body),
            sha256=hashlib.sha256(body).hexdigest(), added_by="bench"), **ROOMY)
        store.write_chunks("bench", "p1", doc.id, doc.version, [
            Chunk(tenant_id="bench", project_id="p1", document_id=doc.id,
                  document_version=doc.version, ordinal=i, text=text)
            for i, text in enumerate(texts)], pages=None)
        np.random.default_rng(start).shuffle(vectors)
        vectors_port.write_vectors("bench", "p1", doc.id, doc.version, _Precomputed.model,
                                   vectors[:count])


def _hybrid(retriever: Retriever, text: str) -> None:
    retriever.search("bench", ["p1"], text, top_k=5, min_score=0.0)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"p50 {statistics.median(ordered) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(7)
    words = [f"w{i}" for i in range(5_000)]
    with tempfile.TemporaryDirectory() as folder:
        backend = open_store(f"sqlite:///{Path(folder) / 'bench.db'}")
        store, vector_store = backend.port(DocumentStore), backend.port(DocumentVectors)
        began = time.perf_counter()
        _seed(store, vector_store, args.chunks, args.dim, words, rng)
        print(f"seeded {args.chunks} chunks of {args.dim} dimensions in "
              f"{time.perf_counter() - began:.1f} s")
        embedder = _Precomputed()
        retriever = Retriever(store, vector_store, cast(Embeddings, embedder))
        queries = [(" ".join(rng.choices(words, k=3)),
                    np.random.default_rng(i).standard_normal(args.dim).astype(np.float32))
                   for i in range(args.queries)]
        began = time.perf_counter()
        vector_store.search_vectors("bench", ["p1"], embedder.model, queries[0][1], 20)
        print(f"first vector search (reads the matrix): {time.perf_counter() - began:.2f} s")
        timings: dict[str, list[float]] = {"lexical": [], "vector": [], "hybrid": []}
        for text, vector in queries:
            embedder.vector = vector
            for name, run, arguments in (
                    ("lexical", store.search_chunks, ("bench", ["p1"], text, 20)),
                    ("vector", vector_store.search_vectors, ("bench", ["p1"], embedder.model,
                                                             vector, 20)),
                    ("hybrid", _hybrid, (retriever, text))):
                began = time.perf_counter()
                run(*arguments)
                timings[name].append(time.perf_counter() - began)
        for name, samples in timings.items():
            print(f"{name:8} {_ms(samples)}   ({len(samples)} queries)")
        backend.close()


if __name__ == "__main__":
    main()
