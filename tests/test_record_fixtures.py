"""Checked-in v1 records (tests/fixtures/records/) must keep loading.

Every persisted class with a schema version has one: each ``Document`` (loaded
with ``Document.load``) and the ``AppliedRecipe`` snapshot a process keeps.
When a schema changes, add the new version's fixtures next to the old ones and
keep every old file loading through ``Document.upgrade``.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.helpers import import_shipped_modules, shipped_subclasses
from vancetope_brain.errors import StoreError
from vancetope_brain.models import (
    ChatMessage,
    ChatRole,
    Document,
    ExternalCommand,
    InboxAnswer,
    ProcessEvent,
    ProcessStatus,
    StepKind,
    StepState,
    ThinkProcess,
    ToolResult,
    User,
    UserChatInput,
)
from vancetope_brain.models.inbox import DeliveryStatus, HistoryAction, Outcome
from vancetope_brain.models.memory import MemoryKind, MemoryScope
from vancetope_brain.models.recipe import (
    Definition,  # the abstract base of catalogued kinds
    RecipeCategory,
    RecipeSource,
)
from vancetope_brain.models.settings import SettingLevel

RECORDS = Path(__file__).parent / "fixtures" / "records"
FILES = sorted(RECORDS.glob("*.json"))


@functools.cache
def persisted() -> dict[str, type[BaseModel]]:
    """Every class of the shipped packages with a ``schema_version`` field (``Document``'s
    subclasses among them), by fixture name: ``ThinkProcess`` → ``think_process``."""
    import_shipped_modules()
    return {re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower(): cls
            for cls in shipped_subclasses(BaseModel)
            if "schema_version" in cls.model_fields and cls not in (Document, Definition)}


def _raw(name: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((RECORDS / name).read_text())
    return raw


def _revive(cls: type[BaseModel], raw: dict[str, Any]) -> Any:
    # A process keeps its AppliedRecipe as a plain dict, validated when a turn reads it.
    return cls.load(raw) if issubclass(cls, Document) else cls.model_validate(raw)


def _load(name: str) -> Any:
    return _revive(persisted()[name.split(".")[0]], _raw(name))


def test_every_persisted_class_has_a_v1_fixture() -> None:
    assert {f.name.split(".")[0] for f in FILES if f.name.endswith(".v1.json")} == \
        set(persisted())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixture_loads_and_round_trips(path: Path) -> None:
    record = _load(path.name)
    assert record.schema_version == 1
    assert all(value.utcoffset() == timedelta(0) for value in vars(record).values()
               if isinstance(value, datetime))
    assert _revive(type(record), record.dump()) == record


def test_think_process_fields() -> None:
    process = _load("think_process.v1.json")
    assert (process.status, process.epoch, process.next_seq) == (ProcessStatus.IDLE, 2, 3)
    assert process.engine_params == {"model": "default", "maxSteps": 8}
    assert process.created_at == datetime(2025, 3, 14, 9, 26, 53, 589000, tzinfo=UTC)
    # v1 records predate the lifecycle-call fields, which default to "none requested".
    assert "pendingControl" not in _raw("think_process.v1.json")
    assert (process.pending_control, process.control_requested_at) == (None, None)


def test_session_and_identity_fields() -> None:
    assert _load("session.v1.json").chat_process_id == "proc_4f5a6b7c8d9e0f1a"
    assert _load("tenant.v1.json").name == "Acme Research"
    assert _load("user.v1.json").tenant_id == "ten_0a1b2c3d4e5f6a7b"
    token = _load("api_token.v1.json")
    assert (token.revoked, len(token.token_hash)) == (False, 64)


@pytest.mark.parametrize(("name", "variant"), [
    ("user_chat_input", UserChatInput), ("process_event", ProcessEvent),
    ("tool_result", ToolResult), ("external_command", ExternalCommand),
    ("inbox_answer", InboxAnswer),
])
def test_inbox_message_variants(name: str, variant: type) -> None:
    message = _load(f"inbox_message.{name}.v1.json")
    assert isinstance(message.message, variant)
    assert message.target_process_id == "proc_4f5a6b7c8d9e0f1a"


def test_drained_inbox_message_fields() -> None:
    message = _load("inbox_message.user_chat_input.v1.json")
    assert (message.seq, message.idempotency_key, message.drained_epoch) == (1, "client-7f1e", 2)
    assert message.message.content == "Summarize the papers, please."


def test_chat_and_turn_fields() -> None:
    line = _load("chat_message.v1.json")
    assert (line.seq, line.role, line.source_message_id) == (
        4, ChatRole.ASSISTANT, "msg_6b7c8d9e0f1a2b3c")
    assert line.sources == []  # a line stored before sources existed has none
    cited = _load("chat_message.sources.v1.json")
    assert [(s.document_name, s.section, s.line_start, s.line_end) for s in cited.sources] == [
        ("refunds.md", "Policies › Refunds", 13, 14)]
    record = _load("turn_record.v1.json")
    assert (record.epoch, record.status_after) == (2, ProcessStatus.IDLE)
    assert record.drained_ids == ["msg_6b7c8d9e0f1a2b3c"]
    event = _load("outbox_event.v1.json")
    assert (event.id, event.epoch, event.index, event.type) == (
        "chat:chat_1a2b3c4d5e6f7a8b", 3, 0, "chat-message")
    assert ChatMessage.load(event.data).content == "Here is the summary."


def test_journal_entry_fields() -> None:
    entry = _load("journal_entry.v1.json")
    assert (entry.kind, entry.state, entry.tool, entry.item_id) == (
        StepKind.TOOL, StepState.IN_DOUBT, "deploy", "item_6b7c8d9e0f1a2b3c")
    assert entry.params == {"build": 42, "target": "production"}


def test_inbox_item_and_delivery_fields() -> None:
    item = _load("inbox_item.v1.json")
    assert (item.revision, item.answer.outcome, item.answer.value) == (
        2, Outcome.DECIDED, {"chosen": "eu"})
    assert [h.action for h in item.history] == [
        HistoryAction.CREATE, HistoryAction.DELEGATE, HistoryAction.ANSWER]
    delivery = _load("notification_delivery.v1.json")
    assert (delivery.status, delivery.reason) == (DeliveryStatus.SKIPPED, "quiet hours")
    assert delivery.project_id is None  # v1 records predate it: user → tenant settings


def test_project_setting_and_recipe_fields() -> None:
    assert _load("project.v1.json").group_id == "grp_6b7c8d9e0f1a2b3c"
    setting = _load("stored_setting.v1.json")
    assert (setting.level, setting.scope_id, setting.key, setting.value) == (
        SettingLevel.PROJECT, "prj_5a6b7c8d9e0f1a2b", "session.defaultChatEngine", "ford")
    recipe = _load("recipe.v1.json")
    assert (recipe.category, recipe.allowed_tools_add, recipe.params["maxFindings"]) == (
        RecipeCategory.WORKER, ["scholar.*"], 5)
    applied = _load("applied_recipe.v1.json")
    assert (applied.source, applied.params["maxFindings"], applied.roles) == (
        RecipeSource.PROJECT, 3, ["tool-prober"])


def test_tool_health_fields() -> None:
    health = _load("tool_health.v1.json")
    assert (health.server, health.state, health.failures) == ("echo", "DOWN", 1)
    assert health.revision == 0  # v1 records predate it: the first compare-and-set expects 0


def test_memory_entry_fields() -> None:
    memory = _load("memory_entry.v1.json")
    assert (memory.scope, memory.scope_id, memory.kind, memory.source) == (
        MemoryScope.PROJECT, "proj_0123456789abcdef", MemoryKind.REPORT, "marvin:aggregate")
    assert memory.tags == ["paper-diff", "baseline"]


def test_stored_id_field_is_ignored() -> None:
    raw = _raw("user.v1.json") | {"_id": "usr_1c2d3e4f5a6b7c8d"}
    assert User.load(raw).id == "usr_1c2d3e4f5a6b7c8d"


def test_a_newer_schema_version_is_refused() -> None:
    raw = _raw("think_process.v1.json") | {"schemaVersion": 2}
    with pytest.raises(StoreError, match="schemaVersion 2"):
        ThinkProcess.load(raw)


@pytest.mark.parametrize("name", [f.name for f in FILES if f.name.startswith(
    ("vogon_state.", "zaphod_state."))])
def test_engine_states_of_the_untyped_code_keep_their_exact_shape(name: str) -> None:
    """These fixtures are ``engineState`` as vogon and zaphod wrote it before it was typed
    (no ``schemaVersion``): a dump gives every key back, absent keys absent, nulls null."""
    raw = _raw(name)
    assert "schemaVersion" not in raw
    assert _load(name).dump() == {"schemaVersion": 1, **raw}


def test_vogon_state_fields() -> None:
    waiting = _load("vogon_state.waiting.v1.json").strategy_state
    assert (waiting.step, waiting.phase, waiting.item.title, waiting.item.answered) == (
        "ask", 1, "Approve the draft for the launch?", False)
    assert sorted(waiting.results["weigh"].branches) == ["con", "pro"]
    assert not waiting.results["draft"].asked
    done = _load("vogon_state.v1.json").strategy_state
    assert (done.outcome, done.step, [h.phase for h in done.history]) == (
        "completed", "end", ["weigh", "draft", "finish"])
    assert done.results["draft"].asked and done.results["draft"].answer["value"] == {
        "approved": True}
    failed = _load("vogon_state.failed.v1.json").strategy_state
    assert (failed.strategy, failed.outcome) == (None, "failed")
    assert failed.report.startswith("Cannot run the strategy: no strategy named 'drat-review'")


def test_zaphod_state_fields() -> None:
    council = _load("zaphod_state.v1.json")
    assert (council.convened, council.phase, council.round, council.rounds) == (
        True, "done", 2, 2)
    assert [r.status for r in council.runs if r.round == 2] == ["done", "failed", "done"]
    assert council.synthesis.missing_heads == ["skeptic"]
    refused = _load("zaphod_state.failed.v1.json")
    assert (refused.convened, refused.phase) == (False, "failed")
    assert refused.error == "invalid params: heads.0.persona: Field required"
