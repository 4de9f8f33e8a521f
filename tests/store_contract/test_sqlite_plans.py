"""SQLite: the reads a turn or a request makes, whose cost must not grow with a process's
or a user's history, are index lookups. A filter that drifts from its index's expression
(they must match word for word) silently turns one into a scan of the whole history."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vancetope_brain.models import SessionStatus
from vancetope_brain.models.memory import MemoryKind, MemoryScope, ScopeRef
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import (
    DocumentStore,
    LaneStore,
    MemoryStore,
    SessionSearch,
    SessionStore,
    SettingStore,
)
from vancetope_brain.store.sqlite import SqliteBackend

READS: dict[str, tuple[str, Callable[[Any], object]]] = {
    "the last turn": ("turns_by_process",
                      lambda p: p(LaneStore).turn_records("ten_1", "proc_1", last=1)),
    "the last turn of a lifecycle call": (
        "turns_by_lifecycle",
        lambda p: p(LaneStore).turn_records("ten_1", "proc_1", lifecycle="start", last=1)),
    "a page of the user's sessions": (
        "sessions_by_user", lambda p: p(SessionStore).list_sessions(
            "ten_1", "usr_1", cursor="1700000000000|7", limit=50)),
    "a page of the user's sessions of one status": (
        "sessions_by_status", lambda p: p(SessionStore).list_sessions(
            "ten_1", "usr_1", status=SessionStatus.CLOSED, cursor="1700000000000|7", limit=50)),
    "the user's sessions counted per status": (
        "sessions_by_status", lambda p: p(SessionStore).count_sessions("ten_1", "usr_1",
                                                                       cap=1000)),
    "the user's sessions a search reads": (
        "sessions_open", lambda p: p(SessionSearch).search_sessions("ten_1", "usr_1", "budget")),
    "a project's documents": (
        "knowledge_documents_by_name",
        lambda p: p(DocumentStore).list_documents("ten_1", "prj_1")),
    "a document's passages at a citation's position": (
        "knowledge_chunks_by_document", lambda p: p(DocumentStore).read_chunks(
            "ten_1", "prj_1", "doc_1", section="Care", page=2, lines=(3, 9))),
    "a setting at every scope of the cascade": (
        "sqlite_autoindex_settings_1", lambda p: p(SettingStore).setting_values(
            "ten_1", [SettingScope.user("usr_1"), SettingScope.project("prj_1"),
                      SettingScope.tenant()], "llm.model")),
    "the newest memory of each scope of the cascade": (
        "memory_by_scope", lambda p: p(MemoryStore).list_memory(
            "ten_1", [ScopeRef(MemoryScope.SESSION, "ses_1"), ScopeRef(MemoryScope.PROJECT, "p")],
            kinds=[MemoryKind.REPORT, MemoryKind.FACT])),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_bounded_read_searches_its_index(tmp_path: Path, read: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    index, call = READS[read]
    backend = SqliteBackend(str(tmp_path / "vancetope.db"))
    ran: list[tuple[str, tuple[Any, ...]]] = []
    original = backend.read

    def traced(sql: str, params: tuple[Any, ...]) -> list[Any]:
        ran.append((sql, params))
        return original(sql, params)

    monkeypatch.setattr(backend, "read", traced)
    call(backend.port)
    assert ran, f"{read} made no read"
    for sql, params in ran:
        plan = " | ".join(row[3] for row in original(f"EXPLAIN QUERY PLAN {sql}", params))
        assert f"INDEX {index}" in plan and "TEMP B-TREE" not in plan, (sql, plan)
    backend.close()
