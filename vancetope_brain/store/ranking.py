"""The one lexical score of the store: BM25 normalised to 0..1, for every port that searches
text (``DocumentStore.search_chunks``, ``MemoryStore.search_memory``) on every backend.

An adapter finds its candidates (the items of the searched scope holding a query term) its
own way, counts each candidate's query-term frequencies with its port's tokeniser, and hands
them here with the statistics of **the searched scope only** — the items a search may return
(a tenant's searched projects, or its asked memory scopes), never another tenant's, another
scope's or an outdated version's — so no one else's data moves a score.

**Raw score** (Okapi BM25, k1 = ``K1``, b = ``B``): the sum over the query terms ``t`` found in
an item of ``idf(t) · tf · (K1 + 1) / (tf + K1 · (1 − B + B · len / avglen))``, with Lucene's
always-positive ``idf(t) = ln(1 + (N − n + 0.5) / (n + 0.5))``: N the items of the scope, n
those holding ``t``, ``len`` the item's terms and ``avglen`` their mean over the scope (at
least 1). A term in every item still weighs, and a scope of one item scores.

**Normalised score**: ``s = raw / best``, ``best`` the query's best possible raw score,
what an endlessly repeated occurrence of every distinct query term (found or not)
approaches: the sum of ``idf(t) · (K1 + 1)``; ``s`` is the share of it an item reaches, as
the memory store always scored. The score is ``2s / (1 + s)`` (the harmonic mean of ``s``
and 1): 0 at 0, 1 at ``best``, strictly increasing, so it orders and ties exactly as the raw
score does, and it means the same whatever the scope's size: an item of average length
holding every query term once (``s = 1 / (K1 + 1)``) scores ``2 / (K1 + 2)`` = 0.625, in a
scope of one item too; one holding a quarter of the query's weight once ≈ 0.2.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

K1 = 1.2
"""BM25 term-frequency saturation."""
B = 0.75
"""BM25 length normalisation."""


class Candidate(NamedTuple):
    """One item a search may return: the frequencies of the query terms in it (absent or 0:
    not in it) and its length in terms (all of them, not only the query's)."""

    counts: Mapping[str, int]
    length: int


class Scored(NamedTuple):
    """A candidate's raw BM25 score and its normalised score (0..1, same order)."""

    raw: float
    score: float


def idf(items: int, holding: int) -> float:
    """Lucene's IDF of a term held by ``holding`` of ``items`` items (always > 0)."""
    return math.log(1 + (items - holding + 0.5) / (holding + 0.5))


def score(candidates: Sequence[Candidate], query: Sequence[str], *, items: int,
          total_length: int, holding: Mapping[str, int] | None = None) -> list[Scored]:
    """The scores of ``candidates`` for the distinct terms ``query``, in their order.

    ``items`` and ``total_length`` are N and the sum of the lengths over the searched scope
    (module docstring). ``holding`` is n per term; None counts it over ``candidates``,
    exact when they are every item of the scope holding a query term. N is taken as at
    least the candidates counted, so inconsistent counters cannot make an IDF negative.
    """
    terms = list(dict.fromkeys(query))
    if holding is None:
        holding = Counter(t for candidate in candidates for t in terms if candidate.counts.get(t))
    n = max(items, len(candidates))
    mean_length = max(total_length / n, 1.0) if n else 1.0
    weight = {t: idf(n, min(holding.get(t, 0), n)) for t in terms}
    best = sum(weight.values()) * (K1 + 1)
    scored = []
    for candidate in candidates:
        norm = K1 * (1 - B + B * candidate.length / mean_length)
        raw = 0.0
        for t in terms:
            tf = candidate.counts.get(t, 0)
            if tf > 0:
                raw += weight[t] * tf * (K1 + 1) / (tf + norm)
        share = min(raw / best, 1.0) if best > 0 else 0.0
        scored.append(Scored(raw, 2 * share / (1 + share)))
    return scored


def frequencies(tokens: Sequence[str], query: Sequence[str]) -> dict[str, int]:
    """How often each term of ``query`` occurs in ``tokens`` (terms absent left out)."""
    wanted = set(query)
    return dict(Counter(token for token in tokens if token in wanted))
