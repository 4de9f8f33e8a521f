"""agrajag — tool-health diagnosis, the first service engine (think-engines §7, §7b).

Spawned by the system (``vancetope_brain.services.ServiceJobs``) when the checker in
the tool dispatch path meets a failure it cannot classify; runs in its project's
system session, once per job, and closes. Its params are the job: ``server``,
``tool`` (the model's name, or null for the server), ``step`` and ``error``.

One turn, two phases:

1. **Probe.** A tool loop under ``ToolDispatcher.probing()``: the model is offered only
   SAFE_PROBE tools (``tool_probe``, ``tool_probe_as_user``) and a MUTATING call is
   refused by the dispatcher, whatever the model tries. It ends with ``respond``: what
   the probes showed.
2. **Verdict.** Structured output (``engines.structured``) through ``tool_health_write``'s
   own schema (``tools.probe_tools.Verdict``), then a call of ``tool_health_write``
   through the dispatcher, which holds its role check: the verdict lands in tool_health
   and the next manifest honours it.

A recipe without the roles ``tool-prober`` and ``tool-health-writer`` gets neither
tool (they do not exist for it); agrajag then closes FAILED and says so.
"""

from __future__ import annotations

import json
import logging
from typing import ClassVar

from vancetope_brain.engines.base import ThinkEngine, register_engine
from vancetope_brain.engines.context import ThinkEngineContext
from vancetope_brain.engines.prompting import RESPOND, ToolLoop, system_prompt
from vancetope_brain.engines.structured import structured
from vancetope_brain.errors import LlmError
from vancetope_brain.llm import LlmMessage
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, ThinkProcess
from vancetope_brain.models.markup import tagged
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.tools.dispatcher import ToolManifest
from vancetope_brain.tools.probe_tools import SEPARATOR, SERVER_SIDE, WRITE_SPEC, Verdict

log = logging.getLogger(__name__)

SYSTEM_PROMPT = ("You are Agrajag: probe the failing tool's server with SAFE_PROBE tools, then "
                 "respond with what the probes showed.")
"""The fallback; the bundled recipe ``agrajag`` carries the full prompt."""
MAX_PROBES_SHOWN = 30
"""SAFE_PROBE tools the brief lists at most (the failing server's first)."""
VERDICT_REQUEST = (
    "Now record your verdict with tool_health_write: UP when the tool works and the "
    "failure was the caller's or passing, DEGRADED when it works but fails some calls, "
    "DOWN when it should not be offered. Name the server, and the tool unless the whole "
    "server is meant.")


@register_engine
class AgrajagEngine(ThinkEngine):
    name = "agrajag"
    title = "Agrajag"
    description = ("Service engine: diagnoses an ambiguous tool failure with SAFE_PROBE "
                   "probes and records a verdict in tool_health.")
    version = "1.0.0"
    allowed_tools: ClassVar[frozenset[str]] = frozenset(
        {"tool_probe", "tool_probe_as_user", WRITE_SPEC.name})

    def start(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        chat, tools = context.chat(), context.tools()
        if WRITE_SPEC.name not in {m.name for m in tools.manifests()}:
            self._fail(context, "agrajag cannot record a verdict: its recipe does not carry "
                                "the engine roles tool-prober and tool-health-writer")
            return
        brief = _brief(process, tools.probes(transports=SERVER_SIDE))
        chat.append(ChatRole.USER, brief)
        messages = [LlmMessage("system", system_prompt(process, context, SYSTEM_PROMPT)),
                    LlmMessage("user", brief)]
        with tools.probing():
            reply = ToolLoop(context, [*tools.specs(), RESPOND]).run(messages)
        if reply is None:  # the loop put the model's failure into the chat
            context.set_status(ProcessStatus.CLOSED, CloseReason.FAILED)
            return
        chat.append(ChatRole.ASSISTANT, reply.message)
        messages += [LlmMessage("assistant", reply.message),
                     LlmMessage("user", VERDICT_REQUEST)]
        try:
            verdict = structured(context, messages, Verdict, tool=WRITE_SPEC.name,
                                 description=WRITE_SPEC.description)
        except LlmError as e:
            self._fail(context, f"no verdict: {e}")
            return
        written = tools.invoke(WRITE_SPEC.name, verdict.dump())
        if written.status is not ToolCallStatus.SUCCESS:
            self._fail(context, f"the verdict was not recorded: {written.error}")
            return
        subject = verdict.tool or f"server {verdict.server}"
        chat.append(ChatRole.ASSISTANT, f"Verdict: {subject} is {verdict.state.value}: "
                                        f"{verdict.reason}",
                    meta={"verdict": verdict.dump()})
        context.set_status(ProcessStatus.CLOSED, CloseReason.DONE)

    def steer(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        """A service process takes no messages of its own; anything sent is set aside."""
        context.drain_pending()

    @staticmethod
    def _fail(context: ThinkEngineContext, message: str) -> None:
        log.warning("agrajag %s: %s", context.scope.process_id, message)
        context.chat().append(ChatRole.ERROR, message)
        context.set_status(ProcessStatus.CLOSED, CloseReason.FAILED)


def _brief(process: ThinkProcess, probes: list[ToolManifest]) -> str:
    """The job as the model reads it: ``<job>`` carries its fields, ``<probes>`` the SAFE_PROBE
    tools it can probe (name and parameters), those of the failing tool's server first."""
    params = process.engine_params
    server = str(params.get("server") or "")
    ordered = sorted(probes, key=lambda m: (not m.name.startswith(server + SEPARATOR), m.name))
    job = {k: params.get(k) for k in ("server", "tool", "step", "error")}
    listed = [{"name": m.name, "description": m.spec.description,
               "parameters": m.spec.parameters} for m in ordered[:MAX_PROBES_SHOWN]]
    # The error text and the tools' descriptions come from the MCP server: escaped, so they
    # cannot end a tag and pose as the job.
    return (f"{tagged('job', json.dumps(job, ensure_ascii=False))}\n"
            f"{tagged('probes', json.dumps(listed, ensure_ascii=False))}")
