"""Recipes and settings choose the model (issue 10, "Recipes choose the model"): endpoint
profiles from ``VANCETOPE_LLM_PROFILES``, the order recipe → ``<engine>.*`` → ``llm.*`` →
``default``, and real ``openai`` clients in real lane turns against two fake
OpenAI-compatible servers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import server_env, wait_for
from tests.llm.fake_openai_server import Call, FakeOpenAiServer, ToolCalls
from vancetope_brain.config import Config
from vancetope_brain.errors import ConfigError, RecipeError, UnknownLlmProfile
from vancetope_brain.identity import Principal
from vancetope_brain.llm import LlmMessage
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.llm.openai_provider import OpenAiChatModel
from vancetope_brain.llm.profiles import ModelRouter, choose, load_profiles
from vancetope_brain.models import ChatRole, CloseReason, ThinkProcess
from vancetope_brain.models.recipe import ModelChoice
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.settings import SettingsApi, SettingsService
from vancetope_brain.store import IdentityStore, LaneStore, SessionStore, SettingStore, open_store
from vancetope_gateway.parts import build_gateway
from workers.celery_app import create_celery, enqueue_index_on, enqueue_on
from workers.embedded import EmbeddedWorker

COORDINATOR = """
name: arthur
engine: arthur
category: chat
description: Arthur on the strong endpoint.
model: {profile: strong, name: big-model}
"""
CHEAP_WORKER = """
name: cheap-worker
engine: ford
category: worker
description: A worker on the cheap endpoint's default model.
model: {profile: cheap}
"""


def _respond(text: str) -> ToolCalls:
    return ToolCalls((Call("r1", "respond", json.dumps(
        {"message": text, "awaiting_user_input": False})),))


def _profiles_file(tmp: Path, strong: str, cheap: str) -> Path:
    path = tmp / "profiles.yaml"
    path.write_text(f"""
profiles:
  strong:
    baseUrl: {strong}
    apiKeyEnv: VT_TEST_STRONG_KEY
    model: strong-default
  cheap:
    baseUrl: {cheap}
    model: cheap-default
    maxRetries: 0
""")
    return path


class Routed:
    """The embedded runtime with the production model choice (no test model)."""

    def __init__(self, tmp: Path, strong: FakeOpenAiServer, cheap: FakeOpenAiServer) -> None:
        self.strong, self.cheap = strong, cheap
        config = Config.from_env(server_env(
            tmp / "data", VANCETOPE_LLM_PROFILES=str(_profiles_file(tmp, strong.base_url,
                                                                     cheap.base_url))))
        config.data_dir.mkdir(parents=True)
        self.store = open_store(config.store_url)
        app = create_celery(config, store=self.store)
        self.brain = build_gateway(config, enqueue_on(app), enqueue_index=enqueue_index_on(app),
                                   store=self.store)
        self.parts = app.vancetope_worker()
        self.worker = EmbeddedWorker(app, concurrency=2)
        self.worker.start()
        self.brain.identity.create_tenant("acme", "acme")
        self.brain.identity.create_user("acme", "ada", "ada")

    def close(self) -> None:
        self.worker.stop()
        self.parts.close()


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Routed]:
    with pytest.MonkeyPatch.context() as env, FakeOpenAiServer() as strong, \
            FakeOpenAiServer() as cheap:
        env.setenv("VT_TEST_STRONG_KEY", "sk-strong-test-key")
        runtime = Routed(tmp_path_factory.mktemp("routed"), strong, cheap)
        yield runtime
        runtime.close()


def test_two_recipes_talk_to_two_profiles_with_their_own_models(routed: Routed) -> None:
    for text in (COORDINATOR, CHEAP_WORKER):
        recipe = parse_recipe(text, "test")
        routed.brain.recipe_admin.put("acme", None, recipe)
    routed.strong.script(
        ToolCalls((Call("c1", "process_create", json.dumps(
            {"recipe": "cheap-worker", "name": "w", "goal": "count the words"})),)),
        _respond("Started w."), _respond("w says: 3 words."))
    routed.cheap.script(_respond("3 words"))
    who = Principal("acme", "ada")
    session = routed.brain.sessions.create(who)
    routed.brain.sessions.steer(who, session.chat_process_id, "count the words of 'a b c'")
    wait_for(lambda: "w says: 3 words." in [
        m.content for m in routed.store.port(LaneStore).chat_history("acme", session.chat_process_id)
        if m.role is ChatRole.ASSISTANT], timeout=20, what="Arthur relaying w")
    assert [r.body["model"] for r in routed.strong.requests] == ["big-model"] * 3
    assert [r.body["model"] for r in routed.cheap.requests] == ["cheap-default"]
    assert {r.headers["authorization"] for r in routed.strong.requests} == {
        "Bearer sk-strong-test-key"}
    worker = next(p for p in routed.store.port(SessionStore).list_processes("acme", session.id)
                  if p.name == "w")
    assert worker.close_reason is CloseReason.DONE and worker.recipe["model"] == {
        "profile": "cheap", "name": None}


def _process(model: dict | None = None, engine: str = "ford") -> ThinkProcess:
    recipe = {"name": "r", "engine": engine, "source": "bundled",
              **({"model": model} if model else {})}
    return ThinkProcess(id="proc_1", tenant_id="acme", session_id="ses_1", user_id="ada",
                        project_id="p1", name="r", engine=engine, engine_version="1.0.0",
                        recipe=recipe)


def test_the_resolution_order(acme_store) -> None:
    settings = _settings(acme_store)

    def chosen(recipe: ModelChoice | None = None, engine: str = "ford"):
        return choose(recipe, SettingsApi(settings, "acme", "p1", "ada"), engine)

    assert chosen() == ("default", None)  # the deployment's endpoint and model
    settings.set("acme", SettingScope.tenant(), "llm.model", "house-model")
    assert chosen() == ("default", "house-model")
    settings.set("acme", SettingScope.project("p1"), "ford.profile", "cheap")
    # A name set for every engine's default endpoint is not sent to ford's own profile.
    assert chosen() == ("cheap", None)
    settings.set("acme", SettingScope.user("ada"), "ford.model", "tiny")
    assert chosen() == ("cheap", "tiny")
    assert chosen(engine="arthur") == ("default", "house-model")
    assert chosen(ModelChoice(name="special")) == ("cheap", "special")
    assert chosen(ModelChoice(profile="strong")) == ("strong", None)
    settings.set("acme", SettingScope.tenant(), "llm.profile", "strong")
    assert chosen(engine="arthur") == ("strong", "house-model")


def _settings(store) -> SettingsService:
    return SettingsService(store.port(SettingStore), store.port(IdentityStore))


def test_the_router_builds_per_profile_and_refuses_an_unknown_one(tmp_path, acme_store,
                                                                    monkeypatch) -> None:
    monkeypatch.setenv("VT_TEST_STRONG_KEY", "sk-x")
    config = Config.from_env({"VANCETOPE_LLM_PROFILES": str(_profiles_file(
        tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"))})
    router = ModelRouter.from_config(config, _settings(acme_store))
    assert isinstance(router(_process()), DemoModel)  # no OPENAI_*: the offline demo model
    strong = router(_process({"profile": "strong"}))
    assert isinstance(strong, OpenAiChatModel) and strong.name == "strong-default"
    with pytest.raises(UnknownLlmProfile, match="no LLM profile named 'fast'.*known: cheap, "
                                                "default, strong"):
        router(_process({"profile": "fast"})).complete([LlmMessage("user", "hi")])


@pytest.mark.parametrize(("text", "env", "error"), [
    ("profiles: {default: {baseUrl: 'http://x/v1', model: m}}", {}, "profiles.default: the name"),
    ("profiles: {a: {baseUrl: 'http://x/v1', model: m, apiKeyEnv: NOPE_KEY}}", {},
     "profiles.a.apiKeyEnv: the variable NOPE_KEY is not set"),
    ("profiles: {a: {baseUrl: 'http://x/v1'}}", {}, "profiles.a.model: Field required"),
    ("profiles: {a: {baseUrl: 'http://x/v1', model: m, apiKey: sk-inline}}", {},
     "profiles.a.apiKey: Extra inputs"),
    ("profiles: {Bad_Name: {baseUrl: 'http://x/v1', model: m}}", {}, "profiles.Bad_Name"),
])
def test_a_bad_profiles_file_names_the_field(tmp_path, text, env, error) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    config = Config.from_env({"VANCETOPE_LLM_PROFILES": str(path)})
    with pytest.raises(ConfigError, match=error):
        load_profiles(config, env)


def test_a_recipe_model_needs_a_profile_or_a_name() -> None:
    with pytest.raises(RecipeError, match="model"):
        parse_recipe("name: x\nengine: ford\nmodel: {}\n", "x")
