"""Embeddings: the vectors of texts, from an OpenAI-compatible ``/v1/embeddings`` reached
through the LLM endpoint profiles (``llm/profiles.py``; issue 29 item 2).

Which endpoint: the setting ``rag.embedding.profile`` names a profile, ``rag.embedding.model``
the model (unset: the profile's own ``model``). Both are read at the project's scope (the
project's value, else the tenant's; a user's value does not apply: the documents are the
project's, embedded once for every user). Profile unset: no embeddings, search is lexical.

``Embedder.embed`` asks the real ``openai`` client, ``MAX_BATCH`` texts a request, each cut
to ``MAX_TEXT_CHARS``, and checks the answer: one vector per text (by ``index``), one
dimension for all (1 to ``MAX_DIM``), finite numbers, not all zero. What it returns is a
float32 matrix of unit rows, so a dot product is the cosine. An endpoint that fails raises
``EmbeddingFailed``; one that answers anything else ``EmbeddingInvalid`` — neither message
holds the API key or the endpoint's own words (which may echo it): the URL without user info
or query, the model, the status or the kind of failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vancetope_brain.errors import EmbeddingFailed, EmbeddingInvalid
from vancetope_brain.llm.endpoint import safe_url
from vancetope_brain.llm.profiles import Profile, load_profiles
from vancetope_brain.settings import SettingsApi

if TYPE_CHECKING:
    from vancetope_brain.config import Config
    from vancetope_brain.settings import SettingsService

MAX_BATCH = 64
"""Texts one request embeds; more are sent in several requests."""
MAX_TEXT_CHARS = 8_000
"""Characters of one text sent (a chunk has at most 1,200, a query 4,000)."""
MAX_DIM = 4_096
"""The largest dimension an answer may have (``embedding_invalid`` beyond)."""
QUERY_TIMEOUT = 5.0
"""Seconds a search waits for its query's vector (at most the profile's timeout), with no
retry: a turn must not stall on it; failing, the search is lexical."""
INDEX_TIMEOUT = 60.0
"""Seconds one indexing request may take (at most the profile's timeout; the profile's
retries apply)."""
_PLACEHOLDER_KEY = "not-needed"  # as in openai_provider: the client wants some key


@dataclass(frozen=True)
class Embedder:
    """One model on one endpoint, with the bounds of its use (query or indexing)."""

    profile: Profile
    model: str
    timeout: float
    max_retries: int

    def __repr__(self) -> str:  # never the key
        return f"Embedder({self.model!r} at {safe_url(self.profile.base_url or '')})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The unit vectors of ``texts``, a (len(texts), dim) float32 matrix. Raises
        ``EmbeddingFailed`` / ``EmbeddingInvalid`` (module docstring)."""
        # Imported here: only a process that embeds pays the openai import (over a second).
        import openai

        rows: list[np.ndarray] = []
        try:
            with openai.OpenAI(api_key=self.profile.api_key or _PLACEHOLDER_KEY,
                               base_url=self.profile.base_url, timeout=self.timeout,
                               max_retries=self.max_retries) as client:
                for start in range(0, len(texts), MAX_BATCH):
                    batch = [text[:MAX_TEXT_CHARS] for text in texts[start:start + MAX_BATCH]]
                    answer = client.embeddings.create(model=self.model, input=batch,
                                                      encoding_format="float")
                    rows.extend(self._vectors(answer, len(batch)))
        except openai.OpenAIError as e:
            raise EmbeddingFailed(f"{self._where()} {_failure(e)}") from None
        if len({row.shape[0] for row in rows}) > 1:
            raise EmbeddingInvalid(f"{self._where()} answered vectors of several dimensions")
        return np.vstack(rows) if rows else np.zeros((0, 0), np.float32)

    def _vectors(self, answer: Any, count: int) -> list[np.ndarray]:
        """The ``count`` unit vectors of one answer, in the order of the texts asked."""
        try:
            data = list(answer.data)
            by_index = {int(item.index): item.embedding for item in data}
            if len(data) != count or sorted(by_index) != list(range(count)):
                raise EmbeddingInvalid(f"{self._where()} answered {len(data)} vectors for "
                                       f"{count} texts")
            vectors = [np.asarray(by_index[i], dtype=np.float64) for i in range(count)]
        except (AttributeError, TypeError, ValueError) as e:
            raise EmbeddingInvalid(f"{self._where()} answered no embeddings "
                                   f"({type(e).__name__})") from None
        unit = []
        for vector in vectors:
            if vector.ndim != 1 or not 1 <= vector.shape[0] <= MAX_DIM:
                raise EmbeddingInvalid(f"{self._where()} answered a vector of shape "
                                       f"{vector.shape} (1 to {MAX_DIM} numbers)")
            norm = float(np.linalg.norm(vector))
            if not np.isfinite(vector).all() or not norm > 0 or not np.isfinite(norm):
                raise EmbeddingInvalid(f"{self._where()} answered a vector that is not "
                                       "finite, or all zero")
            unit.append((vector / norm).astype(np.float32))
        return unit

    def _where(self) -> str:
        return f"embedding endpoint {safe_url(self.profile.base_url or '')} (model {self.model})"


def _failure(e: Exception) -> str:
    """What went wrong, in words of ours (the endpoint's may echo the key)."""
    import openai

    if isinstance(e, openai.APITimeoutError):
        return "timed out"
    if isinstance(e, openai.APIConnectionError):
        return "is unreachable"
    if isinstance(e, openai.APIStatusError):
        return f"answered HTTP {e.status_code}"
    return f"failed ({type(e).__name__})"


class Embeddings:
    """The embedder of a tenant's project, by the settings (module docstring)."""

    def __init__(self, profiles: Mapping[str, Profile], settings: SettingsService) -> None:
        self._profiles = profiles
        self._settings = settings

    @classmethod
    def from_config(cls, config: Config, settings: SettingsService) -> Embeddings:
        return cls(load_profiles(config), settings)

    def for_project(self, tenant_id: str, project_id: str, *, query: bool,
                    settings: SettingsApi | None = None) -> Embedder | None:
        """The project's embedder (None: no ``rag.embedding.profile``), bounded for a search
        (``query``) or for indexing. ``settings``: the project's, already read by the caller
        (``SettingsApi.without_user``); None: read here. Raises ``EmbeddingFailed`` when the
        setting names a profile that is not configured or that is the offline demo model."""
        api = settings or SettingsApi(self._settings, tenant_id, project_id, None)
        name: str | None = api.get("rag.embedding.profile")
        if name is None:
            return None
        profile = self._profiles.get(name)
        if profile is None or profile.base_url is None:
            why = "is the offline demo model, which has no embeddings" if profile else \
                f"is not configured (known: {', '.join(sorted(self._profiles))})"
            raise EmbeddingFailed(f"rag.embedding.profile names the profile {name!r}, which "
                                  f"{why}")
        model = api.get("rag.embedding.model") or profile.model
        if query:
            return Embedder(profile, model, min(profile.timeout, QUERY_TIMEOUT), 0)
        return Embedder(profile, model, min(profile.timeout, INDEX_TIMEOUT), profile.max_retries)
