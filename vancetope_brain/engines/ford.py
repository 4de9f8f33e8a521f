"""ford — the minimal chat engine (think-engines.txt §7): user message → LLM → streamed reply.

No tools of its own, no memory, no orchestration. What it is for is its
recipe's business (§7a), not its parent's. A ``chat`` recipe (``ford-chat``,
which a session's chat process and a client's ``process-create`` get) answers
each message in plain streamed text and offers no tools. Any other category
(``ford``, ``analyze``, ``summarize``: workers) works on its goal in the tool
loop (a recipe may add tools) and ends every turn with the ``respond`` marker:
a question for the user leaves it BLOCKED, anything else is its result and it
is DONE; a parent hears either through ``summarize_for_parent``.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from vancetope_brain.engines import history
from vancetope_brain.engines.base import register_engine
from vancetope_brain.engines.context import ThinkEngineContext
from vancetope_brain.engines.prompting import (
    RESPOND,
    RespondingEngine,
    ToolLoop,
    record,
    system_prompt,
)
from vancetope_brain.errors import LlmError
from vancetope_brain.llm import LlmMessage, ToolSpec
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, ThinkProcess
from vancetope_brain.models.recipe import RecipeCategory

log = logging.getLogger(__name__)

SYSTEM_PROMPT = "You are Ford, a helpful, concise assistant."


@register_engine
class FordEngine(RespondingEngine):
    name = "ford"
    title = "Ford"
    description = "Minimal chat: each user message gets one streamed LLM answer."
    version = "1.0.0"
    allowed_tools: ClassVar[frozenset[str]] = frozenset()

    def start(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        if process.goal and context.recipes().category is not RecipeCategory.CHAT:
            context.chat().append(ChatRole.USER, process.goal)
            self._work(process, context)
        elif context.has_pending():
            self.steer(process, context)

    def steer(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        last = None
        for envelope in context.drain_pending():
            last = envelope
            record(context, envelope)
        if last is None:
            return
        if context.recipes().category is not RecipeCategory.CHAT:
            self._work(process, context)
            return
        chat = context.chat()
        try:
            reply = context.llm().complete(self._input(process, context, []),
                                           on_token=context.events().token)
        except LlmError as e:
            chat.append(ChatRole.ERROR, f"The model could not answer: {e}", source=last)
            return
        chat.append(ChatRole.ASSISTANT, reply.content, source=last,
                    meta={"model": reply.model} if reply.model else None)

    def _work(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        tools = [*context.tools().specs(), RESPOND]
        reply = ToolLoop(context, tools).run(self._input(process, context, tools))
        if reply is None:
            return
        self.keep_reply(context, reply)
        if reply.awaiting_user_input:
            context.set_status(ProcessStatus.BLOCKED)
        else:
            context.set_status(ProcessStatus.CLOSED, CloseReason.DONE)

    @staticmethod
    def _input(process: ThinkProcess, context: ThinkEngineContext,
               tools: list[ToolSpec]) -> list[LlmMessage]:
        """The system prompt and the newest ``chat.historyLimit`` lines within
        ``ford.maxContextTokens`` (older ones summarised: ``engines/history.py``)."""
        settings = context.settings()
        return history.fitted(
            context, [LlmMessage("system", system_prompt(process, context, SYSTEM_PROMPT))],
            tools, "ford.maxContextTokens", max_lines=settings.get("chat.historyLimit"))

