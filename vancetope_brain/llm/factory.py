"""Pick the ChatModel the configuration asks for, and describe it for the start-up log."""

from __future__ import annotations

from vancetope_brain.config import Config
from vancetope_brain.llm.base import ChatModel
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.llm.openai_provider import DEFAULT_BASE_URL, OpenAiChatModel, safe_url


def build_chat_model(config: Config) -> ChatModel:
    """An ``OpenAiChatModel`` when an endpoint is configured, else the offline ``DemoModel``."""
    if config.llm_configured:
        return OpenAiChatModel.from_config(config)
    return DemoModel()


def describe(config: Config) -> str:
    """One start-up log line naming the model and endpoint; never includes the key."""
    if not config.llm_configured:
        return "LLM: offline demo model (set OPENAI_API_KEY or OPENAI_BASE_URL to use a real model)"
    where = safe_url(config.openai_base_url or DEFAULT_BASE_URL)
    return f"LLM: {config.llm_model} at {where}"
