"""The lexical scores of one corpus are the same numbers on SQLite, PostgreSQL and MongoDB
(mongomock): one ranking (``store/ranking.py``), one tokeniser, the same statistics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import mongomock
import pytest

from vancetope_brain.store import DocumentStore
from vancetope_brain.store.mongo import MongoBackend
from vancetope_brain.store.postgres import PostgresBackend
from vancetope_brain.store.sqlite import SqliteBackend

from ._build import indexed

CORPUS = {
    "pumps.md": ["The pump needs oil every week.", "Oil the pump; check the belt and the oil.",
                 "Belts wear out: replace the belt yearly."],
    "garden.md": ["Water the ficus on Tuesday.", "The café crème machine — descale it monthly.",
                  "Naïve résumé of the pump room"],
}
QUERIES = ["pump oil", "belt", "ficus water tuesday", "cafe", "résumé pump", "oil belt ficus",
           "nothing matches"]


@pytest.fixture
def every(tmp_path: Path, postgres_url: str) -> Iterator[list[DocumentStore]]:
    backends = [SqliteBackend(tmp_path / "store.db"), PostgresBackend(postgres_url),
                MongoBackend.from_client(mongomock.MongoClient(tz_aware=True), "vancetope_agree")]
    stores = [backend.port(DocumentStore) for backend in backends]
    for store in stores:
        for name, texts in CORPUS.items():
            indexed(store, *texts, name=name)
        indexed(store, "pump oil " * 20, name="noise.md", tenant="ten_2")
    yield stores
    for backend in backends:
        backend.close()


@pytest.mark.parametrize("query", QUERIES)
def test_every_backend_returns_the_same_hits_and_scores(every: list[DocumentStore],
                                                        query: str) -> None:
    sqlite, postgres, mongo = ([(hit.citation.document_name, hit.chunk.ordinal, hit.score)
                                for hit in store.search_chunks("ten_1", ["prj_1"], query, 10)]
                               for store in every)
    assert sqlite == postgres == mongo
    assert all(0 < score <= 1 for *_, score in sqlite)
