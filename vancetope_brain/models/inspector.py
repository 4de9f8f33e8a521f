"""The inspector's record of one committed turn (issue 32, part 2): what the model was given
and answered, each tool call, tokens, timings — bounded and redacted (``engines/inspector.py``
builds it; ``InspectorStore`` keeps it).

A record is written once, right after its turn commits, under the turn's id (the chat lines
the turn wrote carry it in ``meta.turn``). Its texts are cut to fit ``MAX_TURN_CHARS`` and
``MAX_TEXT_CHARS`` (a cut text ends with ``…[N characters cut]``; the record says how many
were cut in all), and a completion's input to its leading system messages and the newest
``MAX_INPUT_MESSAGES`` others (``ModelStep.omitted`` counts those left out), so a record is
never larger than about that, and costs no more to build, whatever the chat's length.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from vancetope_brain.models.base import Document, Wire
from vancetope_brain.models.process import ProcessStatus
from vancetope_brain.models.usage import UsageSource

MAX_TURN_CHARS = 200_000
"""The most characters of text one record keeps (inputs, outputs, arguments, results,
tool descriptions); what is over is cut, the newest model input and every output first
kept (``engines/inspector.py``)."""
MAX_TEXT_CHARS = 20_000
"""The most characters one text of a record keeps."""
MAX_INPUT_MESSAGES = 50
"""The most input messages of one completion a record keeps besides the leading system
messages (the prompt, the chat summary): the newest. Older ones are a long chat's earlier
lines, which the chat itself keeps; copying them into every turn's record would make each
record, and each turn, grow with the chat (``benchmarks/README.md``, issue 31 target 2)."""
MAX_STEPS = 200
"""The most steps (model calls and tool calls) one record keeps; later ones are counted in
``droppedSteps``."""
REDACTED = "[redacted]"
"""What a secret (an LLM profile's API key, a token) is replaced with."""
TURN_META = "turn"
"""``meta`` key of a chat line: the id of the turn that wrote it (its inspector record)."""


class InspectedCall(Wire):
    """A tool call the model asked for; ``arguments`` as the model wrote them (JSON text)."""

    id: str
    name: str
    arguments: str


class InspectedMessage(Wire):
    """One message of a model input (or the model's answer)."""

    role: str
    content: str = ""
    tool_calls: list[InspectedCall] = Field(default_factory=list)
    tool_call_id: str | None = None


class OfferedTool(Wire):
    """A tool offered to the model in the turn: its description and JSON Schema (as text)."""

    name: str
    description: str
    parameters: str


class ModelStep(Wire):
    """One completion. ``messages`` is its input after the first ``shared`` messages, which
    are those of the turn's previous model step (a tool loop sends its input again, grown:
    kept once), less the ``omitted`` oldest messages after the leading system ones (past
    ``MAX_INPUT_MESSAGES``). ``tools``: the names of the tools offered
    (``TurnInspection.tools``)."""

    kind: Literal["model"] = "model"
    at_ms: int = Field(description="milliseconds since the turn began")
    duration_ms: int
    model: str
    shared: int = 0
    omitted: int = Field(default=0, description=(
        "input messages not kept: the oldest of those after the leading system messages "
        "of `messages` (the record keeps the newest MAX_INPUT_MESSAGES of them)"))
    messages: list[InspectedMessage]
    tools: list[str] = Field(default_factory=list)
    output: InspectedMessage
    finish_reason: str
    tokens_in: int
    tokens_out: int
    usage_source: UsageSource


class ToolStep(Wire):
    """One tool call the engine made: its arguments (JSON text), what it gave back (the
    result as JSON text, or the error) and its outcome (``OK`` / ``ERROR`` / …)."""

    kind: Literal["tool"] = "tool"
    at_ms: int = Field(description="milliseconds since the turn began")
    duration_ms: int
    name: str
    arguments: str
    outcome: str
    result: str


Step = Annotated[ModelStep | ToolStep, Field(discriminator="kind")]


class TurnInspection(Document):
    """What one committed turn did. A listing carries no ``steps`` and no ``tools`` (only
    ``stepCount``); reading one record gives them."""

    id: str = Field(description="the turn's id (meta.turn of the chat lines it wrote)")
    tenant_id: str
    session_id: str
    process_id: str
    user_id: str
    epoch: int
    engine: str
    lifecycle: str
    profile: str | None = Field(default=None, description="the LLM profile of the turn")
    model: str | None = Field(default=None, description="the model of its first completion")
    started_at: datetime
    ended_at: datetime
    status_after: ProcessStatus
    tokens_in: int = 0
    tokens_out: int = 0
    chat_ids: list[str] = Field(default_factory=list, description="the chat lines it wrote")
    step_count: int = 0
    dropped_steps: int = 0
    cut_chars: int = Field(default=0, description="characters cut to fit the record's caps")
    tools: list[OfferedTool] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)

    def head(self) -> TurnInspection:
        """The record as a listing shows it: without tools and steps."""
        return self.model_copy(update={"tools": [], "steps": []})
