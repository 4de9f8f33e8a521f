"""Tool calls a model wrote as text instead of making them (small local models do: offered
a tool, Qwen2.5-1.5B under llama.cpp answers ```json {"name": …, "arguments": …} ```).

A call counts only when it names a tool the request offered and its arguments validate
against that tool's JSON Schema; anything else leaves the answer as text. The forms:

- Hermes' and Qwen's ``<tool_call>{…}</tool_call>``, one or more; text around them stays
  the answer's text (the tag says it is a call);
- fenced JSON blocks (```json … ``` or ``` … ```) and nothing but whitespace around them
  (prose around a block is an example, not a call);
- the whole answer as bare JSON.

Each holds one call ``{"name": …, "arguments": {…}}`` or a list of them; ``parameters`` is
read like ``arguments``, arguments given as a JSON string (OpenAI's own form) too, and a
call in doubled braces (``{{"name": …}}``, as small Qwen models write it) as one in single
braces.
Whether an endpoint's answers are read this way is its profile's ``textToolCalls``
(``llm/profiles.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import jsonschema
from referencing.exceptions import Unresolvable

from vancetope_brain.llm.base import ToolCall, ToolSpec

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FENCED = re.compile(r"```[a-z_]*[ \t]*\n?(.*?)```", re.DOTALL)
CALL_STARTS = ("```", "{", "[", "<tool_call>")
"""How an answer that may be nothing but a written call begins (after whitespace)."""


def text_tool_calls(content: str, tools: Sequence[ToolSpec]) -> tuple[tuple[ToolCall, ...], str]:
    """The calls written in ``content`` and the text left besides them; ``((), content)``
    when it holds none, or anything that is not a valid call of an offered tool."""
    offered = {t.name: t for t in tools}
    if not offered or not content.strip():
        return (), content
    blocks = _TAGGED.findall(content)
    rest = _TAGGED.sub("", content).strip()
    if not blocks:
        blocks = _FENCED.findall(content)
        if blocks and _FENCED.sub("", content).strip():
            return (), content
        blocks, rest = blocks or [content], ""
    calls: list[ToolCall] = []
    for block in blocks:
        for name, arguments in _written_calls(block) or [("", None)]:
            spec = offered.get(name)
            if spec is None or arguments is None or not _valid(arguments, spec.parameters):
                return (), content
            calls.append(ToolCall(f"text_call_{len(calls)}", name,
                                  json.dumps(arguments, ensure_ascii=False)))
    return tuple(calls), rest


def _written_calls(block: str) -> list[tuple[str, dict[str, Any] | None]] | None:
    """``(name, arguments)`` of each call object in ``block``; None when it is no such JSON."""
    try:
        parsed = json.loads(block)
    except ValueError:
        # Small Qwen models double the braces of a call, as if escaping a template:
        # {{"name": …, "arguments": {…}}}.
        text = block.strip()
        if not (text.startswith("{{") and text.endswith("}}")):
            return None
        try:
            parsed = json.loads(text[1:-1])
        except ValueError:
            return None
    objects = parsed if isinstance(parsed, list) else [parsed]
    found: list[tuple[str, dict[str, Any] | None]] = []
    for item in objects:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return None
        found.append((item["name"], arguments if isinstance(arguments, dict) else None))
    return found or None


def _valid(arguments: dict[str, Any], schema: dict[str, Any]) -> bool:
    try:
        return bool(jsonschema.Draft202012Validator(schema).is_valid(arguments))
    except (jsonschema.SchemaError, jsonschema.exceptions.UnknownType, Unresolvable):
        return False  # the tool's schema is broken: no call can be checked against it
