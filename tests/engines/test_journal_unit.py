"""TurnJournal against a real store, attempt by attempt: its caps, its fence, which turn it
belongs to, and that a call in doubt is asked about once."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from vancetope_brain.engines.journal import TurnJournal, _canonical, _request_digest
from vancetope_brain.errors import Fenced, JournalFull
from vancetope_brain.llm import LlmMessage, LlmResponse, ToolSpec
from vancetope_brain.llm.testing import ScriptedModel
from vancetope_brain.models import (
    InboxMessage,
    JournalEntry,
    StepKind,
    ThinkProcess,
    UserChatInput,
    new_id,
)
from vancetope_brain.models.inbox import NewItem
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.store import Backend, JournalStore, LaneStore, SessionStore
from vancetope_brain.store.journal import MAX_ENTRIES, MAX_ENTRY_BYTES
from vancetope_brain.tools import ToolManifest, ToolOutcome

SEND = ToolManifest(ToolSpec("send", "sends"), "server")


class Attempts:
    """Attempts of one process's turn: each takes a new epoch and opens a new journal."""

    def __init__(self, store: Backend) -> None:
        self.store = store
        self.process = ThinkProcess(id=new_id("proc"), tenant_id="acme", session_id="ses_1",
                                    user_id="ada", name="p", engine="ford",
                                    engine_version="1.0.0")
        store.port(SessionStore).create_process(self.process)
        self.asked: list[NewItem] = []

    def next(self, given: list[InboxMessage] | None = None) -> TurnJournal:
        process = self.store.port(LaneStore).acquire_epoch("acme", self.process.id)
        return TurnJournal(self.store.port(JournalStore), process, lambda: list(given or []),
                           self.ask)

    def ask(self, new: NewItem) -> str:
        self.asked.append(new)
        return f"item_{len(self.asked)}"


@pytest.fixture
def attempts(acme_store: Backend) -> Attempts:
    return Attempts(acme_store)


def _message(text: str) -> InboxMessage:
    return InboxMessage(id=new_id("msg"), tenant_id="acme", target_process_id="p",
                        message=UserChatInput(from_user="ada", content=text))


class Tool:
    def __init__(self, result: Any = "ok", crash: BaseException | None = None) -> None:
        self.runs, self.result, self.crash = 0, result, crash

    def __call__(self) -> ToolOutcome:
        self.runs += 1
        if self.crash is not None:
            raise self.crash
        return ToolOutcome(ToolCallStatus.SUCCESS, self.result)


def test_a_result_too_large_to_record_becomes_the_error_every_attempt_gets(attempts):
    big = Tool("x" * MAX_ENTRY_BYTES)
    outcome = attempts.next().call(SEND, {"to": "ada"}, big)
    assert outcome.status is ToolCallStatus.ERROR and outcome.result is None
    assert outcome.error.startswith("journal_full: ") and \
        outcome.error.endswith("send ran, but its result was dropped")
    assert attempts.next().call(SEND, {"to": "ada"}, big) == outcome
    assert big.runs == 1


def test_a_full_journal_runs_no_call_and_answers_no_completion(attempts, acme_store):
    journal = attempts.next()
    assert journal.handled() == []
    filler = [JournalEntry(id=f"{attempts.process.id}:k{i}", tenant_id="acme",
                           process_id=attempts.process.id, key=f"k{i}", turn="turn_old",
                           kind=StepKind.LLM) for i in range(MAX_ENTRIES)]
    epoch = acme_store.port(SessionStore).get_process("acme", attempts.process.id).epoch
    assert acme_store.port(JournalStore).record_steps("acme", attempts.process.id, epoch, filler)
    send = Tool()
    outcome = journal.call(SEND, {"to": "ada"}, send)
    assert (outcome.status, send.runs) == (ToolCallStatus.ERROR, 0)
    assert outcome.error.startswith("journal_full: ") and outcome.error.endswith("not run")
    model = ScriptedModel([LlmResponse("hi")])
    with pytest.raises(JournalFull):
        journal.complete(model, [], None, None)


def test_a_call_cut_short_is_asked_about_once_whatever_the_attempts(attempts):
    crashed = Tool(crash=ConnectionError("killed"))
    with pytest.raises(ConnectionError):
        attempts.next().call(SEND, {"to": "ada"}, crashed)
    held = attempts.next().call(SEND, {"to": "ada"}, crashed)
    assert held.error.startswith("in doubt: ") and "item_1" in held.error
    assert attempts.next().call(SEND, {"to": "ada"}, crashed) == held
    assert crashed.runs == 1
    [asked] = attempts.asked
    assert asked.title == "Run send again?" and asked.idempotency_key.startswith("journal:")


def test_a_journal_is_replayed_only_by_an_attempt_given_its_messages(attempts):
    first, later = _message("one"), _message("two")
    send = Tool()
    journal = attempts.next([first])
    assert journal.handled() == [first]
    journal.call(SEND, {"to": "ada"}, send)
    again = attempts.next([first, later])
    assert again.handled() == [first]  # the second message waits for the next turn
    again.call(SEND, {"to": "ada"}, send)
    assert send.runs == 1
    other = attempts.next([later])  # the first message is gone: another turn
    assert other.handled() == [later]
    other.call(SEND, {"to": "ada"}, send)
    assert send.runs == 2


def test_an_attempt_whose_lane_moved_on_records_nothing(attempts):
    stale = attempts.next()
    stale.handled()
    attempts.next().handled()
    send = Tool()
    with pytest.raises(Fenced):
        stale.call(SEND, {"to": "ada"}, send)
    assert send.runs == 0


def test_a_replayed_respond_answer_streams_its_message_once(attempts):
    """A turn that died after the model answered through ``respond`` (no text content):
    the next attempt replays the recorded answer and streams its message as one token."""
    from vancetope_brain.engines.prompting import RESPOND
    from vancetope_brain.llm import LlmMessage, ToolCall

    call = ToolCall("c1", "respond", '{"message": "Hello.", "awaiting_user_input": false}')
    model = ScriptedModel([LlmResponse("", tool_calls=(call,), finish_reason="tool_calls")])
    given = [_message("hi")]
    messages = [LlmMessage("user", "hi")]
    attempts.next(given).complete(model, messages, [RESPOND], None)
    streamed: list[str] = []
    replayed = attempts.next(given).complete(model, messages, [RESPOND], streamed.append)
    assert replayed.tool_calls == (call,) and streamed == ["Hello."]


def test_a_completion_replays_only_for_the_same_request_part_for_part(attempts):
    """The key hashes each message once (``LlmMessage.digest``, kept with a long chat's
    committed lines): the same request built from new objects replays the recorded answer,
    and a request that differs in any part (a message's role, text, tool call or call id,
    their order, one more or fewer, the tools, the model) asks the model again."""
    from vancetope_brain.llm import LlmMessage, ToolCall

    def request() -> list[LlmMessage]:
        return [LlmMessage("system", "be brief"), LlmMessage("user", "hi"),
                LlmMessage("assistant", "", tool_calls=(ToolCall("c1", "send", '{"to":1}'),)),
                LlmMessage("tool", "ok", tool_call_id="c1"), LlmMessage("user", "and now?")]

    base = request()
    changed = {
        "role": base[:1] + [LlmMessage("assistant", "hi")] + base[2:],
        "text": base[:4] + [LlmMessage("user", "and now!")],
        "call": base[:2] + [LlmMessage("assistant", "", tool_calls=(
            ToolCall("c1", "send", '{"to":2}'),))] + base[3:],
        "call id": base[:3] + [LlmMessage("tool", "ok", tool_call_id="c2")] + base[4:],
        "order": [base[0], base[4], base[1], base[2], base[3]],
        "one more": base + [LlmMessage("user", "")],
        "one fewer": base[:4],
        "split text": base[:1] + [LlmMessage("user", "h"), LlmMessage("user", "i")] + base[2:],
    }
    given = [_message("hi")]
    answers = [LlmResponse(f"answer {i}") for i in range(20)]
    model = ScriptedModel(list(answers))
    assert attempts.next(given).complete(model, base, [SEND.spec], None).content == "answer 0"
    # Each in an attempt of its own (the same turn), where it would be the first such request.
    assert attempts.next(given).complete(model, request(), [SEND.spec], None).content == \
        "answer 0"
    asked = [attempts.next(given).complete(model, messages, [SEND.spec], None).content
             for messages in changed.values()]
    asked.append(attempts.next(given).complete(model, request(), [], None).content)
    other = ScriptedModel([LlmResponse("from another model")], name="another")
    asked.append(attempts.next(given).complete(other, request(), [SEND.spec], None).content)
    assert asked == [f"answer {i}" for i in range(1, len(changed) + 2)] + ["from another model"]


def test_a_request_digest_is_the_hash_of_the_whole_request_as_canonical_json():
    """The digest is built from each spec's cached JSON, yet hashes the same bytes as the
    whole request's canonical JSON: a turn journaled by a worker that serialised the request
    whole still replays after an upgrade."""
    tools = [ToolSpec("zeta", "déjà vu", {"type": "object", "properties": {"b": {}, "a": {}}}),
             ToolSpec("alpha", "plain")]
    messages = [LlmMessage(role="user", content="hello")]
    whole = hashlib.sha256(_canonical({"model": "m-1", "tools": [
        [t.name, t.description, t.parameters] for t in tools]}).encode())
    whole.update(b"".join(m.digest for m in messages))
    assert _request_digest("m-1", messages, tools) == whole.hexdigest()
    empty = hashlib.sha256(_canonical({"model": "m-1", "tools": []}).encode())
    assert _request_digest("m-1", [], None) == empty.hexdigest()
