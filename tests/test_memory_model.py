"""Memory entries: each names its scope consistently with where its process ran, within the
documented caps; ``terms`` cuts free text into the terms both stores index."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from vancetope_brain.models.memory import (
    MAX_QUERY_TERMS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    MemoryEntry,
    MemoryKind,
    MemoryScope,
    query_terms,
    terms,
)


def _entry(scope: MemoryScope, scope_id: str, **fields: Any) -> MemoryEntry:
    return MemoryEntry(**{"tenant_id": "ten_1", "scope": scope, "scope_id": scope_id,
                          "project_id": "prj_1", "session_id": "ses_1", "process_id": "proc_1",
                          "kind": MemoryKind.NOTE, "text": "a note", **fields})


@pytest.mark.parametrize(("scope", "scope_id"), [
    (MemoryScope.PROCESS, "proc_1"), (MemoryScope.SESSION, "ses_1"),
    (MemoryScope.PROJECT, "prj_1"), (MemoryScope.GROUP, "grp_1")])
def test_a_scope_id_is_the_id_of_its_level(scope: MemoryScope, scope_id: str) -> None:
    assert _entry(scope, scope_id).id.startswith("mem_")
    if scope is not MemoryScope.GROUP:  # a group is not among the ids an entry carries
        with pytest.raises(ValidationError, match="scopeId is its"):
            _entry(scope, "other")


def test_only_a_tenant_entry_has_no_project() -> None:
    assert _entry(MemoryScope.TENANT, "ten_1", project_id=None).project_id is None
    with pytest.raises(ValidationError, match="projectId"):
        _entry(MemoryScope.TENANT, "ten_1")
    with pytest.raises(ValidationError, match="projectId"):
        _entry(MemoryScope.GROUP, "grp_1", project_id=None)


@pytest.mark.parametrize("fields", [
    {"text": "x" * (MAX_TEXT_CHARS + 1)}, {"text": ""},
    {"tags": [f"t{i}" for i in range(MAX_TAGS + 1)]}, {"tags": [""]}, {"tags": ["t" * 65]},
    {"source": "s" * 513}, {"idempotency_key": ""}])
def test_caps_are_held(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        _entry(MemoryScope.PROJECT, "prj_1", **fields)


def test_terms_are_letters_and_digits_folded() -> None:
    assert terms('"Launch" OR friday* NEAR(x,2) snake_case Straße ＡＢＣ ' + "z" * 65) == [
        "launch", "or", "friday", "near", "x", "2", "snake", "case", "strasse", "abc"]
    assert query_terms("a a b " + " ".join(f"w{i}" for i in range(40))) == [
        "a", "b", *(f"w{i}" for i in range(MAX_QUERY_TERMS - 2))]
