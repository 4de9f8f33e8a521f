"""arthur — the session chat coordinator (arthur-engine.txt §3).

Reactive: talks with the user, delegates real work to worker processes through
tools, hears back from them as ``<process-event>`` messages, and answers with
the ``respond`` tool, which must stand alone in its step. Under a ``chat``
recipe (``arthur``) it never reaches DONE. Under any other (``arthur-sub``, a
worker, think-engines §7a) its respond is its result: it is DONE at the first
respond that awaits no input while none of its own workers is still open, and
its parent gets that message through ``summarize_for_parent``. A goal given at
spawn is coordinated at once instead of greeting.
"""

from __future__ import annotations

import logging

from vancetope_brain.engines import history
from vancetope_brain.engines.base import register_engine
from vancetope_brain.engines.context import AGAIN, ThinkEngineContext
from vancetope_brain.engines.memory_summary import memory_summary
from vancetope_brain.engines.prompting import (
    RESPOND,
    RespondingEngine,
    ToolLoop,
    record,
    system_prompt,
)
from vancetope_brain.engines.rag import auto_inject, used
from vancetope_brain.errors import UserError
from vancetope_brain.llm import LlmMessage, budget
from vancetope_brain.llm.demo import DemoModel, welcome_hint, welcome_suggestions
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    ExternalCommand,
    InboxMessage,
    ProcessStatus,
    ThinkProcess,
    UserChatInput,
)
from vancetope_brain.models.recipe import RecipeCategory

log = logging.getLogger(__name__)

FALLBACK_PROMPT = "You are Arthur, the user's coordinator: talk with them and delegate work."
WELCOME = "Hi, I'm Arthur. How can I help?"
NOTICE = ("<vancetope-notice>Plain text does not reach the user. Call a tool now: answer with "
          "only the JSON of the call. Real work (research, analysis, writing) is "
          "process_create; anything else is respond.</vancetope-notice>")
"""What Arthur's model is told when it answered in plain text (``ToolLoop``): which tool is
for what, in words a small model that writes its calls as text follows (Qwen2.5-1.5B then
delegates, where the generic notice got a refusal)."""
NO_TOOLS = ("This model has no tool calling, so Arthur answers on its own: delegating work "
            "to worker processes, the Inbox and the other tools need a model with tools (see "
            "docs/configuration.md, \"LLM endpoint profiles\").")
TOLD_NO_TOOLS = "toldNoTools"
AGAIN_LINES = 200
"""How far back ``regenerate`` looks for the user's last line (lines of the chat)."""
REGENERATE = "regenerate"
"""The client command (``process-command``) that asks the model again for the last reply:
the web client's button on Arthur's last line, ``/again`` in ``vancetope chat``."""
"""``engineState`` key: the user was told (``NO_TOOLS``) that the model cannot delegate."""


@register_engine
class ArthurEngine(RespondingEngine):
    name = "arthur"
    title = "Arthur Session Chat"
    description = ("Talks with the user and delegates work to worker processes, then "
                   "summarizes their results.")
    version = "1.0.0"
    allowed_tools = frozenset({
        "process_create", "process_steer", "process_stop", "process_list", "process_status",
        "recipe_list", "recipe_describe", "manual_list", "manual_read", "inbox_post",
    })

    def start(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        if process.goal:
            # A goal given at spawn (e.g. to an arthur-sub, think-engines §7a) is coordinated
            # rather than greeted.
            context.chat().append(ChatRole.USER, process.goal)
            self._answer(process, context, [process.goal])
            return
        welcome = process.engine_params.get("welcome", WELCOME)
        meta: dict[str, object] = {}
        if context.llm().name == DemoModel.name:  # tell a newcomer what the demo can show
            welcome += welcome_hint()
            meta["suggestions"] = welcome_suggestions()
        context.chat().append(ChatRole.ASSISTANT, welcome, meta=meta)
        if context.has_pending():
            self.steer(process, context)

    def steer(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        needs_model, texts, again = False, [], False
        for envelope in context.drain_pending():
            message = envelope.message
            if isinstance(message, ExternalCommand) and message.command == REGENERATE:
                again = True  # no line of its own: the new reply says what it is
                continue
            needs_model |= self._take(envelope, context)
            if isinstance(message, UserChatInput):
                texts.append(message.content)
        if needs_model:  # anything else that came answers it: no need to ask again
            self._answer(process, context, texts)
        elif again:
            self._again(process, context)

    def _again(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        """Ask the model again for the reply to the user's last line, with the same input:
        the chat up to that line (the earlier attempt stays in the chat for people, and no
        later turn's model sees it: ``AGAIN``). A new turn, so a new journal: nothing of the
        earlier attempt is replayed."""
        lines = context.chat().history(AGAIN_LINES)
        asked = next((line for line in reversed(lines) if line.role is ChatRole.USER), None)
        if asked is None or not any(line.role is ChatRole.ASSISTANT
                                    for line in lines if line.seq > asked.seq):
            context.chat().append(ChatRole.ERROR, "Nothing to ask again: no reply to a "
                                  "message of yours in the last lines of this chat.")
            return
        self._answer(process, context, [asked.content], again=asked.seq)

    def _take(self, envelope: InboxMessage, context: ThinkEngineContext) -> bool:
        """Record one inbound message; False when it was handled without the model."""
        message = envelope.message
        record(context, envelope)
        return not (isinstance(message, ExternalCommand) and self._direct(message, context))

    @staticmethod
    def _direct(command: ExternalCommand, context: ThinkEngineContext) -> bool:
        """Map a client command to an action without an LLM turn where one fits (§3.4)."""
        target = command.params.get("targetProcessId")
        try:
            if command.command == "process-steer" and target and command.params.get("content"):
                context.processes().steer(str(target), str(command.params["content"]))
                return True
            if command.command == "process-stop" and target:
                context.processes().stop(str(target))
                return True
        except UserError as e:  # a closed, missing or own target: refused, not a crash
            context.chat().append(ChatRole.ERROR, f"{command.command} refused: {e}")
            return True
        return False

    def _answer(self, process: ThinkProcess, context: ThinkEngineContext,
                texts: list[str], *, again: int | None = None) -> None:
        """One model turn over the chat; ``texts``: the user messages it answers, searched
        in the project's memory (``engines/memory_summary.py``) and documents
        (``engines/rag.py``)."""
        tools = context.tools().specs() + [RESPOND]
        limit = context.settings().get("arthur.maxContextTokens")
        prompt = system_prompt(process, context, FALLBACK_PROMPT)
        # The context blocks take at most half of what the prompt and tools leave of the
        # budget (the rest is the chat's): the documents' first, then the memory's.
        room = (limit - budget.estimate([LlmMessage("system", prompt)], tools)) // 2
        injected = auto_inject(process, context, texts)
        cost = None if injected is None else _fits(context, "<rag-context>", injected.prompt,
                                                   room)
        if cost is None:
            injected = None
        else:
            room -= cost
        summary = memory_summary(context, texts)
        if summary is not None and _fits(context, "<project-memory>", summary, room) is not None:
            prompt += "\n\n" + summary
        if injected is not None:
            prompt += "\n\n" + injected.prompt
        messages = history.fitted(context, [LlmMessage("system", prompt)], tools,
                                  "arthur.maxContextTokens", again=again)
        reply = ToolLoop(context, tools, notice=NOTICE).run(messages)
        if reply is None:
            return
        told = reply.without_tools and not process.engine_state.get(TOLD_NO_TOOLS)
        if told:  # once per process: a line for the user, never shown to the model
            context.chat().append(ChatRole.SYSTEM, NO_TOOLS)
        sources = used(injected.citations, reply.message) if injected is not None else None
        self.keep_reply(context, reply, sources=sources,
                        meta=None if again is None else {AGAIN: again},
                        **({TOLD_NO_TOOLS: True} if told else {}))
        if reply.awaiting_user_input:
            context.set_status(ProcessStatus.BLOCKED)
        elif context.recipes().category is not RecipeCategory.CHAT and \
                not context.processes().children(open_only=True):
            context.set_status(ProcessStatus.CLOSED, CloseReason.DONE)
        else:
            context.set_status(ProcessStatus.IDLE)


def _fits(context: ThinkEngineContext, name: str, block: str, room: int) -> int | None:
    """The tokens ``block`` costs in the system prompt if that fits ``room``; else None,
    and a WARNING says it is left out."""
    cost = budget.message_tokens(LlmMessage("system", "\n\n" + block))
    if cost <= room:
        return cost
    log.warning("process %s: the %s block is left out of this turn: it needs %s tokens, "
                "arthur.maxContextTokens leaves it %s", context.scope.process_id, name, cost,
                max(room, 0))
    return None
