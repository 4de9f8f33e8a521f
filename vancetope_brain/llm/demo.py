"""``DemoModel``: the offline model that runs when no LLM endpoint is configured.

Deterministic, no network. Its every answer says what it is and how to
configure a real endpoint, so nobody mistakes it for a model.
"""

from __future__ import annotations

import re
import time

from vancetope_brain.llm.base import LlmMessage, LlmResponse, TokenSink, ToolSpec

_QUOTE_LIMIT = 80


class DemoModel:
    """A ChatModel that answers every conversation with a fixed, streamed explanation.

    ``token_delay`` (seconds) pauses between streamed words, to make streaming
    visible in a demo; the default streams at once. Thread-safe (stateless).
    """

    name = "demo"

    def __init__(self, *, token_delay: float = 0.0) -> None:
        self.token_delay = token_delay

    def complete(
        self,
        messages: list[LlmMessage],
        *,
        tools: list[ToolSpec] | None = None,
        on_token: TokenSink | None = None,
    ) -> LlmResponse:
        """Answer with the demo text; never calls tools, never fails."""
        text = demo_answer(messages)
        if on_token is not None:
            for i, word in enumerate(split_words(text)):
                if i and self.token_delay > 0:
                    time.sleep(self.token_delay)
                on_token(word)
        return LlmResponse(content=text, finish_reason="stop", model=self.name)


def demo_answer(messages: list[LlmMessage]) -> str:
    """The demo model's answer to ``messages``: refers to the last user message."""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    last = " ".join(last.split())
    if len(last) > _QUOTE_LIMIT:
        last = last[: _QUOTE_LIMIT - 1] + "…"
    heard = f"You said: “{last}”. " if last else ""
    return (
        f"{heard}I am Vancetope's offline demo model, so I can't really answer yet. "
        "To talk to a real model, set OPENAI_API_KEY (for OpenAI) or OPENAI_BASE_URL "
        "(for any OpenAI-compatible server such as vLLM or Ollama), optionally "
        "VANCETOPE_LLM_MODEL, and restart the server."
    )


def split_words(text: str) -> list[str]:
    """Split ``text`` into word-plus-trailing-space pieces that join back to ``text``."""
    return re.findall(r"\s*\S+\s*", text) if text.strip() else ([text] if text else [])
