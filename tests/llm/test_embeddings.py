"""Embeddings (``llm/embeddings.py``) through the real ``openai`` client against the fake
OpenAI-compatible server: batches, unit vectors in the texts' order, every kind of garbage an
``embedding_invalid``, an endpoint down an ``embedding_failed`` without the key; and which
endpoint and model a project's settings choose."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import numpy as np
import pytest

from tests.llm.fake_openai_server import EMBEDDING_DIM, FakeOpenAiServer, HttpError, Raw, Stall
from vancetope_brain.errors import EmbeddingFailed, EmbeddingInvalid, InvalidInput
from vancetope_brain.llm.embeddings import (
    MAX_BATCH,
    MAX_DIM,
    MAX_TEXT_CHARS,
    QUERY_TIMEOUT,
    Embedder,
    Embeddings,
)
from vancetope_brain.llm.profiles import Profile
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.settings import SettingsApi, SettingsService
from vancetope_brain.store import IdentityStore, SettingStore

KEY = "sk-embedsecret123456"


@pytest.fixture
def server() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as fake:
        fake.teach({"automobile": "car", "car": "car", "upkeep": "care", "maintenance": "care"})
        yield fake


def embedder(server: FakeOpenAiServer) -> Embedder:
    return Embedder(Profile("embed", server.base_url, "toy-embed", KEY), "toy-embed", 5.0, 0)


def test_texts_are_embedded_in_batches_as_unit_vectors_in_their_order(server):
    texts = [f"text {i}" for i in range(MAX_BATCH + 2)]
    texts[1] = "automobile upkeep"
    texts[-1] = "car maintenance" + " x" * MAX_TEXT_CHARS
    vectors = embedder(server).embed(texts)
    assert vectors.shape == (MAX_BATCH + 2, EMBEDDING_DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert float(vectors[1] @ vectors[-1]) == pytest.approx(1.0)  # same concepts
    assert float(vectors[0] @ vectors[1]) < 0.1
    bodies = [r.body for r in server.requests]
    assert [len(b["input"]) for b in bodies] == [MAX_BATCH, 2]
    assert {(b["model"], b["encoding_format"]) for b in bodies} == {("toy-embed", "float")}
    assert len(bodies[1]["input"][1]) == MAX_TEXT_CHARS
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def _data(*vectors: object, indexes: list[int] | None = None) -> str:
    return json.dumps({"object": "list", "data": [
        {"object": "embedding", "index": i if indexes is None else indexes[i], "embedding": v}
        for i, v in enumerate(vectors)]})


@pytest.mark.parametrize("body", [
    _data([1.0, 0.0]),  # one vector for two texts
    _data([1.0, 0.0], [1.0, 0.0], [0.0, 1.0]),  # three
    _data([1.0, 0.0], [1.0, 0.0], indexes=[0, 0]),  # an index twice
    _data([1.0, 0.0], [1.0, 0.0, 0.0]),  # two dimensions
    _data([1.0, 0.0], [0.0, 0.0]),  # a zero vector
    _data([1.0, 0.0], [1e999, 0.0]),  # infinite
    _data([1.0, 0.0], ["a", "b"]),  # not numbers
    _data([1.0, 0.0], [[1.0], [0.0]]),  # not flat
    _data([1.0, 0.0], []),  # empty
    _data([1.0] * (MAX_DIM + 1), [1.0] * (MAX_DIM + 1)),  # too long
    '{"object": "list"}',  # no data
    '{"data": "nope"}',
    "[1, 2]",
])
def test_garbage_is_embedding_invalid(server, body):
    server.break_embeddings(Raw(body, content_type="application/json"))
    with pytest.raises(EmbeddingInvalid) as raised:
        embedder(server).embed(["first", "second"])
    assert raised.value.code == "embedding_invalid"


def test_a_web_page_is_embedding_invalid(server):
    server.break_embeddings(Raw("<html>login</html>", content_type="text/html"))
    with pytest.raises(EmbeddingInvalid):
        embedder(server).embed(["first"])


def test_an_endpoint_down_is_embedding_failed_and_never_shows_the_key(server):
    server.break_embeddings(HttpError(500, f"boom, your key {KEY} is fine"))
    with pytest.raises(EmbeddingFailed) as raised:
        embedder(server).embed(["first"])
    assert type(raised.value) is EmbeddingFailed and raised.value.code == "embedding_failed"
    assert "HTTP 500" in str(raised.value) and KEY not in str(raised.value)
    assert "toy-embed" in str(raised.value)
    url = server.base_url
    server.__exit__(None, None, None)
    with pytest.raises(EmbeddingFailed, match="unreachable"):
        Embedder(Profile("embed", url, "m", KEY), "m", 2.0, 0).embed(["first"])


def test_a_stalled_endpoint_is_given_up_at_the_timeout(server):
    server.break_embeddings(Stall(10))
    began = time.monotonic()
    with pytest.raises(EmbeddingFailed, match="timed out"):
        Embedder(Profile("embed", server.base_url, "m"), "m", 0.5, 0).embed(["first"])
    assert time.monotonic() - began < 3


@pytest.fixture
def settings(acme_store) -> SettingsService:
    return SettingsService(acme_store.port(SettingStore), acme_store.port(IdentityStore))


def test_the_projects_settings_choose_the_profile_and_the_model(settings):
    profiles = {"default": Profile("default", None, "demo"),
                "embed": Profile("embed", "http://127.0.0.1:9/v1", "toy-embed", timeout=30.0,
                                 max_retries=3)}
    embeddings = Embeddings(profiles, settings)
    assert embeddings.for_project("acme", "p1", query=True) is None  # unset: lexical only
    settings.set("acme", SettingScope.tenant(), "rag.embedding.profile", "embed")
    chosen = embeddings.for_project("acme", "p1", query=True)
    assert chosen is not None
    assert (chosen.model, chosen.timeout, chosen.max_retries) == ("toy-embed", QUERY_TIMEOUT, 0)
    settings.set("acme", SettingScope.project("p1"), "rag.embedding.model", "big-embed")
    chosen = embeddings.for_project("acme", "p1", query=False)
    assert chosen is not None
    assert (chosen.model, chosen.timeout, chosen.max_retries) == ("big-embed", 30.0, 3)
    for bad in ("", "two words", "m" * 201):
        with pytest.raises(InvalidInput, match="rag.embedding.model"):
            settings.set("acme", SettingScope.tenant(), "rag.embedding.model", bad)
    settings.set("acme", SettingScope.user("ada"), "rag.embedding.profile", "nowhere")
    assert embeddings.for_project("acme", "p1", query=True) is not None  # not the user's
    settings.set("acme", SettingScope.project("p1"), "rag.embedding.profile", "nowhere")
    with pytest.raises(EmbeddingFailed, match="'nowhere', which is not configured"):
        embeddings.for_project("acme", "p1", query=True)
    settings.set("acme", SettingScope.project("p1"), "rag.embedding.profile", "default")
    with pytest.raises(EmbeddingFailed, match="offline demo model"):
        embeddings.for_project("acme", "p1", query=True)


def test_the_project_settings_a_turn_read_already_are_used_as_given(settings):
    embeddings = Embeddings({"embed": Profile("embed", "http://127.0.0.1:9/v1", "toy-embed")},
                            settings)
    settings.set("acme", SettingScope.project("p1"), "rag.embedding.profile", "embed")
    read = SettingsApi(settings, "acme", "p1", "ada").without_user()  # the turn's read
    settings.set("acme", SettingScope.project("p1"), "rag.embedding.profile", "nowhere")
    chosen = embeddings.for_project("acme", "p1", query=True, settings=read)
    assert chosen is not None and chosen.model == "toy-embed"  # as read, not read again
    with pytest.raises(EmbeddingFailed, match="'nowhere', which is not configured"):
        embeddings.for_project("acme", "p1", query=True)
