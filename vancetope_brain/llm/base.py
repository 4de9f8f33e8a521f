"""The ChatModel protocol and its message types (an OpenAI-shaped subset)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

TokenSink = Callable[[str], None]
"""Receives each streamed text chunk as it arrives."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: name, description, JSON Schema of its parameters.

    ``stream`` names a string argument whose value is text for the user (``respond``'s
    ``message``): while a call of this tool streams, the model sends the value's growing
    text to ``on_token`` as it does text content, so a reply given through a tool streams too.
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    stream: str | None = None

    @functools.cached_property
    def json_size(self) -> int:
        """Characters of ``[name, description, parameters]`` as JSON, what a token budget
        counts; computed once (a spec, its parameters included, is never changed)."""
        return len(json.dumps([self.name, self.description, self.parameters]))

    @functools.cached_property
    def parameters_json(self) -> str:
        """``parameters`` as JSON text (not ASCII-escaped), what a turn's inspector record
        shows; computed once, as ``json_size``."""
        return json.dumps(self.parameters, ensure_ascii=False, default=str)

    @functools.cached_property
    def canonical_json(self) -> str:
        """``[name, description, parameters]`` as canonical JSON (sorted keys, no spaces, not
        ASCII-escaped), what a turn journal's request digest hashes; computed once, as
        ``json_size``: the registered tools' specs are the same objects every turn."""
        return json.dumps([self.name, self.description, self.parameters], sort_keys=True,
                          separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made; ``arguments`` is the raw JSON text the model produced."""

    id: str
    name: str
    arguments: str


CHARS_PER_TOKEN = 4
"""≈ characters a token, in every token budget (``llm/budget.py``): no tokenizer."""
MESSAGE_OVERHEAD = 4
"""Tokens a message counts besides its characters."""


@dataclass(frozen=True)
class LlmMessage:
    """One message of the model input."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    @functools.cached_property
    def size(self) -> int:
        """Characters of the content and the tool calls' names and arguments, what a token
        budget counts; computed once (a message is never changed)."""
        size = len(self.content)
        for call in self.tool_calls:  # (a loop: most messages have none, and it is hot)
            size += len(call.name) + len(call.arguments)
        return size

    @functools.cached_property
    def tokens(self) -> int:
        """What a token budget counts for the message (``llm/budget.py``: ≈ 4 characters a
        token, plus 4 for the message); computed once, so a long chat's turn, whose
        committed lines keep their messages, does not count them again."""
        return MESSAGE_OVERHEAD + (self.size + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN

    @functools.cached_property
    def digest(self) -> bytes:
        """SHA-256 of the message (role, content, tool calls, ``tool_call_id``) as canonical
        JSON: what the turn journal keys a request by (``engines/journal.py``); computed
        once, so a long chat's turn, whose committed lines keep their messages, hashes
        only what is new."""
        calls = [[c.id, c.name, c.arguments] for c in self.tool_calls]
        return hashlib.sha256(json.dumps(
            [self.role, self.content, calls, self.tool_call_id], ensure_ascii=False,
            separators=(",", ":")).encode()).digest()


@dataclass(frozen=True)
class LlmResponse:
    """The model's complete answer: text, tool calls (fully assembled), why it stopped.

    ``tools_offered`` is False when the call offered tools but the model never saw them (its
    endpoint profile says ``tools: false``, or the endpoint refused them): it could only
    answer in text."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    model: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    tools_offered: bool = True


class ChatModel(Protocol):
    """A chat-completion model. Implementations are cheap to build per call and thread-safe."""

    name: str

    def complete(
        self,
        messages: list[LlmMessage],
        *,
        tools: list[ToolSpec] | None = None,
        on_token: TokenSink | None = None,
    ) -> LlmResponse:
        """Run one completion. Text chunks go to ``on_token`` as they stream (if given), and
        so does the growing value of the ``stream`` argument of a tool call (``ToolSpec``);
        the return value holds the whole text and the assembled tool calls.
        Raises ``LlmError`` after the implementation's retries are spent.
        """
        ...
