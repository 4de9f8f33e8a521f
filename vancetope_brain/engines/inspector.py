"""Building a turn's inspector record (``models/inspector.py``; issue 32, part 2).

During the turn, ``TurnSteps`` only keeps references (shallow copies of the lists of messages
and tool specs a completion was given, its answer, a tool call's params and outcome) and two clock readings
per step: nothing is copied or encoded while the turn runs. ``inspect`` makes the record
once, after the commit: each text is cut first to what the record keeps, then redacted, and
a completion's input is kept to its leading system messages and the newest
``MAX_INPUT_MESSAGES`` others, so its cost is bounded by the caps, not by the chat's length.

What is kept first when the caps bite: every output, tool argument and tool result (in
order), then the system prompts, then the input messages newest first, then the tools'
descriptions and schemas. A completion whose input starts with the previous completion's
input (a tool loop) keeps only what follows it (``ModelStep.shared``).

Redaction: every secret the worker knows (the LLM profiles' API keys) and whatever looks like
an API key or a Vancetope token is replaced by ``REDACTED``, in every text of the record.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from vancetope_brain.llm import LlmMessage, LlmResponse, ToolSpec
from vancetope_brain.models.inspector import (
    MAX_INPUT_MESSAGES,
    MAX_STEPS,
    MAX_TEXT_CHARS,
    MAX_TURN_CHARS,
    REDACTED,
    InspectedCall,
    InspectedMessage,
    ModelStep,
    OfferedTool,
    ToolStep,
    TurnInspection,
)
from vancetope_brain.models.process import ProcessStatus, ThinkProcess
from vancetope_brain.models.usage import CallUsage

_MESSAGES = TypeAdapter(list[InspectedMessage])
"""A model step's input messages, from plain dicts (``inspect``)."""
KEY_PATTERN = re.compile(r"\b(?:sk-[A-Za-z0-9_\-]{16,}|vt_[A-Za-z0-9_\-]{32,})|"
                         r"(?i:bearer\s+)[A-Za-z0-9._~+/\-]{16,}=*")
"""What looks like a secret whatever it is: an OpenAI-style key, a Vancetope token, a bearer
credential."""


@dataclass(frozen=True)
class _ModelCall:
    started: float
    ended: float
    messages: list[LlmMessage]
    tools: list[ToolSpec]
    response: LlmResponse
    usage: CallUsage


@dataclass(frozen=True)
class _ToolCall:
    started: float
    ended: float
    name: str
    params: dict[str, Any]
    outcome: Any  # tools.ToolOutcome (not imported: the tools package imports the engines')


@dataclass
class TurnSteps:
    """The steps of one turn as it runs (references only)."""

    began: float = field(default_factory=time.monotonic)
    steps: list[_ModelCall | _ToolCall] = field(default_factory=list)

    def model(self, started: float, messages: list[LlmMessage], tools: list[ToolSpec] | None,
              response: LlmResponse, usage: CallUsage) -> None:
        # A shallow copy (the messages themselves are frozen): an engine's tool loop appends
        # to the list it sent, and the record must show what this call was given.
        self.steps.append(_ModelCall(started, time.monotonic(), list(messages),
                                     list(tools or []), response, usage))

    def tool(self, started: float, name: str, params: dict[str, Any], outcome: Any) -> None:
        self.steps.append(_ToolCall(started, time.monotonic(), name, params, outcome))


class _Texts:
    """The texts of a record, each with its rank (lower: kept first), cut to the caps."""

    def __init__(self) -> None:
        self._texts: list[tuple[int, int, str]] = []

    def add(self, text: str, rank: int) -> int:
        self._texts.append((rank, len(self._texts), text))
        return len(self._texts) - 1

    def fit(self, secrets: Iterable[str]) -> tuple[list[str], int]:
        """Every text cut to its share of the caps and redacted; and how many characters
        were cut."""
        secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        margin = max((len(s) for s in secrets), default=0) + 64
        out = [""] * len(self._texts)
        budget, cut = MAX_TURN_CHARS, 0
        for _, index, text in sorted(self._texts):
            keep = min(len(text), MAX_TEXT_CHARS, budget)
            budget -= keep
            shown = _redact(text[:keep + margin], secrets)[:keep]
            if keep < len(text):
                cut += len(text) - keep
                shown += f"…[{len(text) - keep} characters cut]"
            out[index] = shown
        return out, cut


def _kept_input(messages: list[LlmMessage], shared: int) -> tuple[list[LlmMessage], int]:
    """What a record keeps of a completion's input after its first ``shared`` messages: the
    leading system messages and the newest ``MAX_INPUT_MESSAGES`` others; and how many
    between them it leaves out."""
    lead = shared
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    omitted = max(0, len(messages) - lead - MAX_INPUT_MESSAGES)
    return messages[shared:lead] + messages[lead + omitted:], omitted


def _redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    # The pattern only where one of its anchors is (a substring test is far cheaper).
    if "sk-" in text or "vt_" in text or "earer" in text or "EARER" in text:
        text = KEY_PATTERN.sub(REDACTED, text)
    return text


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def inspect(steps: TurnSteps, *, turn_id: str, process: ThinkProcess, lifecycle: str,
            profile: str | None, started_at: datetime, ended_at: datetime,
            status_after: ProcessStatus, chat_ids: list[str],
            secrets: Iterable[str]) -> TurnInspection:
    """The record of a committed turn from its ``steps``."""
    texts = _Texts()
    kept = steps.steps[:MAX_STEPS]
    offered: dict[str, ToolSpec] = {}
    plans: list[Any] = []
    previous: list[LlmMessage] = []
    for step in kept:
        if isinstance(step, _ToolCall):
            outcome = step.outcome
            result = outcome.error if outcome.error is not None else _json(outcome.result)
            plans.append((step, texts.add(_json(step.params), 0), texts.add(result, 0)))
            continue
        shared = 0
        while shared < min(len(previous), len(step.messages)) and \
                step.messages[shared] is previous[shared]:
            shared += 1
        previous = step.messages
        fresh, omitted = _kept_input(step.messages, shared)
        inputs = []
        for back, message in enumerate(reversed(fresh)):
            rank = 1 if message.role == "system" else 2 + back
            inputs.append((message, texts.add(message.content, rank),
                           [texts.add(c.arguments, rank) for c in message.tool_calls]))
        inputs.reverse()
        answer = step.response
        output = (texts.add(answer.content, 0), [texts.add(c.arguments, 0)
                                                 for c in answer.tool_calls])
        for spec in step.tools:
            offered.setdefault(spec.name, spec)
        plans.append((step, shared, omitted, inputs, output))
    tools = [(spec, texts.add(spec.description, 10**6), texts.add(spec.parameters_json, 10**6))
             for spec in offered.values()]
    fitted, cut = texts.fit(secrets)

    def ms(at: float) -> int:
        return round((at - steps.began) * 1000)

    built: list[ModelStep | ToolStep] = []
    for plan in plans:
        step = plan[0]
        if isinstance(step, _ToolCall):
            built.append(ToolStep(at_ms=ms(step.started),
                                  duration_ms=round((step.ended - step.started) * 1000),
                                  name=step.name, arguments=fitted[plan[1]],
                                  outcome=str(step.outcome.status.value).upper(),
                                  result=fitted[plan[2]]))
            continue
        _, shared, omitted, inputs, (content, calls) = plan
        answer = step.response
        built.append(ModelStep(
            at_ms=ms(step.started), duration_ms=round((step.ended - step.started) * 1000),
            model=step.usage.model, shared=shared, omitted=omitted,
            # Plain dicts validated in one pass of pydantic's core: a long input has many
            # messages, and ``model_construct`` per message (Python) cost more than that.
            messages=_MESSAGES.validate_python([
                {"role": m.role, "content": fitted[text], "tool_call_id": m.tool_call_id,
                 "tool_calls": [{"id": c.id, "name": c.name, "arguments": fitted[a]}
                                for c, a in zip(m.tool_calls, args, strict=True)]}
                for m, text, args in inputs]),
            tools=[spec.name for spec in step.tools],
            output=InspectedMessage(role="assistant", content=fitted[content], tool_calls=[
                InspectedCall(id=c.id, name=c.name, arguments=fitted[a])
                for c, a in zip(answer.tool_calls, calls, strict=True)]),
            finish_reason=answer.finish_reason, tokens_in=step.usage.tokens_in,
            tokens_out=step.usage.tokens_out, usage_source=step.usage.source))
    models = [s for s in built if isinstance(s, ModelStep)]
    return TurnInspection(
        id=turn_id, tenant_id=process.tenant_id, session_id=process.session_id,
        process_id=process.id, user_id=process.user_id, epoch=process.epoch,
        engine=process.engine, lifecycle=lifecycle, profile=profile,
        model=models[0].model if models else None, started_at=started_at, ended_at=ended_at,
        status_after=status_after, tokens_in=sum(s.tokens_in for s in models),
        tokens_out=sum(s.tokens_out for s in models), chat_ids=chat_ids,
        step_count=len(built), dropped_steps=len(steps.steps) - len(kept), cut_chars=cut,
        tools=[OfferedTool(name=spec.name, description=fitted[d], parameters=fitted[p])
               for spec, d, p in tools],
        steps=built)
