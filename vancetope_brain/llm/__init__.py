"""LLM access: one ``ChatModel`` protocol, an ``openai``-client provider, the offline demo
model and test doubles, and ``markup``: how text from elsewhere goes into a prompt.

Rule: engines never build clients; they get a ChatModel from their context.
Nothing here may open a network connection except ``openai_provider``.
"""

from vancetope_brain.llm.base import (
    ChatModel,
    LlmMessage,
    LlmResponse,
    TokenSink,
    ToolCall,
    ToolSpec,
)

__all__ = ["ChatModel", "LlmMessage", "LlmResponse", "TokenSink", "ToolCall", "ToolSpec"]
