"""Document ingestion throughput: PDF pages/s and Markdown through the real job (issue 29).

    python benchmarks/ingest.py [--pdfs 6] [--pages 50] [--markdown 6] [--md-kb 200]

Each file goes the product's way: ``DocumentService.add`` (format check, the store's caps,
the bytes kept under a temp folder, the job queued to a list here), then the worker's
``DocumentIndexer.index`` of the job — mark INDEXING, ``parsing.parse`` (a PDF in a
bounded child process forked by the warm reader, ``knowledge/pdf.py``), chunking,
``write_chunks`` into a fresh SQLite store, READY — with the ``document-updated`` pushes going to the real Redis (a database
claimed for the run, ``benchmarks/_redis.py``; FLUSHED at start and end).

PDFs: ``--pdfs`` files of ``--pages`` pages, each page 40 lines of Zipf words in Helvetica
(``tests/knowledge/pdfs.py``'s ``text_pdf``; ~2,900 characters a page). Markdown: ``--markdown``
files of ``--md-kb`` KB (a heading every 30 lines). Printed: pages/s (PDF), KB/s and chunks/s,
and the same per CPU second of the job (this process's, the warm PDF reader's and its
children's: the figure a loaded machine moves least),
the index job's p50 per file, and what a PDF's job spends in the child process (``read_pdf``
alone, on the same bytes) and in one near-empty child (a 1-page PDF: the fork and the
round trip; the warm reader's own start, once per process, is left out by a first file).
No peer comparison: the LangGraph peer ingests nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _proc import cpu_seconds, tree  # noqa: E402
from _redis import check_url, claimed_db, reset  # noqa: E402
from retrieval import Zipf  # noqa: E402

from tests.knowledge.pdfs import text_pdf  # noqa: E402
from vancetope_brain.events import EventBus  # noqa: E402
from vancetope_brain.identity import Principal  # noqa: E402
from vancetope_brain.knowledge.pdf import read_pdf  # noqa: E402
from vancetope_brain.models import Tenant, User  # noqa: E402
from vancetope_brain.models.identity import Project  # noqa: E402
from vancetope_brain.services.document_files import DocumentFiles  # noqa: E402
from vancetope_brain.services.documents import (  # noqa: E402
    DocumentIndexer,
    DocumentPushes,
    DocumentService,
    IndexJob,
)
from vancetope_brain.store import DocumentStore, DocumentVectors, IdentityStore  # noqa: E402
from vancetope_brain.store.sqlite import SqliteBackend  # noqa: E402


def pdf_file(zipf: Zipf, pages: int) -> bytes:
    return text_pdf([[zipf.text(12).rstrip(".") for _ in range(40)] for _ in range(pages)])


def markdown_file(zipf: Zipf, kb: int) -> bytes:
    out, n = [], 0
    while sum(map(len, out)) < kb * 1024:
        if n % 30 == 0:
            out.append(f"## Section {n // 30}\n")
        out.append(zipf.text(12) + "\n")
        n += 1
    return "".join(out).encode()


def run(args: argparse.Namespace, redis_url: str, tmp: Path) -> dict[str, Any]:
    import random
    zipf = Zipf(20_000, random.Random(args.seed))
    backend = SqliteBackend(tmp / "store.db")
    identity = backend.port(IdentityStore)
    identity.create_tenant(Tenant(id="ten_bench", name="bench"))
    identity.create_user(User(id="usr_bench", tenant_id="ten_bench", name="bench"))
    project = Project(id="prj_bench", tenant_id="ten_bench", name="bench")
    identity.create_project(project)
    who = Principal(tenant_id="ten_bench", user_id="usr_bench")
    events = EventBus(redis.Redis.from_url(redis_url), max_len=1000, ttl=600)
    queued: list[dict[str, Any]] = []
    service = DocumentService.on(backend, tmp / "files", events, queued.append)
    indexer = DocumentIndexer(documents=backend.port(DocumentStore),
                              vectors=backend.port(DocumentVectors),
                              files=DocumentFiles(tmp / "files"), pushes=DocumentPushes(events))

    cpu = [0.0]

    def ingest(name: str, data: bytes) -> tuple[float, int]:
        service.add(who, project.id, name, data)
        job = IndexJob.model_validate(queued.pop())
        start, cpu_start = time.perf_counter(), _cpu()
        status = indexer.index(job)
        took = time.perf_counter() - start
        cpu[0] += _cpu() - cpu_start
        doc = service.get(who, project.id, job.document_id)
        assert status is not None and status.value == "READY", (name, doc.error)
        return took, doc.chunk_count

    result: dict[str, Any] = {}
    if args.pdfs:
        pdfs = [pdf_file(zipf, args.pages) for _ in range(args.pdfs)]
        ingest("warm.pdf", pdf_file(zipf, 1))
        cpu[0] = 0.0
        took = [ingest(f"f{n}.pdf", data) for n, data in enumerate(pdfs)]
        pdf_cpu = cpu[0]
        child = [_timed(lambda d=data: read_pdf(d, name="x.pdf", max_chars=10**8))  # type: ignore[misc]
                 for data in pdfs]
        one_page = pdf_file(zipf, 1)
        empty = [_timed(lambda: read_pdf(one_page, name="x.pdf", max_chars=10**8))
                 for _ in range(5)]
        seconds = sum(t for t, _ in took)
        result["pdf"] = {
            "files": len(pdfs), "pages_per_file": args.pages,
            "kb_per_file": round(statistics.mean(map(len, pdfs)) / 1024, 1),
            "pages_per_s": args.pages * len(pdfs) / seconds,
            "pages_per_cpu_s": args.pages * len(pdfs) / pdf_cpu,
            "chunks_per_s": sum(c for _, c in took) / seconds,
            "job_p50_ms": 1000 * statistics.median(t for t, _ in took),
            "read_pdf_p50_ms": 1000 * statistics.median(child),
            "one_page_child_p50_ms": 1000 * statistics.median(empty)}
    if args.markdown:
        docs = [markdown_file(zipf, args.md_kb) for _ in range(args.markdown)]
        cpu[0] = 0.0
        took = [ingest(f"f{n}.md", data) for n, data in enumerate(docs)]
        seconds = sum(t for t, _ in took)
        result["markdown"] = {
            "files": len(docs), "kb_per_file": args.md_kb,
            "kb_per_s": sum(map(len, docs)) / 1024 / seconds,
            "kb_per_cpu_s": sum(map(len, docs)) / 1024 / cpu[0],
            "chunks_per_s": sum(c for _, c in took) / seconds,
            "job_p50_ms": 1000 * statistics.median(t for t, _ in took)}
    backend.close()
    return result


def _cpu() -> float:
    """CPU seconds of this process and of the PDF readers: the warm reader processes (alive,
    from ``/proc``) with the children they forked and reaped, and the finished ones."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    readers = cpu_seconds(tree(os.getpid())[1:], reaped=True)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + readers


def _timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pdfs", type=int, default=6)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--markdown", type=int, default=6)
    parser.add_argument("--md-kb", type=int, default=200)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--redis-url", help="pin the run's Redis database (loopback)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if error := check_url(args.redis_url):
        parser.error(error)
    with claimed_db(args.redis_url) as url, \
            tempfile.TemporaryDirectory(prefix="vancetope-ingest-") as tmp:
        reset(url)
        try:
            result = run(args, url, Path(tmp))
        finally:
            reset(url)
    if args.json:
        print(json.dumps(result, indent=2))
        return result
    if pdf := result.get("pdf"):
        print(f"PDF: {pdf['files']} files × {pdf['pages_per_file']} pages "
              f"({pdf['kb_per_file']} KB each): {pdf['pages_per_s']:.1f} pages/s "
              f"({pdf['pages_per_cpu_s']:.1f} per CPU second, the reader's included), "
              f"{pdf['chunks_per_s']:.0f} chunks/s; index job p50 {pdf['job_p50_ms']:.0f} ms "
              f"per file, of which the child process (read_pdf alone) "
              f"{pdf['read_pdf_p50_ms']:.0f} ms; a 1-page PDF's child "
              f"{pdf['one_page_child_p50_ms']:.0f} ms")
    if md := result.get("markdown"):
        print(f"Markdown: {md['files']} files × {md['kb_per_file']} KB: "
              f"{md['kb_per_s']:.0f} KB/s ({md['kb_per_cpu_s']:.0f} per CPU second), "
              f"{md['chunks_per_s']:.0f} chunks/s; index job p50 "
              f"{md['job_p50_ms']:.0f} ms per file")
    return result


if __name__ == "__main__":
    main()
