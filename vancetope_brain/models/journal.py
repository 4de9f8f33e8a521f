"""The turn journal's record (ARCHITECTURE §3, last paragraph): one step of a turn that has
not committed yet — what it was given, an LLM completion, a call of a tool that is not
idempotent — kept so that an attempt of the same turn after a crash replays it."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Document, utcnow


class StepKind(StrEnum):
    INPUT = "input"  # the ids of the pending messages the turn was given (key ``input``)
    LLM = "llm"      # one completion, keyed by a hash of its request
    TOOL = "tool"    # one call of a tool that is not idempotent, keyed by tool and arguments


class StepState(StrEnum):
    STARTED = "STARTED"    # a tool call is being invoked; its outcome is not recorded yet
    DONE = "DONE"          # the result is recorded (``result``)
    IN_DOUBT = "IN_DOUBT"  # a call found STARTED by a later attempt: it may or may not have run
    APPROVED = "APPROVED"  # the user answered "run it again" (in the turn that read the answer)
    REJECTED = "REJECTED"  # the user answered "do not" (or dismissed the question): not run


class JournalEntry(Document):
    """One journaled step of a process's uncommitted turn, ``id`` = ``<process id>:<key>``.

    ``turn`` names the turn (not the attempt) that wrote it: a new attempt of that turn
    adopts the name, a new turn picks another, so steps of another turn are never replayed.
    ``match`` is the hash of (tool, arguments) of a TOOL step: an IN_DOUBT or REJECTED step
    holds back every call with the same tool and arguments. ``item_id`` is the Inbox item
    that asks the user about an IN_DOUBT call.
    """

    id: str
    tenant_id: str
    process_id: str
    key: str
    turn: str
    kind: StepKind
    state: StepState = StepState.DONE
    tool: str | None = None
    params: dict[str, Any] | None = None
    match: str | None = None
    result: dict[str, Any] | None = None
    message_ids: list[str] = Field(default_factory=list)
    item_id: str | None = None
    run_key: str | None = None
    """A TOOL step's key of its run: its turn and ``key`` when first STARTED, kept by its
    IN_DOUBT and APPROVED copies, so the run the user approves after a crash has the key of
    the one cut short (``inbox_post`` defaults its idempotency key to it)."""
    at: datetime = Field(default_factory=utcnow)
