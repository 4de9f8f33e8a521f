"""The turn journal of one lifecycle call (ARCHITECTURE §3, last paragraph).

``context.llm()`` and ``context.tools()`` are the only ways out of a turn; through this
journal they record each completion and each result of a tool that is not idempotent in the
store (``JournalStore``) before the engine sees it, so an attempt of the same turn after a
crash replays those steps instead of taking them again:

- *Which turn.* The first step a turn records also records the ids of the pending messages
  it was given. A later attempt that is given all of them again (it reads the inbox anew, so
  it may be given more) is the same turn: it adopts the journal and handles only those
  messages, so it asks the model the same questions; the rest wait for the next turn.
- *Completions* are keyed by a hash of the request (model name, tools, and each message
  hashed once: ``LlmMessage.digest``) and its occurrence in the turn; a replayed one
  streams its text (or its ``respond`` message) once as a single token event.
- *Tool calls* are keyed by tool, canonical arguments and occurrence — not by the model's
  call id, which changes whenever a completion is computed anew, while the same tool with
  the same arguments is the same action. An idempotent tool (``ToolManifest.idempotent``) is
  not journaled: it is simply called again. Any other call is recorded STARTED before it is
  invoked and DONE with its outcome after.
- *In doubt.* A call the journal holds STARTED when a turn opens it was cut short by a
  crash: it may or may not have run. It is never invoked again by itself: it becomes
  IN_DOUBT, the user is asked in their Inbox (an APPROVAL with the idempotency key
  ``journal:<turn>:<key>``, so another attempt asks nothing new; the lane then keeps the
  process BLOCKED), and every call of that tool with those arguments gets an error result
  saying so — until the answer arrives: "approve" lets the next such call run, anything else
  (no, a dismissal, an undecided answer) records it as not run and refuses such calls for
  the rest of that turn. While a call runs, ``running`` names it (``JournalEntry.run_key``):
  the same in every attempt of its turn and in the run the user approved, so a tool that
  writes at once (``inbox_post``) can make that write idempotent even when the model gave
  no key. IN_DOUBT entries outlive commits; the other entries leave with the
  commit of the turn that opened the journal.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from vancetope_brain.errors import Fenced, JournalFull
from vancetope_brain.llm import ChatModel, LlmMessage, LlmResponse, TokenSink, ToolCall, ToolSpec
from vancetope_brain.models import (
    InboxAnswer,
    InboxMessage,
    JournalEntry,
    StepKind,
    StepState,
    ThinkProcess,
    new_id,
)
from vancetope_brain.models.inbox import ItemType, NewItem, Outcome
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.store import JournalStore
from vancetope_brain.tools import ToolManifest, ToolOutcome

INPUT = "input"
"""Key of the entry naming the turn and the messages it was given."""
IN_DOUBT_TAG = "in-doubt"
"""Tag of the Inbox items that ask whether to run an in-doubt call again."""
SHOWN_ARGUMENTS = 2000
"""How much of an in-doubt call's arguments its Inbox item shows (characters)."""

Ask = Callable[["NewItem"], str | None]
"""Posts an Inbox item from the process; returns its id (None: the process has no Inbox)."""


class TurnJournal:
    """The journal of one lifecycle call. Opened (read) once, on first use; every write is
    fenced by the turn's epoch (a lost lane raises ``Fenced``)."""

    def __init__(self, store: JournalStore, process: ThinkProcess,
                 given: Callable[[], list[InboxMessage]], ask: Ask) -> None:
        self._store = store
        self._process = process
        self._given = given
        self._ask = ask
        self._turn = new_id("jrn")
        self._entries: dict[str, JournalEntry] | None = None
        self._handled: list[InboxMessage] = []
        self._input_written = False
        self._seen: Counter[str] = Counter()
        self.running: str | None = None
        """The ``run_key`` of the journaled tool call running now (None between calls)."""

    @property
    def opened(self) -> bool:
        return self._entries is not None

    def handled(self) -> list[InboxMessage]:
        """The pending messages this turn handles: those it was given, or, for another attempt
        of a turn that recorded steps, the ones that turn was given."""
        self._open()
        return self._handled

    def complete(self, model: ChatModel, messages: list[LlmMessage], tools: list[ToolSpec] | None,
                 on_token: TokenSink | None) -> LlmResponse:
        """``model.complete``, or its recorded answer (whose text goes to ``on_token`` once)."""
        entries = self._open()
        key = self._next(f"llm:{_request_digest(model.name, messages, tools)}")
        found = entries.get(key)
        if found is not None and found.turn == self._turn and found.result is not None:
            response = _response(found.result)
            text = response.content or _streamed_argument(response, tools)
            if on_token is not None and text:
                on_token(text)
            return response
        response = model.complete(messages, tools=tools, on_token=on_token)
        done = self._entry(key, StepKind.LLM, result=_response_json(response))
        self._write(done)
        return _response(done.result or {})

    def call(self, manifest: ToolManifest, params: dict[str, Any],
             run: Callable[[], ToolOutcome]) -> ToolOutcome:
        """``run()`` for an idempotent tool; for any other, ``run()`` at most once across the
        attempts of a turn: its recorded outcome when there is one, an error result when the
        call is in doubt or refused by the user."""
        if manifest.idempotent:
            return run()
        entries = self._open()
        name = manifest.name
        match = _digest({"tool": name, "params": params})
        key = self._next(f"tool:{match}")
        found = entries.get(key)
        if found is not None and found.turn == self._turn and found.state is StepState.DONE:
            return _outcome(found.result or {})
        held = self._held(name, match)
        if held is not None:
            return held
        approved = next((e.run_key for e in entries.values() if e.match == match
                         and e.state is StepState.APPROVED and e.turn == self._turn), None)
        started = self._entry(key, StepKind.TOOL, state=StepState.STARTED, tool=name,
                              params=params, match=match,
                              run_key=approved or f"{self._turn}:{key}")
        try:
            self._write(started)
        except JournalFull as e:
            return ToolOutcome.failed(f"{e}; {name} was not run")
        self.running = started.run_key
        try:
            outcome = run()
        finally:
            self.running = None
        try:
            done = self._write(_done(started, outcome))
        except JournalFull as e:
            done = self._write(_done(started, ToolOutcome.failed(
                f"{e}; {name} ran, but its result was dropped")))
        return _outcome(done.result or {})

    def step_key(self, base: str) -> str:
        """A key for a write the turn makes outside the journal (``context.memory().record``)
        that is the same in every attempt of this turn: the turn (recorded now if it was not
        yet, so another attempt adopts it) and ``base`` numbered by its occurrence."""
        self._open()
        if not self._input_written:
            self._write()
        return f"{self._turn}:{self._next(base)}"

    def answered(self, messages: list[InboxMessage]) -> None:
        """Apply the user's answers among ``messages`` (drained by this turn) to the in-doubt
        calls they answer: APPROVED or REJECTED, for this turn."""
        entries = self._open()
        answers = {m.message.inbox_item_id: m.message for m in messages
                   if isinstance(m.message, InboxAnswer)}
        decided = []
        for entry in entries.values():
            answer = answers.get(entry.item_id or "") if entry.state is StepState.IN_DOUBT \
                else None
            if answer is not None:
                yes = answer.answer is not None and answer.answer.outcome is Outcome.DECIDED \
                    and (answer.answer.value or {}).get("approved") is True
                decided.append(entry.model_copy(update={
                    "turn": self._turn,
                    "state": StepState.APPROVED if yes else StepState.REJECTED}))
        if decided:
            self._write(*decided)

    # ── inside ──────────────────────────────────────────────────────────
    def _open(self) -> dict[str, JournalEntry]:
        if self._entries is not None:
            return self._entries
        p = self._process
        entries = self._store.journal(p.tenant_id, p.id)
        self._entries = {e.key: e for e in entries}
        given = self._given()
        recorded = self._entries.get(INPUT)
        if recorded is not None and set(recorded.message_ids) <= {m.id for m in given}:
            self._turn, self._input_written = recorded.turn, True
            given = [m for m in given if m.id in set(recorded.message_ids)]
        self._handled = given
        cut_short = [e for e in entries if e.state is StepState.STARTED]
        if cut_short:
            self._write(*(self._in_doubt(e) for e in cut_short))
        return self._entries

    def _in_doubt(self, entry: JournalEntry) -> JournalEntry:
        call = f"{entry.tool}({_canonical(entry.params)})"
        if len(call) > SHOWN_ARGUMENTS:
            call = call[:SHOWN_ARGUMENTS] + "…"
        item = self._ask(NewItem(
            type=ItemType.APPROVAL, title=f"Run {entry.tool} again?"[:200],
            body=f"The server restarted while running `{call}`; it may or may not have run. "
                 "Run it again?",
            tags=(IN_DOUBT_TAG,), idempotency_key=f"journal:{entry.turn}:{entry.key}"))
        return entry.model_copy(update={"state": StepState.IN_DOUBT, "item_id": item})

    def _held(self, name: str, match: str) -> ToolOutcome | None:
        """The result of a call that must not run: one in doubt, or refused by the user."""
        assert self._entries is not None
        for entry in self._entries.values():
            if entry.match != match:
                continue
            if entry.state is StepState.IN_DOUBT:
                asked = f"the user was asked in their Inbox (item {entry.item_id}) whether to " \
                    f"run it again. Wait for their answer (an <inbox-answer> for that item); " \
                    f"if it approves, call {name} again with the same arguments" \
                    if entry.item_id else "nobody could be asked (this process has no Inbox)"
                return ToolOutcome.failed(
                    f"in doubt: the server restarted while {name} was running with these "
                    f"arguments, so it may or may not have run. It was not run again: {asked}.")
            if entry.state is StepState.REJECTED and entry.turn == self._turn:
                return ToolOutcome.failed(
                    f"not run: the server restarted while {name} was running with these "
                    f"arguments, and the user decided not to run it again (Inbox item "
                    f"{entry.item_id}).")
        return None

    def _next(self, base: str) -> str:
        """``base`` numbered by its occurrence in this turn (the same request twice is two
        steps)."""
        number = self._seen[base]
        self._seen[base] += 1
        return f"{base}#{number}"

    def _entry(self, key: str, kind: StepKind, **fields: Any) -> JournalEntry:
        p = self._process
        return JournalEntry(id=f"{p.id}:{key}", tenant_id=p.tenant_id, process_id=p.id, key=key,
                            turn=self._turn, kind=kind, **fields)

    def _write(self, *entries: JournalEntry) -> JournalEntry:
        """Record ``entries`` (after the turn's input, the first time); returns the last."""
        batch = list(entries)
        if not self._input_written:
            batch.insert(0, self._entry(INPUT, StepKind.INPUT,
                                        message_ids=[m.id for m in self._handled]))
        p = self._process
        if not self._store.record_steps(p.tenant_id, p.id, p.epoch, batch):
            raise Fenced(f"the turn journal of {p.id} moved on to a newer epoch than "
                         f"{p.epoch}; this turn must write nothing")
        self._input_written = True
        assert self._entries is not None
        self._entries.update((e.key, e) for e in batch)
        return batch[-1]


class JournaledModel:
    """The turn's model as engines see it: each completion goes through the journal."""

    def __init__(self, model: ChatModel, journal: TurnJournal) -> None:
        self.name = model.name
        self._model = model
        self._journal = journal

    def complete(self, messages: list[LlmMessage], *, tools: list[ToolSpec] | None = None,
                 on_token: TokenSink | None = None) -> LlmResponse:
        return self._journal.complete(self._model, messages, tools, on_token)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value).encode()).hexdigest()


def _request_digest(model: str, messages: list[LlmMessage], tools: list[ToolSpec] | None) -> str:
    """The hash of a completion request: the model, the tools and each message's own
    ``digest`` (32 bytes each, after the self-delimiting JSON of the rest), so a request
    differs from another as soon as any of its parts does, while a long chat's committed
    messages are not serialized again each turn."""
    # _canonical({"model": …, "tools": [[name, description, parameters], …]}), byte for
    # byte, from each spec's own canonical JSON (computed once per spec, not per turn).
    tools_json = ",".join(t.canonical_json for t in tools or ())
    request = hashlib.sha256(f'{{"model":{_canonical(model)},"tools":[{tools_json}]}}'.encode())
    request.update(b"".join([message.digest for message in messages]))
    return request.hexdigest()


def _response_json(response: LlmResponse) -> dict[str, Any]:
    return {"content": response.content, "finishReason": response.finish_reason,
            "model": response.model, "usage": dict(response.usage),
            "toolCalls": [[c.id, c.name, c.arguments] for c in response.tool_calls],
            **({} if response.tools_offered else {"toolsOffered": False})}


def _response(raw: dict[str, Any]) -> LlmResponse:
    return LlmResponse(content=raw["content"], finish_reason=raw["finishReason"],
                       model=raw["model"], usage=dict(raw["usage"]),
                       tool_calls=tuple(ToolCall(*call) for call in raw["toolCalls"]),
                       tools_offered=raw.get("toolsOffered", True))


def _done(started: JournalEntry, outcome: ToolOutcome) -> JournalEntry:
    # As JSON keeps it (key order too), so the first attempt sees what a replay would.
    result = json.loads(json.dumps({"status": outcome.status.value, "result": outcome.result,
                                    "error": outcome.error}, default=str))
    return started.model_copy(update={"state": StepState.DONE, "result": result})


def _outcome(raw: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(ToolCallStatus(raw["status"]), raw["result"], raw["error"])


def _streamed_argument(response: LlmResponse, tools: list[ToolSpec] | None) -> str:
    """The text a recorded tool-call answer streamed the first time: the ``stream``
    argument of its first such call (a ``respond`` message), for a replay to stream once."""
    streamed = {t.name: t.stream for t in tools or () if t.stream}
    for call in response.tool_calls:
        if call.name in streamed:
            try:
                value = json.loads(call.arguments).get(streamed[call.name])
            except (ValueError, AttributeError):
                continue
            if isinstance(value, str):
                return value
    return ""
