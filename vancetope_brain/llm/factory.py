"""Pick the ChatModel the configuration asks for, and describe it for the start-up log."""

from __future__ import annotations

from vancetope_brain.config import Config
from vancetope_brain.llm.base import ChatModel
from vancetope_brain.llm.endpoint import DEFAULT_BASE_URL, safe_url
from vancetope_brain.llm.profiles import DEFAULT, load_profiles


def build_chat_model(config: Config) -> ChatModel:
    """The profile ``default``'s model: an ``OpenAiChatModel`` when an endpoint is configured,
    else the offline ``DemoModel``."""
    return load_profiles(config)[DEFAULT].build(None)


def describe(config: Config) -> str:
    """One start-up log line naming the model and endpoint; never includes the key."""
    more = f"; more LLM profiles in {config.llm_profiles_file}" \
        if config.llm_profiles_file else ""
    if not config.llm_configured:
        return ("LLM: offline demo model (set OPENAI_API_KEY or OPENAI_BASE_URL to use a real "
                f"model){more}")
    where = safe_url(config.openai_base_url or DEFAULT_BASE_URL)
    return f"LLM: {config.llm_model} at {where}{more}"
