"""LLM endpoint profiles, and which (profile, model) a process talks to.

A *profile* is one OpenAI-compatible endpoint: a base URL, the environment
variable holding its API key, a default model, a timeout and retries. The
deployment's ``OPENAI_*`` / ``VANCETOPE_LLM_*`` variables are the profile
``default`` (or the offline demo model when they configure no endpoint). More
profiles come from the YAML file ``VANCETOPE_LLM_PROFILES`` names::

    profiles:
      cheap:
        baseUrl: http://127.0.0.1:11434/v1
        model: llama3.1:8b
      strong:
        baseUrl: https://api.openai.com/v1
        apiKeyEnv: OPENAI_STRONG_KEY
        model: gpt-4o
        timeout: 120      # optional; default VANCETOPE_LLM_TIMEOUT
        maxRetries: 3     # optional; default VANCETOPE_LLM_MAX_RETRIES
      tiny:
        baseUrl: http://127.0.0.1:8080/v1
        model: qwen2.5-coder-1.5b
        tools: false          # optional: the model has no tool calling (default true)
        textToolCalls: true   # optional: read calls written as text (default: see below)

``tools: false`` offers the model no tools at all: it answers in plain text (an endpoint
that refuses ``tools`` is found out and treated so too, ``openai_provider``).
``textToolCalls`` reads a tool call the model wrote as text (``llm/text_calls.py``) as a
call; by default on, except at endpoints known to call tools natively (OpenAI's, Azure's:
``endpoint.native_tool_calls``). The profile ``default`` takes both from
``VANCETOPE_LLM_TOOLS`` and ``VANCETOPE_LLM_TEXT_TOOL_CALLS``.

Choosing per process (``choose``), the first of these that names a profile wins
the profile, and a model name counts only from that level or a more specific
one (a name meant for another endpoint is not sent to this one):

1. the process's recipe: ``model: {profile: …, name: …}``
2. the settings ``<engine>.profile`` / ``<engine>.model`` (e.g. ``zaphod.model``)
3. the settings ``llm.profile`` / ``llm.model``
4. the profile ``default``; with no name chosen, the profile's own ``model``.

A profile that is not configured makes every call of that process fail with
``UnknownLlmProfile`` (the engine shows it in the chat); the file itself is
checked when a worker starts (``ConfigError`` naming the file and field).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import yaml
from pydantic import ConfigDict, Field, StringConstraints, ValidationError
from pydantic.alias_generators import to_camel

from vancetope_brain.errors import ConfigError, UnknownLlmProfile
from vancetope_brain.llm.base import ChatModel, LlmMessage, LlmResponse, TokenSink, ToolSpec
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.llm.endpoint import DEFAULT_BASE_URL, native_tool_calls, safe_url
from vancetope_brain.models.base import Wire
from vancetope_brain.models.recipe import ModelChoice
from vancetope_brain.settings import SettingsApi

if TYPE_CHECKING:
    from vancetope_brain.config import Config
    from vancetope_brain.models import ThinkProcess
    from vancetope_brain.settings import SettingsService

DEFAULT = "default"
MAX_PROFILES = 32
"""Most profiles one file may define."""

_Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$",
                                         max_length=64)]


class _ProfileEntry(Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    base_url: str = Field(min_length=1, max_length=2000)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    model: str = Field(min_length=1, max_length=200)
    timeout: float | None = Field(default=None, gt=0, le=3600)
    max_retries: int | None = Field(default=None, ge=0, le=10)
    tools: bool = True
    text_tool_calls: bool | None = None


class _ProfilesFile(Wire):
    model_config = ConfigDict(extra="forbid")

    profiles: dict[_Name, _ProfileEntry] = Field(max_length=MAX_PROFILES)


@dataclass(frozen=True)
class Profile:
    """One endpoint. ``base_url=None`` is the offline demo model (an unconfigured default),
    which pauses ``demo_token_delay`` seconds between streamed words."""

    name: str
    base_url: str | None
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 2
    demo_token_delay: float = 0.0
    tools: bool = True
    text_tool_calls: bool | None = None
    """None: on unless the endpoint is known to call tools natively."""

    def __repr__(self) -> str:  # never the key
        where = safe_url(self.base_url) if self.base_url else "offline demo model"
        return f"Profile({self.name!r}, {where}, model={self.model!r})"

    def build(self, model: str | None) -> ChatModel:
        """The ChatModel for ``model`` (or the profile's default) on this endpoint. Cheap:
        ``OpenAiChatModel`` opens its client per call, so nothing is pooled or shared."""
        if self.base_url is None:
            return DemoModel(token_delay=self.demo_token_delay)
        # Imported here: only a process that talks to an endpoint pays the openai import.
        from vancetope_brain.llm.openai_provider import OpenAiChatModel

        text_calls = self.text_tool_calls if self.text_tool_calls is not None \
            else not native_tool_calls(self.base_url)
        return OpenAiChatModel(model or self.model, api_key=self.api_key,
                               base_url=self.base_url, timeout=self.timeout,
                               max_retries=self.max_retries, tool_calling=self.tools,
                               text_tool_calls=text_calls)


def load_profiles(config: Config, environ: Mapping[str, str] | None = None) -> dict[str, Profile]:
    """``default`` from the deployment's variables plus the profiles file's entries.

    Raises ``ConfigError`` naming the file and the field for a bad file, a profile named
    ``default``, or an ``apiKeyEnv`` that is not set.
    """
    environ = os.environ if environ is None else environ
    profiles = {DEFAULT: Profile(
        DEFAULT, (config.openai_base_url or DEFAULT_BASE_URL) if config.llm_configured else None, config.llm_model, config.openai_api_key,
        config.llm_timeout, config.llm_max_retries, config.demo_token_delay,
        config.llm_tools, config.llm_text_tool_calls)}
    path = config.llm_profiles_file
    if path is None:
        return profiles
    where = f"LLM profiles file {path} (VANCETOPE_LLM_PROFILES)"
    try:
        data = yaml.safe_load(Path(path).read_text())
        parsed = _ProfilesFile.model_validate(data)
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{where}: cannot read it: {e}") from e
    except ValidationError as e:
        first = e.errors()[0]
        field_name = ".".join(map(str, first["loc"])) or "file"
        raise ConfigError(f"{where}: {field_name}: {first['msg']}") from e
    for name, entry in parsed.profiles.items():
        if name == DEFAULT:
            raise ConfigError(f"{where}: profiles.default: the name 'default' is the "
                              "deployment's OPENAI_* endpoint; pick another name")
        key = None
        if entry.api_key_env is not None:
            key = environ.get(entry.api_key_env)
            if not key:
                raise ConfigError(f"{where}: profiles.{name}.apiKeyEnv: the variable "
                                  f"{entry.api_key_env} is not set")
        profiles[name] = Profile(
            name, entry.base_url, entry.model, key,
            entry.timeout if entry.timeout is not None else config.llm_timeout,
            entry.max_retries if entry.max_retries is not None else config.llm_max_retries,
            tools=entry.tools, text_tool_calls=entry.text_tool_calls)
    return profiles


def choose(recipe: ModelChoice | None, settings: SettingsApi,
           engine: str) -> tuple[str, str | None]:
    """(profile, model name or None for the profile's default), by the order above."""
    levels = [(recipe.profile, recipe.name) if recipe else (None, None),
              (settings.get(f"{engine}.profile"), settings.get(f"{engine}.model")),
              (settings.get("llm.profile"), settings.get("llm.model"))]
    name: str | None = None
    for profile, model in levels:
        name = name or model
        if profile:
            return profile, name
    return DEFAULT, name


class ModelRouter:
    """``model_for`` of a worker: the ChatModel of each process's turn, chosen per turn (so a
    changed setting applies from the next turn) from the process's recipe snapshot, the
    settings cascade and the profiles."""

    def __init__(self, profiles: dict[str, Profile], settings: SettingsService) -> None:
        self.profiles = profiles
        self._settings = settings

    @classmethod
    def from_config(cls, config: Config, settings: SettingsService) -> ModelRouter:
        return cls(load_profiles(config), settings)

    def __call__(self, process: ThinkProcess) -> ChatModel:
        return self.route(process)[1]

    def route(self, process: ThinkProcess) -> tuple[str, ChatModel]:
        """The profile chosen for the process's turn and its ChatModel."""
        snapshot = (process.recipe or {}).get("model")
        recipe = ModelChoice.model_validate(snapshot) if snapshot else None
        api = SettingsApi.for_process(self._settings, process)
        profile, name = choose(recipe, api, process.engine)
        found = self.profiles.get(profile)
        if found is None:
            return profile, _Unavailable(profile, sorted(self.profiles))
        return profile, found.build(name)


def secrets_of(profiles: Mapping[str, Profile]) -> frozenset[str]:
    """The API keys of ``profiles``: what an inspector record never shows."""
    return frozenset(p.api_key for p in profiles.values() if p.api_key)


class _Unavailable:
    """The model of a process whose recipe or settings name a profile nobody configured."""

    name = "unavailable"

    def __init__(self, profile: str, known: list[str]) -> None:
        self._message = (f"no LLM profile named {profile!r} is configured (known: "
                         f"{', '.join(known)}); add it to VANCETOPE_LLM_PROFILES or fix the "
                         "recipe's model or the <engine>.profile / llm.profile setting")

    def complete(self, messages: list[LlmMessage], *, tools: list[ToolSpec] | None = None,
                 on_token: TokenSink | None = None) -> LlmResponse:
        raise UnknownLlmProfile(self._message)
