"""What a store derives from imported records holds even when the import is not in one go:
vectors imported after the store was searched are found at the next search."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tests.store_contract.transfer._used import MODEL, build, export_store, import_store
from vancetope_brain.store import Backend, DocumentVectors, TransferStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World


def test_vectors_imported_after_a_search_are_found_by_the_next_one(
        backend: Backend, world: World, other_storage: Storage) -> None:
    used = build(backend, world)
    exported = export_store(backend.port(TransferStore))
    target = other_storage.open_backend()
    vectors = exported.pop("knowledge_vectors")
    import_store(target.port(TransferStore), {**exported, "knowledge_vectors": []})
    query = np.array([1, 0, 0, 0], dtype=np.float32)

    def search(store: Backend) -> list[tuple[str, float]]:
        return [(hit.chunk.text, round(hit.score, 6)) for hit in store.port(
            DocumentVectors).search_vectors(used.tenants[0], ["default"], MODEL, query, 10)]

    assert search(target) == []
    assert target.port(TransferStore).import_records("knowledge_vectors", vectors) == len(vectors)
    assert search(target) == search(backend) != []
