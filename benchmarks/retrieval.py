"""Knowledge retrieval over a large project: query latency percentiles on SQLite (issue 29).

    python benchmarks/retrieval.py [--chunks 100000] [--other-chunks 50000] [--queries 200]
                                   [--mode lexical] [--store PATH] [--json]

Builds a fresh SQLite store in a temp directory (or reuses ``--store PATH`` if that file
was built before with the same sizes, seed and tables) through the real ``DocumentStore`` port:
``--chunks`` chunks in ``--documents`` documents of one project of the searched tenant,
and ``--other-chunks`` chunks of other tenants (the isolation cost: the FTS index holds
their words too, and a search must skip them). Each chunk is ``--words`` words drawn from a
Zipf vocabulary (``--vocabulary`` pseudo-words, exponent 1), about the 1,200 characters of
a chunk the chunker cuts.

Then, per query class, ``--queries`` searches through ``Retriever.search`` (what Arthur's
autoInject and ``memory_query`` call; top 5, ``min_score`` 0), one at a time in this thread:

- ``rare``: one word of Zipf rank ``--vocabulary`` / 5 – ``--vocabulary`` (in ~10–70 of
  100,000 chunks);
- ``mid``: one word of rank 300–3,000 (in ~0.5–5 % of the chunks);
- ``common``: one word of rank 1–30 (in ~40–100 % of the chunks: the worst case);
- ``question``: a user's sentence with stop words and one word of each class.

Printed per class: p50 / p95 / p99 / max latency, queries/s, CPU per query, and how many
chunks of the project hold the class's words (median). No peer comparison: the LangGraph
peer has no document search and a Celery round trip is not part of a search.

Each chunk of the searched project also gets a random ``--dim``-number vector (unit
normal, through ``DocumentVectors.write_vectors``). ``--mode`` (repeatable; default all):

- ``lexical``: ``Retriever.search`` with no embedding endpoint (``DocumentStore.search_chunks``);
- ``vector``: ``DocumentVectors.search_vectors`` of a random query vector (the exact cosine
  scan; the project's matrix is read once, before the timing, as a worker's cache holds it);
- ``hybrid``: ``Retriever.search`` with an embedder that hands back a random vector at once
  (the endpoint's time left out, as the issue's target says): both paths and the fusion.

The issue's targets: hybrid p95 <= 25 ms over 100,000 chunks (``--chunks 100000``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
from _proc import own_cpu, pct  # noqa: E402

from vancetope_brain.knowledge.retrieval import Retriever  # noqa: E402
from vancetope_brain.llm.embeddings import Embeddings  # noqa: E402
from vancetope_brain.models.knowledge import (  # noqa: E402
    Chunk,
    DocumentFormat,
    KnowledgeDocument,
)
from vancetope_brain.store import DocumentStore, DocumentVectors  # noqa: E402
from vancetope_brain.store.sqlite import SqliteBackend  # noqa: E402
from vancetope_brain.store.sqlite.documents import SqliteDocuments  # noqa: E402
from vancetope_brain.store.sqlite.vectors import SqliteDocumentVectors  # noqa: E402

TENANT, PROJECT = "ten_bench", "prj_bench"
MODEL = "bench-embed"
ROOMY = {"max_project_documents": 10_000, "max_project_bytes": 10**12,
         "max_tenant_bytes": 10**12}
CLASSES = {"rare": (None, None), "mid": (300, 3_000), "common": (1, 30)}
"""Zipf rank ranges (1-based, end inclusive) of each class; None: from a fifth of the
vocabulary (20,000 of 100,000), to its end."""
QUESTION = "what do my documents say about {} and {} when {}?"


def pseudo_word(rank: int) -> str:
    """A distinct pronounceable word for each rank (``kabo``, ``tesimu``, …)."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    syllables = [c + v for c in consonants for v in vowels]
    out, n = [], rank
    while True:
        n, k = divmod(n, len(syllables))
        out.append(syllables[k])
        if n == 0:
            return "".join(out) + ("x" if len(out) == 1 else "")
        n -= 1


class Zipf:
    """Words drawn with probability ∝ 1 / rank."""

    def __init__(self, vocabulary: int, rng: random.Random) -> None:
        self.words = [pseudo_word(rank) for rank in range(vocabulary)]
        self._cum = list(itertools.accumulate(1 / rank for rank in range(1, vocabulary + 1)))
        self._rng = rng

    def text(self, words: int) -> str:
        drawn = self._rng.choices(self.words, cum_weights=self._cum, k=words)
        lines = [" ".join(drawn[i:i + 12]) for i in range(0, words, 12)]
        return ".\n".join(line.capitalize() for line in lines) + "."

    def rank_word(self, rank: int) -> str:
        return self.words[rank - 1]

    def between(self, low: int | None, high: int | None) -> list[str]:
        return self.words[(low or len(self.words) // 5) - 1:(high or len(self.words))]


@dataclass
class Corpus:
    """The built store and what a mode needs to query it."""

    backend: SqliteBackend
    documents: DocumentStore
    vectors: DocumentVectors
    zipf: Zipf
    path: Path
    build_seconds: float | None
    dim: int
    rng: random.Random = field(default_factory=lambda: random.Random(7))


def _document(name: str, tenant: str, project: str, content: str) -> KnowledgeDocument:
    import hashlib
    data = content.encode()
    return KnowledgeDocument(tenant_id=tenant, project_id=project, name=name,
                             format=DocumentFormat.MARKDOWN, media_type="text/markdown",
                             size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                             added_by="usr_bench")


def add_document(store: DocumentStore, name: str, texts: list[str], *, tenant: str = TENANT,
                 project: str = PROJECT, vectors: DocumentVectors | None = None,
                 dim: int = 0) -> None:
    """Add one READY document with ``texts`` as its chunks, through the port, and a random
    vector of ``dim`` numbers for each chunk when ``vectors`` is given."""
    doc = store.add_document(_document(name, tenant, project, name), **ROOMY)
    chunks = [Chunk(tenant_id=tenant, project_id=project, document_id=doc.id,
                    document_version=doc.version, ordinal=i, text=text,
                    section=f"{name} › part {i // 20}", line_start=1 + 20 * i,
                    line_end=20 + 20 * i) for i, text in enumerate(texts)]
    assert store.write_chunks(tenant, project, doc.id, doc.version, chunks, pages=None)
    if vectors is not None:
        random_vectors = np.random.default_rng(len(name) + len(texts)).standard_normal(
            (len(texts), dim), np.float32)
        assert vectors.write_vectors(tenant, project, doc.id, doc.version, MODEL,
                                     random_vectors)


def build(path: Path, args: argparse.Namespace) -> Corpus:
    """The store at ``path``, built unless a previous run built it with these sizes."""
    rng = random.Random(args.seed)
    zipf = Zipf(args.vocabulary, rng)
    stamp = path.with_suffix(".built.json")
    shape = {k: getattr(args, k) for k in ("chunks", "other_chunks", "documents", "words",
                                           "vocabulary", "seed", "dim")}
    # A store of another schema is built again.
    shape["tables"] = SqliteDocuments.tables + SqliteDocumentVectors.tables
    reuse = path.exists() and stamp.exists() and json.loads(stamp.read_text()) == shape
    if not reuse:
        for stale in path.parent.glob(path.name + "*"):
            stale.unlink()
    backend = SqliteBackend(path)
    store, vectors = backend.port(DocumentStore), backend.port(DocumentVectors)
    seconds = None
    if not reuse:
        start = time.perf_counter()
        per_doc = max(1, args.chunks // args.documents)
        plan = [(f"doc{n:03}.md", TENANT, min(per_doc, args.chunks - n * per_doc))
                for n in range(args.documents)]
        others = max(1, args.other_chunks // per_doc) if args.other_chunks else 0
        plan += [(f"other{n:03}.md", f"ten_other{n % 5}", min(per_doc, args.other_chunks -
                                                              n * per_doc))
                 for n in range(others)]
        for name, tenant, count in plan:
            if count > 0:
                add_document(store, name, [zipf.text(args.words) for _ in range(count)],
                             tenant=tenant, vectors=vectors if tenant == TENANT else None,
                             dim=args.dim)
        seconds = time.perf_counter() - start
        stamp.write_text(json.dumps(shape))
    return Corpus(backend, store, vectors, zipf, path, seconds, args.dim)


@dataclass
class Timing:
    label: str
    wall_ms: list[float]
    cpu_s: float
    holding: list[int]
    hits: int

    def row(self) -> dict[str, Any]:
        total_s = sum(self.wall_ms) / 1000
        return {"class": self.label, "queries": len(self.wall_ms),
                "p50_ms": pct(self.wall_ms, 50), "p95_ms": pct(self.wall_ms, 95),
                "p99_ms": pct(self.wall_ms, 99), "max_ms": max(self.wall_ms),
                "queries_per_s": len(self.wall_ms) / total_s if total_s else float("nan"),
                "cpu_ms_per_query": 1000 * self.cpu_s / len(self.wall_ms),
                "chunks_holding_median": statistics.median(self.holding) if self.holding
                else None, "hits": self.hits}


def holding(corpus: Corpus, word: str) -> int:
    """Chunks of the searched project that hold ``word`` (the FTS index, scoped)."""
    [(n,)] = corpus.backend.read(
        "SELECT COUNT(*) FROM knowledge_fts JOIN knowledge_chunks c ON c.id = "
        "knowledge_fts.rowid WHERE knowledge_fts MATCH ? AND c.tenant_id = ? AND "
        "c.project_id = ?", (f'"{word}"', TENANT, PROJECT))
    return int(n)


def queries(corpus: Corpus, count: int) -> Iterator[tuple[str, list[str], list[str]]]:
    """(class, query texts, the words whose frequency is reported) per class."""
    rng = corpus.rng
    pools = {label: corpus.zipf.between(*ranks) for label, ranks in CLASSES.items()}
    for label, pool in pools.items():
        words = [rng.choice(pool) for _ in range(count)]
        yield label, words, words[:20]
    sentences = [QUESTION.format(*(rng.choice(pools[c]) for c in ("rare", "mid", "common")))
                 for _ in range(count)]
    yield "question", sentences, []


def lexical(corpus: Corpus, count: int) -> list[Timing]:
    return _through(Retriever(corpus.documents, corpus.vectors), corpus, count)


class _RandomEmbedder:
    """The embeddings of a project whose endpoint answers a random vector at once."""

    model = MODEL

    def __init__(self, dim: int) -> None:
        self._rng, self._dim = np.random.default_rng(3), dim

    def for_project(self, tenant_id: str, project_id: str, *, query: bool,
                    settings: object = None) -> _RandomEmbedder:
        return self

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._rng.standard_normal((len(texts), self._dim), np.float32)


def hybrid(corpus: Corpus, count: int) -> list[Timing]:
    embeddings: Any = _RandomEmbedder(corpus.dim)
    return _through(Retriever(corpus.documents, corpus.vectors, cast(Embeddings, embeddings)),
                    corpus, count)


def vector(corpus: Corpus, count: int) -> list[Timing]:
    embedder = _RandomEmbedder(corpus.dim)
    corpus.vectors.search_vectors(TENANT, [PROJECT], MODEL, embedder.embed([""])[0], 20)

    def search(text: str) -> int:
        return len(corpus.vectors.search_vectors(TENANT, [PROJECT], MODEL,
                                                 embedder.embed([text])[0], 20))

    return [measure("random", [""] * count, search, [])]


def _through(retriever: Retriever, corpus: Corpus, count: int) -> list[Timing]:
    """Each query class through ``retriever.search`` (top 5, no minimum score)."""
    def search(text: str) -> int:
        return len(retriever.search(TENANT, [PROJECT], text, top_k=5, min_score=0.0))

    return [measure(label, texts, search, [holding(corpus, w) for w in sample])
            for label, texts, sample in queries(corpus, count)]


def measure(label: str, texts: list[str], search: Callable[[str], int],
            held: list[int]) -> Timing:
    for text in texts[:5]:  # warm the page cache and the statement cache
        search(text)
    wall, hits = [], 0
    cpu = own_cpu()
    for text in texts:
        start = time.perf_counter()
        hits += search(text)
        wall.append(1000 * (time.perf_counter() - start))
    return Timing(label, wall, own_cpu() - cpu, held, hits)


MODES: dict[str, Callable[[Corpus, int], list[Timing]]] = {
    "lexical": lexical, "vector": vector, "hybrid": hybrid}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--other-chunks", type=int, default=50_000)
    parser.add_argument("--documents", type=int, default=50)
    parser.add_argument("--words", type=int, default=180)
    parser.add_argument("--vocabulary", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--dim", type=int, default=384, help="numbers of a chunk's vector")
    parser.add_argument("--mode", choices=sorted(MODES), action="append",
                        help="repeatable; default all")
    parser.add_argument("--store", type=Path, help="build here (kept, reused if same shape)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vancetope-retrieval-") as tmp:
        path = args.store or Path(tmp) / "store.db"
        corpus = build(path, args)
        try:
            result: dict[str, Any] = {
                "chunks": args.chunks, "other_chunks": args.other_chunks,
                "build_s": corpus.build_seconds,
                "store_mb": round(path.stat().st_size / 1e6, 1),
                "modes": {mode: [t.row() for t in MODES[mode](corpus, args.queries)]
                          for mode in args.mode or list(MODES)}}
        finally:
            corpus.backend.close()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)
    return result


def report(result: dict[str, Any]) -> None:
    built = (f"built in {result['build_s']:.1f} s" if result["build_s"] is not None
             else "reused")
    print(f"store: {result['chunks']:,} chunks searched + {result['other_chunks']:,} of other "
          f"tenants, {result['store_mb']} MB ({built})")
    for mode, rows in result["modes"].items():
        print(f"\n{mode}: one search at a time, top 5")
        print(f"{'class':10} {'holding':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
              f"{'max ms':>8} {'q/s':>8} {'CPU ms/q':>9}")
        for r in rows:
            held = r["chunks_holding_median"]
            print(f"{r['class']:10} {'-' if held is None else f'{held:,.0f}':>8} "
                  f"{r['p50_ms']:>8.2f} "
                  f"{r['p95_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['max_ms']:>8.2f} "
                  f"{r['queries_per_s']:>8.1f} {r['cpu_ms_per_query']:>9.2f}")


if __name__ == "__main__":
    main()
