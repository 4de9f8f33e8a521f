"""The memory port: the entries processes record, by scope, listed and searched lexically."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence

from vancetope_brain.errors import MemoryFull
from vancetope_brain.models.memory import (
    MAX_ENTRIES_PER_SCOPE,
    MAX_RESULTS,
    MAX_SCOPES,
    MemoryEntry,
    MemoryHit,
    MemoryKind,
    MemoryScope,
    ScopeRef,
)
from vancetope_brain.store.backend import Port
from vancetope_brain.store.ranking import Candidate, frequencies, score


class MemoryStore(Port):
    """``MemoryEntry`` records of a tenant, each in one scope (``ScopeRef``: level and id).

    Each call is one atomic read or write. ``record`` checks the scope's cap and inserts
    in one step: an entry refused is not stored at all. Listing and search read several
    scopes at once and return entries of those scopes only; which scopes, and in which order
    a caller weighs them (the cascade), is the caller's business. Search is lexical, with
    the terms of ``models.memory.terms`` on both the query and the entries, scored by the
    store's one ranking (``store/ranking.py``: BM25 normalised to 0..1) over the entries of
    the scopes asked (never another tenant's or scope's statistics), identically on every
    backend.
    """

    @abstractmethod
    def record(self, entry: MemoryEntry, *,
               limit: int = MAX_ENTRIES_PER_SCOPE) -> tuple[MemoryEntry, bool]:
        """Store the entry; ``(entry, True)``. If it has an ``idempotency_key`` already
        recorded by its process in its tenant, store nothing and return ``(first, False)``
        (even when the scope is full). Raises ``MemoryFull``, storing nothing, if its scope
        already holds ``limit`` entries; ``Conflict`` if its id exists."""

    @abstractmethod
    def get_memory(self, tenant_id: str, entry_id: str) -> MemoryEntry:
        """The entry. Raises ``NotFound``."""

    @abstractmethod
    def list_memory(self, tenant_id: str, scopes: Sequence[ScopeRef], *,
                    limit: int = 20,
                    kinds: Iterable[MemoryKind] | None = None) -> list[MemoryEntry]:
        """Entries of any of ``scopes`` (of those ``kinds``, if given), newest first (ties:
        the greater id first), at most ``limit`` (capped at ``MAX_RESULTS``)."""

    @abstractmethod
    def search_memory(self, tenant_id: str, scopes: Sequence[ScopeRef], query: str, *,
                      limit: int = 10) -> list[MemoryHit]:
        """Entries of any of ``scopes`` sharing a term with ``query`` (free text, never
        syntax), best first (ties: newest first, then the greater id), at most ``limit`` (capped at
        ``MAX_RESULTS``); a query without terms finds nothing."""

    @abstractmethod
    def delete_memory(self, tenant_id: str, entry_id: str) -> None:
        """Delete the entry (its slot in the scope's cap is free again). Raises
        ``NotFound``."""


def checked_scopes(scopes: Sequence[ScopeRef]) -> list[ScopeRef]:
    """The distinct scopes asked, in order. Raises ``ValueError`` past ``MAX_SCOPES``."""
    distinct = list(dict.fromkeys(ScopeRef(MemoryScope(level), scope_id)
                                  for level, scope_id in scopes))
    if len(distinct) > MAX_SCOPES:
        raise ValueError(f"at most {MAX_SCOPES} scopes at once, not {len(distinct)}")
    return distinct


def capped(limit: int) -> int:
    """A requested number of results, within 0..``MAX_RESULTS``."""
    return max(0, min(limit, MAX_RESULTS))


def memory_full(entry: MemoryEntry, limit: int) -> MemoryFull:
    """The adapters' error for a scope at its cap."""
    return MemoryFull(f"{entry.scope} {entry.scope_id} already holds {limit} memory entries "
                      "(the cap); delete one first")


def rank(candidates: Iterable[MemoryEntry], query: Sequence[str], *, entries: int,
         total_terms: int, limit: int) -> list[MemoryHit]:
    """Score ``candidates`` (every entry of the scopes asked that holds a query term) with
    ``ranking.score`` and keep the best ``limit``, best first by raw BM25 (ties: newest
    first, then the greater id).

    ``entries`` and ``total_terms`` are the count of entries in those scopes and the sum of
    their term counts (N and the lengths); n per term is counted over the candidates.
    """
    found = list(candidates)
    counted = [entry.indexed_terms() for entry in found]
    scores = score([Candidate(frequencies(terms, query), len(terms)) for terms in counted],
                   query, items=entries, total_length=total_terms)
    ranked = [(scored, entry) for scored, entry in zip(scores, found, strict=True)
              if scored.raw > 0]
    ranked.sort(key=lambda pair: pair[1].id, reverse=True)
    ranked.sort(key=lambda pair: (-pair[0].raw, -pair[1].created_at.timestamp()))
    return [MemoryHit(entry=entry, score=scored.score) for scored, entry in ranked[:capped(limit)]]
