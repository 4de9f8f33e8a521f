"""Process frames: create a process, the lifecycle calls, stop its running turn, read one or a session's, steer
it or send it a command, page its chat, and list the think engines."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import Field

from vancetope_brain.engines import ENGINES, shown_process
from vancetope_brain.models import ProcessStatus
from vancetope_brain.models.base import Wire
from vancetope_brain.models.lifecycle import LifecycleCall
from vancetope_gateway.handlers.declare import Context, Empty, Frame, Id, declare, frame


class ProcessCreate(Wire):
    """Create a process in the bound session and start it on its own lane (think-engines
    §8): by ``recipe`` (its engine drives the process) or by ``engine`` (with the recipe
    named like it, if any); with neither, engine ``marvin`` (alias ``deep-think``).
    ``template`` names a workflow template for the engine (engine param ``template``)."""

    engine: str | None = Field(default=None, min_length=1, max_length=64)
    recipe: str | None = Field(default=None, min_length=1, max_length=64)
    template: str | None = Field(default=None, min_length=1, max_length=64)
    goal: str = Field(default="", max_length=32_000)
    name: str = Field(default="", max_length=100)
    params: dict[str, Any] = Field(default_factory=dict)


class ProcessRef(Wire):
    """Names a process of the caller (``process-start`` / ``-pause`` / ``-resume`` / ``-stop`` /
    ``-reset`` / ``-interrupt`` / ``-status``)."""

    process_id: str = Id


class ProcessList(Wire):
    """Processes of a session (default: the bound one); non-terminal unless ``all``."""

    session_id: str | None = Field(default=None, max_length=64)
    all: bool = False


class ProcessSteer(Wire):
    """Send user input to a process of the bound session (arthur-engine §3.6 addressing)."""

    target_think_process_id: str = Id
    content: str = Field(min_length=1, max_length=32_000)
    idempotency_key: str | None = Field(default=None, max_length=128)


class ProcessCommand(Wire):
    """Send a high-level command to a process of the bound session, as a client's button
    would (an ExternalCommand, arthur-engine §2.3, §3.4): queued in its inbox like
    ``process-steer``; the engine decides what ``command`` means (Arthur: ``process-steer``
    with ``targetProcessId`` and ``content``, ``process-stop`` with ``targetProcessId``)."""

    process_id: str = Id
    command: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = Field(default=None, max_length=128)


class ChatHistory(Wire):
    """A page of a process's chat, oldest first; page backwards with ``beforeSeq``."""

    process_id: str = Id
    before_seq: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=500)


class ProcessReply(Wire):
    """Reply to ``process-create`` and the process commands: the process as it is now (a
    lifecycle call is then executed on the process's lane; watch ``status-changed``)."""

    process: dict[str, Any]


class ProcessInterrupted(Wire):
    """Reply to ``process-interrupt``: the process, and whether a turn of it was running to
    stop (false: it had just ended, and the next turn runs as usual). The stopped turn
    commits what was said as the assistant's line marked ``interrupted`` (its chat-message
    event follows); no token follows it more than 300 ms after the request."""

    process: dict[str, Any]
    interrupted: bool


class ProcessesListed(Wire):
    """Reply to ``process-list``."""

    processes: list[dict[str, Any]]


class SteerAccepted(Wire):
    """Reply to ``process-steer`` and ``process-command``: the message is persisted in the inbox with this ``seq``;
    ``duplicate`` is true when the idempotency key was seen before (nothing new stored)."""

    message_id: str
    seq: int
    duplicate: bool


class ChatPage(Wire):
    """Reply to ``chat-history``: chat lines, oldest first."""

    messages: list[dict[str, Any]]


class EnginesListed(Wire):
    """Reply to ``think-engines-list`` (also ``thinkengines-list``, the spelling of
    think-engines §8): the registry (name, title, description, version, allowedTools,
    defaultSettings)."""

    engines: list[dict[str, Any]]


@frame("process-create")
def process_create(conn: Context, data: ProcessCreate) -> ProcessReply:
    session = conn.require_session()
    process = conn.gateway.sessions.create_process(
        conn.who, session.id, data.engine, recipe=data.recipe, template=data.template,
        goal=data.goal, name=data.name, params=data.params)
    return ProcessReply(process=shown_process(process))


@frame("process-start")
def process_start(conn: Context, data: ProcessRef) -> ProcessReply:
    return ProcessReply(
        process=shown_process(conn.gateway.sessions.start(conn.who, data.process_id)))


def _process_control(call: LifecycleCall, conn: Context, data: ProcessRef) -> ProcessReply:
    return ProcessReply(
        process=shown_process(conn.gateway.sessions.control(conn.who, data.process_id, call)))


# ``process-pause`` / ``-resume`` / ``-stop`` / ``-reset``: every lifecycle call but suspend,
# which is the system's (a session cascade), not a client's.
for _call in LifecycleCall:
    if _call is not LifecycleCall.SUSPEND:
        declare(Frame(f"process-{_call.value}", ProcessRef, ProcessReply,
                      functools.partial(_process_control, _call)))


@frame("process-interrupt")
def process_interrupt(conn: Context, data: ProcessRef) -> ProcessInterrupted:
    process, running = conn.gateway.sessions.interrupt(conn.who, data.process_id)
    return ProcessInterrupted(process=shown_process(process), interrupted=running)


@frame("process-status")
def process_status(conn: Context, data: ProcessRef) -> ProcessReply:
    return ProcessReply(
        process=shown_process(conn.gateway.sessions.process(conn.who, data.process_id)))


@frame("process-list")
def process_list(conn: Context, data: ProcessList) -> ProcessesListed:
    session_id = data.session_id or conn.require_session().id
    processes = conn.gateway.sessions.processes(conn.who, session_id)
    return ProcessesListed(processes=[
        shown_process(p) for p in processes
        if data.all or p.status is not ProcessStatus.CLOSED])


@frame("process-steer")
def process_steer(conn: Context, data: ProcessSteer) -> SteerAccepted:
    message, created = conn.gateway.sessions.steer(
        conn.who, data.target_think_process_id, data.content, data.idempotency_key,
        session_id=conn.require_session().id)
    return SteerAccepted(message_id=message.id, seq=message.seq, duplicate=not created)


@frame("process-command")
def process_command(conn: Context, data: ProcessCommand) -> SteerAccepted:
    message, created = conn.gateway.sessions.command(
        conn.who, data.process_id, data.command, data.params, data.idempotency_key,
        session_id=conn.require_session().id)
    return SteerAccepted(message_id=message.id, seq=message.seq, duplicate=not created)


@frame("chat-history")
def chat_history(conn: Context, data: ChatHistory) -> ChatPage:
    lines = conn.gateway.sessions.chat_history(conn.who, data.process_id,
                                               before_seq=data.before_seq, limit=data.limit)
    return ChatPage(messages=[line.dump() for line in lines])


@frame("thinkengines-list")  # the spelling of think-engines §8
@frame("think-engines-list")
def think_engines_list(conn: Context, data: Empty) -> EnginesListed:
    return EnginesListed(engines=[e.describe() for e in ENGINES])
