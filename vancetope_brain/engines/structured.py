"""Structured output: one LLM call whose answer must fit a pydantic model.

The model is offered a single tool whose parameters are the model's JSON
Schema and must call it (tool calling is what every OpenAI-compatible
server supports; a plain-text JSON answer is accepted too). An answer
that does not validate is sent back once with the validation errors,
field by field; a second invalid answer raises ``StructuredOutputError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from vancetope_brain.engines.context import ThinkEngineContext
from vancetope_brain.errors import StructuredOutputError
from vancetope_brain.llm import LlmMessage, LlmResponse, ToolSpec

T = TypeVar("T", bound=BaseModel)
ResponseSink = Callable[[list[LlmMessage], LlmResponse], None]
"""Sees each call's input and response (e.g. to count tokens against a budget)."""

REPAIRS = 1
"""How many times an invalid answer is sent back before the call fails."""


def output_tool(model: type[BaseModel], name: str, description: str) -> ToolSpec:
    """The tool a structured answer is given through."""
    return ToolSpec(name, description, model.model_json_schema())


def structured(context: ThinkEngineContext, messages: list[LlmMessage], model: type[T], *,
               tool: str, description: str, on_response: ResponseSink | None = None) -> T:
    """Ask for one ``model`` instance through the tool ``tool``; repairs once.

    Raises ``StructuredOutputError`` naming the invalid fields, or ``LlmError``
    when the endpoint fails.
    """
    spec = output_tool(model, tool, description)
    messages = list(messages)
    for attempt in range(REPAIRS + 1):
        response = context.llm().complete(messages, tools=[spec])
        if on_response is not None:
            on_response(messages, response)
        try:
            return model.model_validate_json(_arguments(response, tool))
        except (ValidationError, ValueError) as e:
            problem = describe_invalid(e)
            if attempt == REPAIRS:
                raise StructuredOutputError(
                    f"{tool}: the model's output is invalid after {REPAIRS} repair: "
                    f"{problem}") from None
            messages += _repair(response, tool, problem)
    raise AssertionError("unreachable")


def describe_invalid(error: ValidationError | ValueError) -> str:
    """A validation error as one line naming each bad field."""
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}"
                         for e in error.errors()[:10])
    return str(error)


def _arguments(response: LlmResponse, tool: str) -> str:
    for call in response.tool_calls:
        if call.name == tool:
            return call.arguments or "{}"
    text = response.content.strip().removeprefix("```json").removeprefix("```")
    text = text.removesuffix("```").strip()
    if not text:
        raise ValueError(f"no call of {tool} and no JSON in the answer")
    return text


def _repair(response: LlmResponse, tool: str, problem: str) -> list[LlmMessage]:
    """The invalid answer and the request to fix it, as the next input."""
    calls = [c for c in response.tool_calls if c.name == tool]
    note = (f"Your output is invalid: {problem}. Call {tool} again with output that fits "
            "its schema.")
    if calls:
        return [LlmMessage("assistant", response.content, tool_calls=tuple(calls[:1])),
                LlmMessage("tool", json.dumps({"error": note}), tool_call_id=calls[0].id)]
    return [LlmMessage("assistant", response.content), LlmMessage("user", note)]
