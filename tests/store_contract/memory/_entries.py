"""Builders the memory contract tests share."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from vancetope_brain.models import new_id
from vancetope_brain.models.memory import MemoryEntry, MemoryKind, MemoryScope, ScopeRef

T0 = datetime.fromisoformat("2026-12-01T09:00:00+00:00")


def entry(text: str = "The launch moved to Friday.", *, tenant: str = "ten_a",
          scope: MemoryScope = MemoryScope.PROJECT, project: str = "default",
          session: str = "ses_1", process: str = "proc_1", group: str = "grp_1",
          minute: int = 0, **fields: Any) -> MemoryEntry:
    """An unsaved entry of a process of ``session`` in ``project``, at ``scope``, made
    ``minute`` minutes after ``T0``."""
    scope_id = {MemoryScope.PROCESS: process, MemoryScope.SESSION: session,
                MemoryScope.PROJECT: project, MemoryScope.GROUP: group,
                MemoryScope.TENANT: tenant}[scope]
    return MemoryEntry(**{
        "id": new_id("mem"), "tenant_id": tenant, "scope": scope, "scope_id": scope_id,
        "project_id": None if scope is MemoryScope.TENANT else project,
        "session_id": session, "process_id": process, "kind": MemoryKind.NOTE, "text": text,
        "created_at": T0 + timedelta(minutes=minute), **fields})


def project(project_id: str = "default") -> ScopeRef:
    return ScopeRef(MemoryScope.PROJECT, project_id)
