"""``context.memory()``: the Memory API of a turn (arthur-engine §2.2 "RAG query with Scope
cascade, KG access, documents", §2.5 ``recordTurn``; issue 29).

A process sees the memory entries of its own scope chain, the *cascade*, innermost first:
its process, its session, its project, its project's group (when the project has one) and
its tenant. It searches them (``query``), reads one by id (``read``; an entry outside the
cascade reads exactly like a missing one) and records entries (``record``, ``record_turn``).
``documents()`` is the project's documents (``context.knowledge()``).

Idempotency: every record carries an idempotency key, so a re-run of a lane turn (after a
crash) records nothing twice. Without an explicit ``key`` it derives from the turn journal
(``TurnJournal.step_key``): the journal's turn, which another attempt of the same turn
adopts, plus the entry's content and its occurrence in the turn. An explicit ``key`` is the
caller's promise that the same key means the same entry for this process, in any turn.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from pydantic import ValidationError

from vancetope_brain.errors import Conflict, InvalidInput, NotFound, UserError
from vancetope_brain.models.knowledge import KnowledgeDocument
from vancetope_brain.models.memory import (
    KEY_CHARS,
    MAX_RESULTS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    SOURCE_CHARS,
    TAG_CHARS,
    MemoryEntry,
    MemoryHit,
    MemoryKind,
    MemoryScope,
    ScopeRef,
)
from vancetope_brain.store import IdentityStore, MemoryStore

if TYPE_CHECKING:
    from vancetope_brain.engines.context import ThinkEngineContext

log = logging.getLogger(__name__)

CASCADE = (MemoryScope.PROCESS, MemoryScope.SESSION, MemoryScope.PROJECT, MemoryScope.GROUP,
           MemoryScope.TENANT)
"""The levels of the scope chain, innermost first."""
DEFAULT_TOP_K = 5
"""Hits ``query`` returns unless told."""
REPORT_KEY = "report"
"""Idempotency key of a process's final report (``record_report``): one per process."""


@dataclass(frozen=True)
class MemoryAccess:
    """What the contexts of a worker need for memory: the store, and the identity store to
    find a project's group."""

    store: MemoryStore
    identity: IdentityStore

    def group_of(self, tenant_id: str, project_id: str) -> str | None:
        """The project's group, if it has one (a project the store does not know has none)."""
        try:
            return self.identity.get_project(tenant_id, project_id).group_id
        except NotFound:
            return None


class MemoryApi:
    """The memory of one process's scope chain. A context built without memory
    (``memory=None``) finds nothing and records nothing (``record`` raises ``Conflict``)."""

    def __init__(self, ctx: ThinkEngineContext, access: MemoryAccess | None,
                 step_key: Callable[[str], str]) -> None:
        self._ctx = ctx
        self._access = access
        self._step_key = step_key

    @cached_property
    def _group(self) -> str | None:
        """The project's group, looked up once per instance (a group changed meanwhile
        applies to the next ``context.memory()``)."""
        s = self._ctx.scope
        return self._access.group_of(s.tenant_id, s.project_id) if self._access else None

    def cascade(self) -> list[ScopeRef]:
        """The process's scopes, innermost first (the group only when its project has one)."""
        group = self._group
        return [self._own(MemoryScope.PROCESS), self._own(MemoryScope.SESSION),
                self._own(MemoryScope.PROJECT),
                *([ScopeRef(MemoryScope.GROUP, group)] if group else []),
                self._own(MemoryScope.TENANT)]

    def _own(self, level: MemoryScope) -> ScopeRef:
        """This process's scope at ``level``, any level but GROUP (which needs the project's
        record: ``_group``)."""
        s = self._ctx.scope
        return ScopeRef(level, {MemoryScope.PROCESS: s.process_id,
                                MemoryScope.SESSION: s.session_id,
                                MemoryScope.PROJECT: s.project_id,
                                MemoryScope.TENANT: s.tenant_id}[level])

    def query(self, text: str, *, scope: MemoryScope | str | None = None,
              top_k: int = DEFAULT_TOP_K, min_score: float = 0.0) -> list[MemoryHit]:
        """The entries bearing on ``text`` (free text, never syntax), each scoring at least
        ``min_score`` (0..1), at most ``top_k``: of one level of the cascade (``scope``), or
        of all of it, ordered by level innermost first and by score within a level (the
        scores come from one search over the whole cascade, so they compare across levels).
        Raises ``InvalidInput`` for a level that is not in the chain."""
        if self._access is None or top_k < 1:
            return []
        refs = self._refs(scope)
        hits = [hit for hit in self._access.store.search_memory(
            self._ctx.scope.tenant_id, refs, text, limit=MAX_RESULTS) if hit.score >= min_score]
        order = {ref: i for i, ref in enumerate(refs)}
        hits.sort(key=lambda hit: order[hit.entry.scope_ref])  # stable: by score within
        return hits[:top_k]

    def recent(self, *, scope: MemoryScope | str | None = None,
               limit: int = DEFAULT_TOP_K) -> list[MemoryEntry]:
        """The newest entries of one level of the cascade (``scope``) or of all of it,
        newest first, at most ``limit``. Raises ``InvalidInput`` as ``query``."""
        if self._access is None or limit < 1:
            return []
        return self._access.store.list_memory(self._ctx.scope.tenant_id, self._refs(scope),
                                              limit=limit)

    def read(self, entry_id: str) -> MemoryEntry:
        """The entry, if it lives in this process's cascade. Raises ``NotFound`` otherwise
        (another project's or tenant's entry reads exactly like a missing one)."""
        if self._access is not None:
            try:
                entry = self._access.store.get_memory(self._ctx.scope.tenant_id, entry_id)
            except NotFound:
                entry = None
            if entry is not None and entry.scope_ref in self.cascade():
                return entry
        raise NotFound(f"no memory entry {entry_id!r} in this process's scope")

    def record(self, text: str, *, kind: MemoryKind | str,
               tags: Iterable[str] = (), source: str | None = None,
               scope: MemoryScope | str = MemoryScope.PROJECT,
               key: str | None = None) -> str:
        """Record an entry at ``scope`` (project by default: later sessions of the project
        find it) and return its id. Idempotent: the same ``key`` (or, without one, the same
        entry in another attempt of this turn) returns the first entry's id and stores
        nothing. Raises ``InvalidInput`` (nothing stored) for text, tags, source or key past
        their caps or an unknown kind or level; ``MemoryFull`` when the scope is at its cap;
        ``Conflict`` when this context has no memory."""
        if self._access is None:
            raise Conflict("this process has no memory access")
        tags, where = list(tags), self._ref(scope)
        _check(text, tags, source, key)
        try:
            kind = MemoryKind(kind)
        except ValueError:
            raise InvalidInput(f"unknown memory kind {kind!r}; one of "
                               f"{', '.join(k.value for k in MemoryKind)}") from None
        if key is None:
            content = json.dumps([kind, where, text, tags, source or ""], ensure_ascii=False)
            key = self._step_key("mem:" + hashlib.sha256(content.encode()).hexdigest()[:32])
        else:
            key = f"key:{key}"
        s = self._ctx.scope
        try:
            entry = MemoryEntry(
                tenant_id=s.tenant_id, scope=where.level, scope_id=where.id,
                project_id=None if where.level is MemoryScope.TENANT else s.project_id,
                session_id=s.session_id, process_id=s.process_id, kind=kind, text=text,
                tags=tags, source=source or "", idempotency_key=key)
        except ValidationError as e:
            raise InvalidInput(f"memory entry refused: {e.errors()[0]['msg']}") from None
        return self._access.store.record(entry)[0].id

    def record_turn(self, text: str, *, tags: Iterable[str] = (),
                    source: str | None = None, key: str | None = None) -> str:
        """``recordTurn``: what this turn noted, in the process's own working memory (kind
        TURN, process scope); as ``record``."""
        return self.record(text, kind=MemoryKind.TURN, tags=tags, source=source,
                           scope=MemoryScope.PROCESS, key=key)

    def documents(self) -> list[KnowledgeDocument]:
        """The project's documents (``context.knowledge().documents()``)."""
        return self._ctx.knowledge().documents()

    def _refs(self, scope: MemoryScope | str | None) -> list[ScopeRef]:
        return self.cascade() if scope is None else [self._ref(scope)]

    def _ref(self, scope: MemoryScope | str) -> ScopeRef:
        """This process's scope at ``scope``'s level. Raises ``InvalidInput`` for an unknown
        level, or GROUP when the project has no group."""
        try:
            level = MemoryScope(scope)
        except ValueError:
            raise InvalidInput(f"unknown memory scope {scope!r}; one of "
                               f"{', '.join(CASCADE)}") from None
        if level is not MemoryScope.GROUP:  # known without reading the project (a turn's
            return self._own(level)         # memory summary asks for its project's scope)
        if self._group is None:
            raise InvalidInput(f"this process's project belongs to no group: there is no "
                               f"{level} scope")
        return ScopeRef(level, self._group)


def _check(text: str, tags: Sequence[str], source: str | None, key: str | None) -> None:
    """The caps of an entry (``models/memory.py``), as ``InvalidInput`` naming the field."""
    if not text.strip():
        raise InvalidInput("a memory entry needs text")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInput(f"a memory entry's text is at most {MAX_TEXT_CHARS} characters, "
                           f"not {len(text)}")
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"a memory entry has at most {MAX_TAGS} tags, not {len(tags)}")
    if any(not isinstance(t, str) or not t or len(t) > TAG_CHARS for t in tags):
        raise InvalidInput(f"a memory entry's tags are texts of 1 to {TAG_CHARS} characters")
    if source is not None and len(source) > SOURCE_CHARS:
        raise InvalidInput(f"a memory entry's source is at most {SOURCE_CHARS} characters")
    if key is not None and not 0 < len(key) <= KEY_CHARS - len("key:"):
        raise InvalidInput(f"a memory key is 1 to {KEY_CHARS - len('key:')} characters")


def record_report(context: ThinkEngineContext, *, goal: str, summary: str,
                  source: str) -> str | None:
    """A worker's final report (marvin's root aggregate, vogon's synthesis) recorded as a
    project memory entry (kind REPORT; goal and summary, cut to the cap), so later sessions
    of the project find it; its id (the done event's ``report_id``). One per process (key
    ``REPORT_KEY``): another attempt of the turn gets the same id. None, logged, when memory
    refuses it (no memory, the scope full): the report still reaches the parent."""
    text = f"{goal.strip()}\n\n{summary.strip()}".strip()
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS - 1] + "…"
    try:
        return context.memory().record(text, kind=MemoryKind.REPORT, source=source,
                                       tags=("report",), key=REPORT_KEY)
    except UserError as e:
        log.warning("the report of %s was not recorded as memory: %s",
                    context.scope.process_id, e)
        return None
