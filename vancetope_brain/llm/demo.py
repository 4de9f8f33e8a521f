"""``DemoModel``: the offline model that runs when no LLM endpoint is configured.

Deterministic, no network. Its every answer says what it is and how to
configure a real endpoint, so nobody mistakes it for a model. Offered
Arthur's tools, it shows delegation, picking the worker by keywords
(``_DELEGATION``): research or a deep dive goes to ``marvin``, a strategy, an
approval or "run the … process" to ``vogon`` (strategy ``review``), a council,
opinions, pros and cons or "should we …" to ``zaphod``, any other piece of work
(analyze, summarize, compare …) to ``analyze``; when the worker's
``<process-event>`` arrives it relays the result (or, blocked, its question).
Offered only ``respond`` (a worker), it answers its goal with a demo result.
"""

from __future__ import annotations

import json
import re
import time
from xml.sax.saxutils import unescape

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


_DELEGATION: list[tuple[re.Pattern[str], dict[str, object]]] = [
    (re.compile(r"\b(strateg\w*|approv\w*|sign[- ]off|run the \w+( \w+)? process)",
                re.IGNORECASE),
     {"recipe": "vogon", "name": "demo-strategy", "params": {"strategy": "review"}}),
    (re.compile(r"\b(council|opinions?|pros and cons|trade-?offs?|should (we|i))\b",
                re.IGNORECASE),
     {"recipe": "zaphod", "name": "demo-council"}),
    (re.compile(r"\b(research\w*|deep[- ]?dive|dig into|investigate)", re.IGNORECASE),
     {"recipe": "marvin", "name": "demo-research"}),
    (re.compile(r"\b(analy[sz]e|summari[sz]e|compare|review|plan)", re.IGNORECASE),
     {"recipe": "analyze", "name": "demo-worker"}),
]
"""Keywords of a request → the worker the demo starts for it; the first match wins."""
_SPAWN_ID = "demo_spawn"
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
    if last.role == "tool" and last.tool_call_id == _SPAWN_ID:
        return _started(last.content)
    event = _EVENT.search(last.content) if last.role == "user" else None
    if event:
        source, kind, summary = event.groups()
        summary = unescape(summary).strip()
        if kind == "blocked":
            return _respond(f"The worker {source} asks: {summary}", awaiting=True)
        return _respond(f"The worker {source} is {kind}. It reports: {summary}")
    spawn = next((args for pattern, args in _DELEGATION if pattern.search(last.content)), None) \
        if last.role == "user" else None
    if spawn is not None:
        return ToolCall(_SPAWN_ID, "process_create",
                        json.dumps({**spawn, "goal": last.content}))
    return _respond(demo_answer(messages) + " To see how I delegate work to worker processes, "
                    "ask me to analyze something, to research a question, to run the review "
                    "strategy with approval, or for pros and cons of a choice.")


def _started(result: str) -> ToolCall:
    """Arthur's answer once ``process_create`` returned: started, or why not."""
    try:
        body = json.loads(result)
    except ValueError:
        body = {}
    if not isinstance(body, dict) or "result" not in body:
        error = body.get("error") if isinstance(body, dict) else None
        return _respond(f"I could not start a worker: {error or result}. (Offline demo model.)")
    started = body["result"] or {}
    return _respond(f"I started a worker ({started.get('name', 'worker')}) with the recipe "
                    f"{started.get('recipe') or started.get('engine', '?')} on that and will "
                    "tell you when it reports back. (Offline demo model.)")


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
