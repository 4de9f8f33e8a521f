"""``DemoModel``: the offline model that runs when no LLM endpoint is configured.

Deterministic, no network. Its every answer says what it is and how to
configure a real endpoint, so nobody mistakes it for a model. Offered
Arthur's tools, it shows delegation: asked for a piece of work (analyze,
summarize, research …) it starts an ``analyze`` worker, and when the
worker's ``<process-event>`` arrives it relays the result. Offered only
``respond`` (a worker), it answers its goal with a demo result.
"""

from __future__ import annotations

import json
import re
import time

from vancetope_brain.llm.base import LlmMessage, LlmResponse, TokenSink, ToolCall, ToolSpec

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
        """Answer with the demo text (through ``respond`` when offered); never fails."""
        names = {t.name for t in tools or ()}
        call = _demo_call(messages, names)
        if call is not None and call.name != "respond":
            return LlmResponse(content="", tool_calls=(call,), finish_reason="tool_calls",
                               model=self.name)
        text = json.loads(call.arguments)["message"] if call else demo_answer(messages)
        if on_token is not None:
            for i, word in enumerate(split_words(text)):
                if i and self.token_delay > 0:
                    time.sleep(self.token_delay)
                on_token(word)
        return LlmResponse(content=text, tool_calls=(call,) if call else (),
                           finish_reason="tool_calls" if call else "stop", model=self.name)


_WORK = re.compile(r"\b(analy[sz]e|summari[sz]e|research|compare|review|investigate|plan)",
                   re.IGNORECASE)
_EVENT = re.compile(r'<process-event sourceProcessId="([^"]*)" type="([a-z]+)">(.*?)'
                    r"(?:<payload>|</process-event>)", re.DOTALL)


def _respond(message: str, awaiting: bool = False) -> ToolCall:
    return ToolCall("demo_respond", "respond",
                    json.dumps({"message": message, "awaiting_user_input": awaiting}))


def _demo_call(messages: list[LlmMessage], tools: set[str]) -> ToolCall | None:
    """What the demo does with tools: delegate, relay, or just respond."""
    if "respond" not in tools:
        return None
    last = messages[-1] if messages else LlmMessage("user", "")
    if "process_create" not in tools:  # a worker: its goal is the first user message
        goal = next((m.content for m in messages if m.role == "user"), "")
        return _respond(f"Demo result for “{' '.join(goal.split())[:_QUOTE_LIMIT]}”: the "
                        "offline demo model did no real work, but this is where a worker's "
                        "findings would be.")
    if last.role == "tool":
        started = json.loads(last.content).get("result") or {}
        return _respond(f"I started a worker ({started.get('name', 'worker')}) on that and "
                        "will tell you when it reports back. (Offline demo model.)")
    event = _EVENT.search(last.content) if last.role == "user" else None
    if event:
        source, kind, summary = event.groups()
        if kind == "blocked":
            return _respond(f"The worker {source} asks: {summary.strip()}", awaiting=True)
        return _respond(f"The worker {source} is {kind}. It reports: {summary.strip()}")
    if last.role == "user" and (strategy := demo_strategy_call(last.content)):
        return strategy
    if last.role == "user" and _WORK.search(last.content):
        return ToolCall("demo_spawn", "process_create", json.dumps({
            "recipe": "analyze", "name": "demo-worker", "goal": last.content}))
    return _respond(demo_answer(messages) + " Ask me to analyze or summarize something to "
                    "see how I delegate work to a worker process.")


_STRATEGY = re.compile(r"\bstrategy\b", re.IGNORECASE)


def demo_strategy_call(text: str) -> ToolCall | None:
    """Asked to run a strategy, the demo starts a ``vogon`` on the bundled ``draft-review``
    (research, draft, an APPROVAL in the Inbox, finalize)."""
    if not _STRATEGY.search(text):
        return None
    return ToolCall("demo_strategy", "process_create", json.dumps({
        "recipe": "vogon", "name": "demo-strategy", "goal": text,
        "params": {"strategy": "draft-review"}}))


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
