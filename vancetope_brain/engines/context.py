"""ThinkEngineContext: the only way an engine reaches the world (arthur-engine.txt §2.2).

Built fresh for each lifecycle call. Chat lines and status decisions are
buffered here and committed by the lane runner in one fenced write; events
go out live. ``llm()`` and ``tools()`` are the only ways out of a turn; both go
through the turn journal (``engines/journal.py``), which also decides which pending
messages the turn handles.
"""

from __future__ import annotations

import builtins
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vancetope_brain.engines.chat_cache import Reader, store_reader
from vancetope_brain.engines.inspector import TurnSteps
from vancetope_brain.engines.journal import JournaledModel, TurnJournal
from vancetope_brain.engines.memory_api import MemoryAccess, MemoryApi
from vancetope_brain.errors import Conflict, Fenced, Interrupted, LlmRejected, NotFound
from vancetope_brain.events import EventBus, EventType
from vancetope_brain.events.interrupts import Interrupts
from vancetope_brain.events.interrupts import owner as interrupt_owner
from vancetope_brain.events.tokens import TokenCoalescer, TokenStream
from vancetope_brain.knowledge.retrieval import Retriever
from vancetope_brain.llm import ChatModel, LlmMessage, LlmResponse, TokenSink, ToolSpec, aio
from vancetope_brain.llm.budget import CHARS_PER_TOKEN, estimate
from vancetope_brain.models import (
    ChatMessage,
    ChatRole,
    CloseReason,
    DeadLetter,
    InboxMessage,
    ProcessStatus,
    ThinkProcess,
    Timer,
    UserChatInput,
    new_id,
    utcnow,
)
from vancetope_brain.models.knowledge import Chunk, Citation, KnowledgeDocument, SearchHit
from vancetope_brain.models.usage import CallUsage, UsageSource
from vancetope_brain.observability import metrics, tracing
from vancetope_brain.settings import SettingsApi
from vancetope_brain.store import JournalStore, LaneStore, SessionStore
from vancetope_brain.tools import ServerTools, ToolDispatcher, ToolSource

if TYPE_CHECKING:
    from vancetope_brain.engines.recipes_api import RecipesApi
    from vancetope_brain.inbox.service import InboxService
    from vancetope_brain.models.inbox import InboxItem, NewItem
    from vancetope_brain.models.tool_health import ToolHealth

RESET_MARK = "reset"
"""``meta`` key of the chat line a reset leaves; history before it is not the engine's memory."""
HISTORY_PAGE = 200
"""Lines per read of ``ChatApi.history(more=…)``."""
INTERRUPTED = "interrupted"
"""``meta`` key of an assistant line cut short by its user (``process-interrupt``): what the
model had said by then. Its ``toolCalls`` (at most ``INTERRUPTED_CALLS``) are the tool lines
that turn wrote, which the model is shown with the line, so it does not call them again."""
INTERRUPTED_CALLS = 10
AGAIN = "again"
"""``meta`` key of an assistant line that asked the model again for the last reply (the
``regenerate`` command): its value is the ``seq`` of the user line it answers. The lines
between that user line and it (the earlier attempt) stay in the chat for people; the model
never sees them again (``history.fitted``)."""
EXCLUDED = "excludedFromContext"
"""``meta`` key of an input line the model is never shown again (its value says why): the
provider refused the turn that brought it (``LlmRejected``), and would refuse every later
turn whose history held it."""
FROM_PROCESS = "fromProcess"
"""``meta`` key of a user line another process sent (``processes().steer``): its id, so a
client does not show the line as the user's own."""


@dataclass(frozen=True)
class Scope:
    """Where a turn runs. ``originating_user_id`` / ``originating_session_id``: for a service
    process, the user and session whose turn caused its job (else None)."""

    tenant_id: str
    session_id: str
    process_id: str
    user_id: str
    project_id: str = "default"
    originating_user_id: str | None = None
    originating_session_id: str | None = None


HealthWriter = Callable[["ToolHealth"], None]
"""Records a tool-health verdict (``ToolHealthService.write``: stored, logged, published)."""


@dataclass
class TurnState:
    """What the turn has decided so far; the runner turns it into a ``TurnCommit``."""

    drained: list[InboxMessage] = field(default_factory=list)
    chat: list[ChatMessage] = field(default_factory=list)
    status: ProcessStatus | None = None
    close_reason: CloseReason | None = None
    engine_state: dict[str, Any] | None = None
    spawned: list[ThinkProcess] = field(default_factory=list)
    outbox: list[InboxMessage] = field(default_factory=list)
    stops: list[str] = field(default_factory=list)
    timers: list[Timer] = field(default_factory=list)
    dead_letters: dict[str, DeadLetter] = field(default_factory=dict)
    usage: list[CallUsage] = field(default_factory=list)
    steps: TurnSteps = field(default_factory=TurnSteps)
    """The model and tool calls of the turn, for its inspector record (references only)."""


def _last_reset(lines: list[ChatMessage]) -> int | None:
    """The index of the last line a reset left, if any."""
    return next((i for i in range(len(lines) - 1, -1, -1)
                 if lines[i].meta.get(RESET_MARK)), None)


class ChatApi:
    """The process's chat: committed history plus this turn's buffered lines."""

    def __init__(self, ctx: ThinkEngineContext) -> None:
        self._ctx = ctx

    def append(self, role: ChatRole, content: str, *, source: InboxMessage | None = None,
               meta: dict[str, Any] | None = None,
               sources: list[Citation] | None = None) -> ChatMessage:
        """Buffer a line; it is written, numbered and announced when the turn commits.
        ``sources``: the document passages a reply used (``ChatMessage.sources``)."""
        s = self._ctx.scope
        meta = meta or {}
        if role is ChatRole.USER and source is not None and source.sender_process_id:
            meta = {**meta, FROM_PROCESS: source.sender_process_id}
        line = ChatMessage(id=new_id("chat"), tenant_id=s.tenant_id, session_id=s.session_id,
                           process_id=s.process_id, role=role, content=content,
                           source_message_id=source.id if source else None, meta=meta,
                           sources=sources or [])
        self._ctx.turn.chat.append(line)
        return line

    def history(self, limit: int = 200, *,
                more: Callable[[list[ChatMessage]], bool] | None = None) -> list[ChatMessage]:
        """The last ``limit`` lines since the last reset, committed ones first, then this turn's.

        With ``more``, the committed lines are read newest first in pages of ``HISTORY_PAGE``,
        and ``more(page)`` after each says whether older lines may still be needed: a caller
        that keeps only what fits a budget stops the reading there instead of loading
        ``limit`` lines (the result is then the newest part of what ``history(limit)``
        returns, and holds every line of it that such a caller keeps)."""
        lines = self._ctx.turn.chat[-limit:]
        if (reset := _last_reset(lines)) is not None:
            return lines[reset + 1:]
        pages = [lines]  # newest first; joined once (a long chat reads many pages)
        count, before = len(lines), None
        while count < limit:
            want = limit - count if more is None else min(HISTORY_PAGE, limit - count)
            older = self._ctx._read_chat(before, want)
            if (reset := _last_reset(older)) is not None:  # the newest one: older is the head
                pages.append(older[reset + 1:])
                break
            pages.append(older)
            count += len(older)
            if len(older) < want or (more is not None and not more(older)):
                break
            before = older[0].seq
        return list(itertools.chain.from_iterable(reversed(pages)))


class EventPublisher:
    """Live events of this process into its session's stream."""

    def __init__(self, ctx: ThinkEngineContext) -> None:
        self._ctx = ctx

    def emit(self, type: EventType, data: dict[str, Any]) -> int:
        s = self._ctx.scope
        if self._ctx._stream is not None:
            self._ctx._stream.flush()  # the tokens streamed so far come first
        return self._ctx._events.publish(s.session_id, s.process_id, type, data)

    def token(self, text: str) -> None:
        """A chunk of the reply. While a completion streams and the worker coalesces tokens
        (``events/tokens.py``), it is queued and goes out within a few ms, merged with the
        process's other queued tokens; else it is published at once."""
        if self._ctx._stream is not None:
            self._ctx._stream.put(text)
        else:
            self.emit(EventType.TOKEN, {"text": text})


class StreamingModel:
    """Wraps the turn's model: while a completion runs, the process's tokens go through a
    ``TokenStream`` of the worker's ``TokenCoalescer`` (if it has one), flushed when the
    completion returns, so everything the turn publishes after it follows them. (Text the
    journal replays does not call the model: it is published at once, as one token.)"""

    def __init__(self, model: ChatModel, ctx: ThinkEngineContext) -> None:
        self.name = model.name
        self._model = model
        self._ctx = ctx

    def complete(self, messages: list[LlmMessage], *, tools: list[ToolSpec] | None = None,
                 on_token: TokenSink | None = None) -> LlmResponse:
        ctx = self._ctx
        if on_token is None or ctx._tokens is None or ctx._stream is not None:
            return self._model.complete(messages, tools=tools, on_token=on_token)
        stream = ctx._stream = ctx._tokens.stream(ctx.scope.session_id, ctx.scope.process_id)
        try:
            return self._model.complete(messages, tools=tools, on_token=on_token)
        finally:
            ctx._stream = None
            stream.flush()


class CountedModel:
    """Wraps the turn's model as engines see it: the tokens of each completion the turn gets
    go into ``TurnState.usage``, committed with the turn, and the call into
    ``TurnState.steps`` (the inspector's). Outside the journal, so a
    completion an earlier attempt made and this one replays counts here — only the attempt
    that commits counts, so each completion counts once."""

    def __init__(self, model: ChatModel, turn: TurnState) -> None:
        self.name = model.name
        self._model = model
        self._turn = turn

    def complete(self, messages: list[LlmMessage], *, tools: list[ToolSpec] | None = None,
                 on_token: TokenSink | None = None) -> LlmResponse:
        started = time.monotonic()
        try:
            response = self._model.complete(messages, tools=tools, on_token=on_token)
        except Interrupted as cut:
            # A call the user cut was still a call the provider served: its tokens count
            # (estimated: a cut stream reports none) and the inspector shows it.
            if cut.answer is not None:
                self._record(started, messages, tools, cut.answer)
            raise
        self._record(started, messages, tools, response)
        return response

    def _record(self, started: float, messages: list[LlmMessage], tools: list[ToolSpec] | None,
                response: LlmResponse) -> None:
        usage = call_usage(self.name, messages, tools, response)
        self._turn.usage.append(usage)
        self._turn.steps.model(started, messages, tools, response, usage)


def call_usage(model: str, messages: list[LlmMessage], tools: list[ToolSpec] | None,
               response: LlmResponse) -> CallUsage:
    """The tokens of one completion: as the endpoint reported them, else estimated from the
    characters of the request and of the answer (its text and tool calls)."""
    name = response.model or model
    reported = response.usage
    if "prompt_tokens" in reported or "completion_tokens" in reported:
        return CallUsage(name, reported.get("prompt_tokens", 0),
                         reported.get("completion_tokens", 0), UsageSource.PROVIDER)
    answer = len(response.content) + sum(len(c.name) + len(c.arguments)
                                         for c in response.tool_calls)
    return CallUsage(name, estimate(messages, tools or []),
                     (answer + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN, UsageSource.ESTIMATED)


class FencedModel:
    """Wraps the turn's model: refuses to start or finish a call once the lease is lost, and
    reports a refusal of the input (``LlmRejected``) with the refused messages to
    ``on_rejected`` before raising it. With ``interrupts``, the calls belong to the turn
    (``aio.owned``: an interrupt cuts them), and a turn its user stopped raises
    ``Interrupted`` at its next call, or as the call ends (a model that does not stream)."""

    def __init__(self, model: ChatModel, lease_lost: threading.Event,
                 on_rejected: Callable[[LlmRejected, list[LlmMessage]], None],
                 process: ThinkProcess | None = None,
                 interrupts: Interrupts | None = None) -> None:
        self.name = model.name
        self._model = model
        self._lost = lease_lost
        self._on_rejected = on_rejected
        self._process = process
        self._interrupts = interrupts if process is not None else None
        self._owner = "" if process is None else \
            interrupt_owner(process.tenant_id, process.id, process.epoch)

    def complete(self, messages: list[LlmMessage], *, tools: list[ToolSpec] | None = None,
                 on_token: TokenSink | None = None) -> LlmResponse:
        self._check()
        self._check_interrupt("")
        if on_token is not None:
            sink = on_token
            owner = self._owner

            def on_token(text: str) -> None:
                # A fenced turn must not stream a reply that will never be committed.
                self._check()
                if not (owner and aio.is_cut(owner)):  # what comes after a cut is void
                    sink(text)

        with metrics.llm_request(self.name) as request, tracing.span("llm.complete",
                                                                    model=self.name), \
                aio.owned(self._owner):
            try:
                response = request(self._model.complete(messages, tools=tools,
                                                        on_token=on_token))
            except LlmRejected as e:
                self._on_rejected(e, messages)
                raise
            except Interrupted as cut:  # cut mid-stream: what it had said is its answer
                cut.answer = LlmResponse(cut.said, finish_reason="interrupted")
                raise
        self._check()
        self._check_interrupt(response.content, response)
        return response

    def _check(self) -> None:
        if self._lost.is_set():
            raise Fenced("the lane lease was lost; this turn must write nothing")

    def _check_interrupt(self, said: str, answer: LlmResponse | None = None) -> None:
        p = self._process
        if self._interrupts is not None and p is not None and \
                self._interrupts.requested(p.id, p.epoch):
            cut = Interrupted(said)
            cut.answer = answer
            raise cut


@dataclass(frozen=True)
class SpawnRequest:
    recipe: str | None
    engine: str | None
    name: str
    goal: str
    params: dict[str, Any] | None


Spawner = Callable[[ThinkProcess, SpawnRequest, list[ThinkProcess]], ThinkProcess]
"""Builds (does not store) a child process of the given parent from a recipe or an engine,
given the session's processes so far (``ProcessFactory.build``: its cap of open ones)."""


class ProcessesApi:
    """The processes of this session. Spawns and messages are committed with the turn (fenced,
    atomic); stops are requested right after it commits."""

    def __init__(self, ctx: ThinkEngineContext) -> None:
        self._ctx = ctx

    def current(self) -> ThinkProcess:
        return self._ctx.process

    def list(self) -> list[ThinkProcess]:
        s = self._ctx.scope
        return self._ctx._processes.list_processes(s.tenant_id, s.session_id) + self._ctx.turn.spawned

    def children(self, *, open_only: bool = False) -> builtins.list[ThinkProcess]:
        """The processes this one spawned (this turn's included); ``open_only``: those still
        owing this process something — not CLOSED, or CLOSED with a report that arrived after
        this turn read its inbox (read afresh here, so a turn never closes over it)."""
        me = self._ctx.process.id
        mine = [p for p in self.list() if p.parent_process_id == me]
        if not open_only:
            return mine
        s, drained = self._ctx.scope, {m.id for m in self._ctx.turn.drained}
        unread = {m.sender_process_id for m in self._ctx._lanes.pending_messages(
            s.tenant_id, me) if m.id not in drained}
        return [p for p in mine if p.status is not ProcessStatus.CLOSED or p.id in unread]

    def get(self, process_id: str) -> ThinkProcess:
        """A process of this session; another session's (another user's too) reads exactly
        like a missing one, so a command naming an id tells nobody whether it exists."""
        for child in self._ctx.turn.spawned:
            if child.id == process_id:
                return child
        s = self._ctx.scope
        try:
            process: ThinkProcess | None = self._ctx._processes.get_process(s.tenant_id,
                                                                            process_id)
        except NotFound:
            process = None
        if process is None or process.session_id != s.session_id:
            raise NotFound(f"no process {process_id!r} in this session") from None
        return process

    def spawn(self, *, recipe: str | None = None, engine: str | None = None, name: str = "",
              goal: str = "", params: dict[str, Any] | None = None) -> ThinkProcess:
        """A child of this process, started on its own lane once this turn commits. Raises
        ``LimitExceeded`` when the session has as many open processes as it may."""
        child = self._ctx._spawner(self._ctx.process,
                                   SpawnRequest(recipe, engine, name, goal, params), self.list())
        self._ctx.turn.spawned.append(child)
        self._ctx.events().emit(EventType.PROCESS_SPAWNED, {
            "childProcessId": child.id, "goal": goal, "name": child.name,
            "engine": child.engine, "recipe": child.recipe_name})
        return child

    def steer(self, process_id: str, content: str) -> None:
        """Send ``content`` to another process of the session as user input."""
        target = self.get(process_id)
        if target.id == self._ctx.process.id:
            raise Conflict("a process cannot steer itself")
        if target.status is ProcessStatus.CLOSED:
            raise Conflict(f"process {process_id!r} is CLOSED; it takes no more messages")
        s = self._ctx.scope
        self._ctx.turn.outbox.append(InboxMessage(
            id=new_id("msg"), tenant_id=s.tenant_id, target_process_id=target.id,
            sender_process_id=s.process_id,
            message=UserChatInput(from_user=f"process:{s.process_id}", content=content)))

    def stop(self, process_id: str) -> None:
        """Stop a process of the session (and, on its lane, everything it started); the
        session's chat process lives as long as the session and cannot be stopped."""
        target = self.get(process_id)
        if target.status is ProcessStatus.CLOSED:
            raise Conflict(f"process {process_id!r} is already CLOSED")
        s = self._ctx.scope
        if self._ctx._processes.get_session(s.tenant_id, s.session_id).chat_process_id == \
                target.id:
            raise Conflict(f"process {process_id!r} is the session's chat; it lives as long "
                           f"as the session")
        self._ctx.turn.stops.append(target.id)


TIMER_COMMAND = "timer"
"""``ExternalCommand.command`` of a due timer's message; ``params`` is ``{"key": key}``."""
MAX_TIMER_SECONDS = 7 * 24 * 3600
"""The longest a timer may run: a week."""
RESERVED_TIMER_PREFIX = "vt."
"""Timer keys the system arms for a process (a quota's: ``lanes/quota.py``)."""


class TimersApi:
    """Wake-up calls for this process, committed with the turn (a turn that never commits
    arms nothing). Once due, the sweep delivers ``ExternalCommand(command="timer",
    params={"key": key})`` into the inbox, at most one sweep interval late; a process that
    is CLOSED by then gets nothing. There is no cancel: an engine ignores a timer it no
    longer waits for."""

    def __init__(self, ctx: ThinkEngineContext) -> None:
        self._ctx = ctx

    def after(self, seconds: float, key: str) -> Timer:
        """Arm (or re-arm) the timer ``key`` to fire ``seconds`` from now (0 < seconds ≤ a
        week)."""
        if not 0 < seconds <= MAX_TIMER_SECONDS:
            raise ValueError(f"a timer runs for 0 < seconds <= {MAX_TIMER_SECONDS}, "
                             f"not {seconds}")
        if not key or len(key) > 200:
            raise ValueError("a timer key is 1 to 200 characters")
        if key.startswith(RESERVED_TIMER_PREFIX):
            raise ValueError(f"timer keys starting {RESERVED_TIMER_PREFIX!r} are the system's")
        s = self._ctx.scope
        timer = Timer(id=f"{s.process_id}:{key}", tenant_id=s.tenant_id,
                      process_id=s.process_id, key=key,
                      due_at=utcnow() + timedelta(seconds=seconds))
        armed = self._ctx.turn.timers
        armed[:] = [t for t in armed if t.id != timer.id] + [timer]
        return timer


class InboxApi:
    """Asking the user through their Inbox (user-interaction.txt §10.1). The item is written
    at once (not with the turn's commit) so the user sees it while the turn goes on; a retry
    of the turn repeats the ``idempotencyKey`` and gets the first item back."""

    def __init__(self, ctx: ThinkEngineContext) -> None:
        self._ctx = ctx

    def post(self, new: NewItem) -> tuple[InboxItem, bool]:
        """Create an item from this process (for the session's user unless assigned)."""
        s = self._ctx.scope
        return self._service().create(s.tenant_id, s.user_id, new,
                                      origin_process_id=s.process_id,
                                      origin_session_id=s.session_id)

    def attach(self, data: bytes, filename: str, mime_type: str, *,
               key: str | None = None) -> dict[str, Any]:
        """Store a file to show in an OUTPUT_IMAGE / OUTPUT_DOCUMENT item (its
        ``attachmentId``). With a ``key`` the write is idempotent for this process: the same
        key again (e.g. a retried turn storing the same file) returns the first file."""
        s = self._ctx.scope
        return self._service().attach(s.tenant_id, data, filename, mime_type,
                                      key=None if key is None else f"{s.process_id}:{key}")

    def attachment(self, attachment_id: str) -> dict[str, Any]:
        """A file stored in this tenant: ``{id, filename, mimeType, sizeBytes}``."""
        return self._service().attachment(self._ctx.scope.tenant_id, attachment_id)

    def _service(self) -> InboxService:
        if self._ctx._inbox is None:
            raise Conflict("this process has no Inbox access")
        return self._ctx._inbox


class KnowledgeApi:
    """The documents of the process's project (arthur-engine §2.2, "documents"; issue 29):
    searched, and listed. Every call is scoped to the process's tenant and project; a
    context built without knowledge (``knowledge=None``) finds nothing and lists nothing."""

    def __init__(self, ctx: ThinkEngineContext) -> None:
        self._ctx = ctx

    def query(self, text: str, *, top_k: int, min_score: float) -> list[SearchHit]:
        """The passages of the project's documents that bear on ``text`` (free text, never
        syntax), best first (``Retriever.search``). Raises ``StoreError`` when the store
        fails."""
        s, retriever = self._ctx.scope, self._ctx._knowledge
        if retriever is None:
            return []
        # The project's settings as the turn read them (no second read).
        return retriever.search(s.tenant_id, [s.project_id], text, top_k=top_k,
                                min_score=min_score,
                                settings=self._ctx.settings().without_user())

    def documents(self) -> list[KnowledgeDocument]:
        """The project's documents by name, whatever their status."""
        s, retriever = self._ctx.scope, self._ctx._knowledge
        return [] if retriever is None else retriever.documents(s.tenant_id, s.project_id)

    def read(self, document_id: str, *, section: str | None = None, page: int | None = None,
             lines: tuple[int, int] | None = None, limit: int) -> list[Chunk]:
        """The passages of one of the project's READY documents at the position a
        ``Citation`` names (section, page, lines; none: from the start), in document order,
        at most ``limit`` (``DocumentStore.read_chunks``)."""
        s, retriever = self._ctx.scope, self._ctx._knowledge
        return [] if retriever is None else retriever.read(
            s.tenant_id, s.project_id, document_id, section=section, page=page, lines=lines,
            limit=limit)


class ThinkEngineContext:
    """Access surface of one lifecycle call. Engines must not keep it past the call."""

    def __init__(self, *, process: ThinkProcess, lanes: LaneStore, processes: SessionStore,
                 events: EventBus, journal: JournalStore,
                 model: ChatModel, lease_lost: threading.Event, settings: SettingsApi,
                 tool_pool: frozenset[str], roles: frozenset[str] = frozenset(),
                 tool_sources: list[ToolSource] | None = None,
                 spawner: Spawner | None = None, recipes: RecipesApi | None = None,
                 inbox: InboxService | None = None, tool_health: HealthWriter | None = None,
                 pending: list[InboxMessage] | None = None,
                 tokens: TokenCoalescer | None = None,
                 read_chat: Reader | None = None,
                 knowledge: Retriever | None = None,
                 memory: MemoryAccess | None = None,
                 interrupts: Interrupts | None = None) -> None:
        self.process = process
        self.scope = Scope(process.tenant_id, process.session_id, process.id, process.user_id,
                           process.project_id, process.originating_user_id,
                           process.originating_session_id)
        self._tool_health = tool_health
        self.turn = TurnState()
        self.profile: str | None = None
        """The LLM profile the turn's model is of, if known (for its inspector record)."""
        self._lanes = lanes
        # The committed chat, a page at a time (``ChatCache``; by default: from the store).
        self._read_chat: Reader = read_chat or store_reader(lanes, process.tenant_id,
                                                            process.id)
        self._processes = processes
        self._events = events
        self._journal = TurnJournal(journal, process, self._given, self._ask)
        self._tokens = tokens
        self._stream: TokenStream | None = None  # while a completion streams, if coalescing
        # Streaming inside the journal: a completion whose tokens did not get out (Redis
        # failed) is not recorded, so the turn's next attempt asks the model again.
        self._model = CountedModel(JournaledModel(StreamingModel(
            FencedModel(model, lease_lost, self._exclude_input, process, interrupts), self),
            self._journal), self.turn)
        self._settings = settings
        self._tools = ToolDispatcher(tool_pool, roles,
                                     sources=[ServerTools(self), *(tool_sources or [])],
                                     journal=self._journal, steps=self.turn.steps)
        self._given_pending = pending  # read by the runner for this turn, or on first use
        self._pending: list[InboxMessage] | None = None  # what this turn handles, undrained
        self._spawner = spawner or _no_spawning
        self._recipes = recipes
        self._inbox = inbox
        self._knowledge = knowledge
        self._memory = memory

    @property
    def user(self) -> str:
        return self.scope.user_id

    @property
    def originating_user(self) -> str | None:
        """The user whose turn caused this service process's job (think-engines §7b)."""
        return self.scope.originating_user_id

    def tool_health(self) -> HealthWriter:
        """Where tool-health verdicts go; only the ``tool_health_write`` tool (role
        ``tool-health-writer``) should write through it."""
        if self._tool_health is None:
            raise Conflict("this process has no tool-health access")
        return self._tool_health

    def chat(self) -> ChatApi:
        return ChatApi(self)

    def llm(self) -> ChatModel:
        return self._model

    def running_call_key(self) -> str | None:
        """The key of the journaled tool call running now, the same in each attempt of its
        turn and in the run the user approved after a crash (``TurnJournal.running``); None
        outside such a call."""
        return self._journal.running

    @property
    def journal_opened(self) -> bool:
        """Whether this turn read its journal (the commit then clears it)."""
        return self._journal.opened

    def tools(self) -> ToolDispatcher:
        return self._tools

    def settings(self) -> SettingsApi:
        return self._settings

    def events(self) -> EventPublisher:
        return EventPublisher(self)

    def processes(self) -> ProcessesApi:
        return ProcessesApi(self)

    def recipes(self) -> RecipesApi:
        if self._recipes is None:
            raise RuntimeError("this context was built without recipes")
        return self._recipes

    def inbox(self) -> InboxApi:
        return InboxApi(self)

    def knowledge(self) -> KnowledgeApi:
        return KnowledgeApi(self)

    def memory(self) -> MemoryApi:
        """The memory entries of the process's scope chain, and its project's documents
        (``engines/memory_api.py``)."""
        return MemoryApi(self, self._memory, self._journal.step_key)

    def timers(self) -> TimersApi:
        return TimersApi(self)

    def has_pending(self) -> bool:
        return bool(self._load_pending())

    def drain_pending(self) -> list[InboxMessage]:
        """All pending messages this turn handles, in sequence order; they count as drained
        when the turn commits. (Another attempt of a turn that died handles only the
        messages that turn was given; later ones wait for the next turn.)

        Returns the persisted envelopes (``.message`` is the SteerMessage) so
        chat lines can name the message they came from.
        """
        pending = self._load_pending()
        self._pending = []
        self.turn.drained.extend(pending)
        self._journal.answered(pending)
        return pending

    def set_status(self, status: ProcessStatus, close_reason: CloseReason | None = None) -> None:
        """The status the process has when this turn commits (IDLE if never set)."""
        if status in (ProcessStatus.INIT, ProcessStatus.RUNNING):
            raise ValueError(f"an engine cannot end a turn in {status}")
        if (status is ProcessStatus.CLOSED) != (close_reason is not None):
            raise ValueError("CLOSED needs a close reason, and only CLOSED has one")
        self.turn.status, self.turn.close_reason = status, close_reason

    def save_state(self, state: dict[str, Any]) -> None:
        """Replace ``process.engineState`` when the turn commits."""
        self.turn.engine_state = state

    def state(self) -> dict[str, Any]:
        """The engine state as this turn leaves it so far: what ``save_state`` was last
        given, else the process's."""
        return self.process.engine_state if self.turn.engine_state is None \
            else self.turn.engine_state

    def _exclude_input(self, error: LlmRejected, messages: list[LlmMessage]) -> None:
        """The provider refused this turn's input: the user and event lines buffered so far
        that the refused ``messages`` carried are committed marked ``EXCLUDED`` (the history
        builder skips them), so the refusal does not repeat on every later turn, and an
        error line tells the user so. (A refused request without them — summarising older
        lines, ``engines/history.py`` — excludes nothing.)"""
        sent = {m.content for m in messages}
        lines = [line for line in self.turn.chat
                 if line.role in (ChatRole.USER, ChatRole.EVENT) and EXCLUDED not in line.meta
                 and line.content in sent]
        for line in lines:
            line.meta[EXCLUDED] = f"{error.code}: {error}"[:500]
        if lines:
            quoted = "; ".join(f"\"{excerpt(line.content)}\"" for line in lines[:3])
            self.chat().append(ChatRole.ERROR, (
                f"The model provider refused this turn's input ({quoted}"
                f"{' …' if len(lines) > 3 else ''}); it is left out of what the model sees "
                "from now on, so later messages are not refused for it."))

    def _load_pending(self) -> list[InboxMessage]:
        if self._pending is None:
            self._pending = list(self._journal.handled())
        return self._pending

    def _given(self) -> list[InboxMessage]:
        if self._given_pending is None:
            s = self.scope
            self._given_pending = self._lanes.pending_messages(s.tenant_id, s.process_id)
        return self._given_pending

    def _ask(self, new: NewItem) -> str | None:
        """Post an in-doubt question of the journal; None when this process has no Inbox."""
        return None if self._inbox is None else self.inbox().post(new)[0].id


def excerpt(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters: how a notice quotes a message."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _no_spawning(parent: ThinkProcess, request: SpawnRequest,
                 siblings: list[ThinkProcess]) -> ThinkProcess:
    raise Conflict("this process cannot start other processes")
