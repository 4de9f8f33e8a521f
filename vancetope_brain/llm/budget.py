"""Token budgets without a tokenizer: a conservative estimate (≈ 4 characters per token plus a
per-message overhead), used to keep a model's input inside its context budget.
"""

from __future__ import annotations

from vancetope_brain.llm.base import CHARS_PER_TOKEN, LlmMessage, ToolSpec

__all__ = ["CHARS_PER_TOKEN", "estimate", "fit", "message_tokens", "tools_tokens"]


def message_tokens(message: LlmMessage) -> int:
    return message.tokens


def tools_tokens(tools: list[ToolSpec]) -> int:
    # The length of the JSON list of the specs: theirs, ", " between them and the brackets.
    size = sum(t.json_size for t in tools) + 2 * max(len(tools) - 1, 0) + 2
    return (size + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate(messages: list[LlmMessage], tools: list[ToolSpec]) -> int:
    """The estimated size of one model input."""
    return sum([m.tokens for m in messages]) + tools_tokens(tools)


def fit(fixed: list[LlmMessage], history: list[LlmMessage], tools: list[ToolSpec], budget: int,
        note: LlmMessage) -> list[LlmMessage]:
    """``fixed`` + the newest part of ``history`` that fits ``budget``; when older messages had
    to go, ``note`` goes right after ``fixed``. Raises ValueError if even ``fixed`` does not fit.
    """
    room = budget - estimate(fixed, tools)
    if room < 0:
        raise ValueError(f"the system prompt and tools alone need more than {budget} tokens")
    kept: list[LlmMessage] = []
    for message in reversed(history):
        cost = message_tokens(message)
        if cost > room:
            break
        kept.append(message)
        room -= cost
    kept.reverse()
    if len(kept) == len(history):
        return fixed + kept
    while kept and message_tokens(note) > room:
        room += message_tokens(kept.pop(0))
    return fixed + [note] + kept
