"""ford — the minimal chat engine (think-engines.txt §7): user message → LLM → streamed reply.

No tools, no memory, no orchestration. It is the session chat engine until
Arthur lands, and stays as the smoke-test engine of the framework.
"""

from __future__ import annotations

import logging

from vancetope_brain.engines.base import ThinkEngine, register_engine
from vancetope_brain.engines.context import ThinkEngineContext
from vancetope_brain.errors import LlmError
from vancetope_brain.llm import LlmMessage
from vancetope_brain.models import ChatRole, ThinkProcess, UserChatInput
from vancetope_brain.models.steer import ExternalCommand, InboxAnswer, ProcessEvent, ToolResult

log = logging.getLogger(__name__)

SYSTEM_PROMPT = "You are Ford, a helpful, concise assistant."
_LLM_ROLES = {ChatRole.USER: "user", ChatRole.ASSISTANT: "assistant", ChatRole.EVENT: "user"}


@register_engine
class FordEngine(ThinkEngine):
    name = "ford"
    title = "Ford"
    description = "Minimal chat: each user message gets one streamed LLM answer."
    version = "1.0.0"

    def start(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        if context.has_pending():
            self.steer(process, context)

    def steer(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        chat = context.chat()
        last = None
        for envelope in context.drain_pending():
            last = envelope
            match envelope.message:
                case UserChatInput(content=content):
                    chat.append(ChatRole.USER, content, source=envelope)
                case ProcessEvent(source_process_id=src, type=kind, human_summary=summary):
                    chat.append(ChatRole.EVENT, f'<process-event sourceProcessId="{src}" '
                                f'type="{kind.value}">{summary or ""}</process-event>',
                                source=envelope)
                case InboxAnswer() | ToolResult() | ExternalCommand() as other:
                    log.warning("ford ignores %s for %s", other.kind, process.id)
        if last is None:
            return
        prompt = process.engine_params.get("prompt", SYSTEM_PROMPT)
        history = chat.history(context.settings().get("chat.historyLimit"))
        messages = [LlmMessage("system", prompt)] + [
            LlmMessage(_LLM_ROLES[line.role], line.content)  # type: ignore[arg-type]
            for line in history if line.role in _LLM_ROLES
        ]
        events = context.events()
        try:
            reply = context.llm().complete(messages, on_token=events.token)
        except LlmError as e:
            chat.append(ChatRole.ERROR, f"The model could not answer: {e}", source=last)
            return
        chat.append(ChatRole.ASSISTANT, reply.content, source=last,
                    meta={"model": reply.model} if reply.model else None)
