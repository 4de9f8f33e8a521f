"""``context.memory()`` and the memory tools: the scope cascade innermost first, isolation
between projects and tenants, a record that a re-run turn does not repeat, the caps,
``document_read`` by citation; and a marvin run whose report becomes project memory that a
new session of the project finds through ``memory_query`` and in Arthur's memory summary
(and a session of another project or tenant does not)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.engines.test_marvin import (
    Flow,
    aggregate_from,
    call,
    chat,
    marvin_of,
    plan,
    respond,
    run,
    worker_json,
)
from tests.helpers import wait_for
from tests.knowledge.test_retrieval import add
from vancetope_brain.engines.context import ThinkEngineContext
from vancetope_brain.engines.memory_api import MemoryAccess
from vancetope_brain.errors import Conflict, InvalidInput, MemoryFull, NotFound
from vancetope_brain.identity import Principal
from vancetope_brain.knowledge.retrieval import Retriever
from vancetope_brain.llm.testing import FunctionModel, ScriptedModel
from vancetope_brain.models import (
    ChatRole,
    InboxMessage,
    ProcessStatus,
    StepKind,
    ThinkProcess,
    UserChatInput,
    new_id,
)
from vancetope_brain.models.identity import Project
from vancetope_brain.models.memory import MAX_TAGS, MAX_TEXT_CHARS, MemoryKind, MemoryScope
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.settings import SettingsApi
from vancetope_brain.store import (
    Backend,
    DocumentStore,
    DocumentVectors,
    IdentityStore,
    JournalStore,
    LaneStore,
    MemoryStore,
    SessionStore,
)
from vancetope_brain.tools.memory_tools import READ_CHARS, READ_PASSAGES

TOOLS = frozenset({"memory_query", "memory_read", "memory_record", "document_read"})


def process(store: Backend, *, tenant: str = "acme", project: str = "p1",
            session: str = "ses_1") -> ThinkProcess:
    p = ThinkProcess(id=new_id("proc"), tenant_id=tenant, session_id=session, user_id="ada",
                     project_id=project, name="p", engine="ford", engine_version="1.0.0")
    store.port(SessionStore).create_process(p)
    return p


def context(store: Backend, p: ThinkProcess, *, given: list[InboxMessage] | None = None,
            memory: Any = True, knowledge: Retriever | None = None) -> ThinkEngineContext:
    """A context of a new attempt (a new epoch) of ``p``'s turn, given ``given``."""
    attempt = store.port(LaneStore).acquire_epoch(p.tenant_id, p.id)
    access = MemoryAccess(store.port(MemoryStore), store.port(IdentityStore)) \
        if memory is True else memory
    return ThinkEngineContext(
        process=attempt, lanes=store.port(LaneStore), processes=store.port(SessionStore),
        events=None, journal=store.port(JournalStore),  # type: ignore[arg-type]
        model=ScriptedModel([]), lease_lost=threading.Event(),
        settings=SettingsApi.defaults(), tool_pool=TOOLS, pending=given or [], memory=access,
        knowledge=knowledge)


def message(text: str = "go") -> InboxMessage:
    return InboxMessage(id=new_id("msg"), tenant_id="acme", target_process_id="p",
                        message=UserChatInput(from_user="ada", content=text))


@pytest.fixture
def store(acme_store: Backend) -> Backend:
    ids = acme_store.port(IdentityStore)
    for pid in ("g1", "g2"):
        ids.create_project(Project(id=pid, tenant_id="acme", name=pid, group_id="grp_a"))
    return acme_store


def test_the_cascade_is_read_innermost_first_and_one_level_alone(store):
    me = process(store, project="g1")
    ctx = context(store, me)
    for level in ("project", "tenant", "process", "group", "session"):  # order is not age
        ctx.memory().record(f"widget pricing at {level}", kind="note", scope=level)
    hits = ctx.memory().query("widget pricing", top_k=10)
    assert [h.entry.scope for h in hits] == list(MemoryScope)
    assert [h.entry.scope for h in ctx.memory().query("widget", scope="project")] == [
        MemoryScope.PROJECT]
    assert all(0 < h.score <= 1 for h in hits)
    assert ctx.memory().query("widget", top_k=2, min_score=0) == hits[:2]
    # Another process of the same group (another project and session) sees the group and
    # the tenant, nothing of the first process's own, session or project.
    sibling = context(store, process(store, project="g2", session="ses_2"))
    assert [h.entry.scope for h in sibling.memory().query("widget", top_k=10)] == [
        MemoryScope.GROUP, MemoryScope.TENANT]
    with pytest.raises(InvalidInput, match="unknown memory scope"):
        ctx.memory().query("widget", scope="galaxy")


def test_one_memory_view_looks_the_projects_group_up_once(store, monkeypatch):
    ctx = context(store, process(store, project="g1"))
    ids = store.port(IdentityStore)
    looked: list[str] = []
    real = ids.get_project
    monkeypatch.setattr(ids, "get_project", lambda *a: looked.append(a[1]) or real(*a))
    memory = ctx.memory()
    memory.query("widget")
    memory.recent()
    assert [r.level for r in memory.cascade()][3] is MemoryScope.GROUP
    assert looked == ["g1"]
    ctx.memory().cascade()  # another view (a later call) looks again
    assert looked == ["g1", "g1"]


def test_another_projects_or_tenants_entries_are_never_found_nor_read(store):
    ctx = context(store, process(store, project="g1"))
    entry = ctx.memory().record("the secret launch date", kind="fact")
    other = context(store, process(store, project="p1", session="ses_2"))
    assert other.memory().query("secret launch date") == []
    with pytest.raises(NotFound):
        other.memory().read(entry)
    stranger = context(store, process(store, tenant="zeta", project="g1", session="ses_3"))
    assert stranger.memory().query("secret launch date") == []
    with pytest.raises(NotFound):
        stranger.memory().read(entry)
    assert ctx.memory().read(entry).text == "the secret launch date"
    # The project has no group: there is no group level to record at, nor to read.
    with pytest.raises(InvalidInput, match="no group"):
        other.memory().record("x", kind="note", scope="group")
    assert [r.level for r in other.memory().cascade()] == [
        MemoryScope.PROCESS, MemoryScope.SESSION, MemoryScope.PROJECT, MemoryScope.TENANT]


def test_a_rerun_turn_records_nothing_twice(store):
    me, given = process(store), [message()]
    first = context(store, me, given=given)
    ids = [first.memory().record("noted", kind="note"),
           first.memory().record("noted", kind="note"),  # twice in a turn: two entries
           first.memory().record_turn("this turn did x")]
    assert len(set(ids)) == 3
    # The worker died before the commit: another attempt of the same turn does it again.
    again = context(store, me, given=[*given, message("later")])
    assert [again.memory().record("noted", kind="note"),
            again.memory().record("noted", kind="note"),
            again.memory().record_turn("this turn did x")] == ids
    assert again.memory().read(ids[2]).kind is MemoryKind.TURN
    assert again.memory().read(ids[2]).scope is MemoryScope.PROCESS
    listed = store.port(MemoryStore).list_memory(
        "acme", again.memory().cascade(), limit=50)
    assert len(listed) == 3
    # An explicit key is the same entry in any turn.
    keyed = again.memory().record("keyed", kind="fact", key="k1")
    assert context(store, me, given=[message("next turn")]).memory().record(
        "keyed", kind="fact", key="k1") == keyed


def test_bad_input_is_refused_and_nothing_is_stored(store):
    ctx = context(store, process(store))
    memory = ctx.memory()
    cases = [
        (lambda: memory.record("x" * (MAX_TEXT_CHARS + 1), kind="note"), "at most 8000"),
        (lambda: memory.record("x", kind="note", tags=[f"t{i}" for i in range(MAX_TAGS + 1)]),
         "at most 16 tags"),
        (lambda: memory.record("x", kind="note", tags=["t" * 65]), "tags"),
        (lambda: memory.record("   ", kind="note"), "needs text"),
        (lambda: memory.record("x", kind="gossip"), "unknown memory kind"),
        (lambda: memory.record("x", kind="note", source="s" * 513), "source"),
    ]
    for attempt, says in cases:
        with pytest.raises(InvalidInput, match=says):
            attempt()
    assert store.port(MemoryStore).list_memory("acme", memory.cascade()) == []


class SmallStore:
    """The store with a cap of two entries per scope."""

    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner

    def record(self, entry, *, limit=0):
        return self._inner.record(entry, limit=2)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_full_scope_is_memory_full_and_no_memory_finds_nothing(store):
    small = MemoryAccess(SmallStore(store.port(MemoryStore)),  # type: ignore[arg-type]
                         store.port(IdentityStore))
    ctx = context(store, process(store), memory=small)
    ctx.memory().record("one", kind="note")
    ctx.memory().record("two", kind="note")
    with pytest.raises(MemoryFull):
        ctx.memory().record("three", kind="note")
    assert ctx.memory().record("one process", kind="note", scope="process")
    bare = context(store, process(store), memory=None)
    assert bare.memory().query("one") == []
    with pytest.raises(Conflict):
        bare.memory().record("x", kind="note")


def test_the_tools_record_query_and_read_within_the_cascade(store):
    ctx = context(store, process(store, project="g1"), given=[message()])
    tools = ctx.tools()
    recorded = tools.invoke("memory_record", {"text": "Decided: ship in May", "kind": "decision",
                                              "tags": ["launch"]})
    assert recorded.status is ToolCallStatus.SUCCESS
    found = tools.invoke("memory_query", {"query": "ship may"}).result
    assert [(h["id"], h["kind"], h["scope"]) for h in found] == [
        (recorded.result["id"], "decision", "project")]
    assert tools.invoke("memory_read", {"id": recorded.result["id"]}).result["tags"] == [
        "launch"]
    refused = tools.invoke("memory_record", {"text": "x" * (MAX_TEXT_CHARS + 1)})
    assert refused.status is ToolCallStatus.ERROR and "at most" in (refused.error or "")
    missing = tools.invoke("memory_read", {"id": "mem_nope"})
    assert missing.status is ToolCallStatus.ERROR
    assert tools.invoke("document_read", {"document": "nope.md"}).status is \
        ToolCallStatus.ERROR  # no knowledge here: no documents


def test_document_read_reads_the_passages_a_citation_names(store):
    add(store, "acme", "p1", "handbook.txt", "Expenses are reimbursed monthly.",
        "Travel expenses need approval.", "The kitchen has coffee.", section="Money")
    add(store, "acme", "p2", "other.txt", "Expenses of another project.", section="Money")
    ctx = context(store, process(store), knowledge=Retriever(store.port(DocumentStore),
                                                                store.port(DocumentVectors)))
    [hit] = ctx.knowledge().query("kitchen coffee", top_k=1, min_score=0.0)
    cited = hit.citation  # what a <rag-context> passage or a reply's source names
    read = ctx.tools().invoke("document_read", {
        "document": cited.document_id, "section": cited.section,
        "line_start": cited.line_start, "line_end": cited.line_end}).result
    assert read["passages"] == [{"text": "The kitchen has coffee.", "section": "Money",
                                 "page": None, "lineStart": 7, "lineEnd": 8}]
    assert (read["document"], read["truncated"]) == ("handbook.txt", False)
    # A line inside a passage, a range over two, the section alone, nothing: from the start.
    assert _read(ctx, document="handbook.txt", line_start=5) == [
        "Travel expenses need approval."]
    assert _read(ctx, document="handbook.txt", line_start=2, line_end=4) == [
        "Expenses are reimbursed monthly.", "Travel expenses need approval."]
    assert len(_read(ctx, document="handbook.txt", section="Money")) == 3
    assert _read(ctx, document="handbook.txt")[0] == "Expenses are reimbursed monthly."
    for args, error in [({"document": "other.txt"}, "no document"),  # another project's
                        ({"document": "handbook.txt", "section": "Mon"}, "no passage there"),
                        ({"document": "handbook.txt", "page": 2}, "no passage there"),
                        ({"document": "handbook.txt", "line_end": 3}, "needs line_start"),
                        ({"document": "handbook.txt", "line_start": 5, "line_end": 4},
                         "before line_start")]:
        refused = ctx.tools().invoke("document_read", args)
        assert refused.status is ToolCallStatus.ERROR and error in (refused.error or ""), args


def test_document_read_is_capped_in_passages_and_characters(store):
    add(store, "acme", "p1", "long.txt", *[f"passage {n}" for n in range(READ_PASSAGES + 3)])
    add(store, "acme", "p1", "huge.txt", "x" * (READ_CHARS - 10), "y" * 100, "z")
    ctx = context(store, process(store), knowledge=Retriever(store.port(DocumentStore),
                                                                store.port(DocumentVectors)))
    many = ctx.tools().invoke("document_read", {"document": "long.txt"}).result
    assert [p["text"] for p in many["passages"]] == [f"passage {n}" for n in range(READ_PASSAGES)]
    assert many["truncated"] is True
    huge = ctx.tools().invoke("document_read", {"document": "huge.txt"}).result
    assert [p["text"] for p in huge["passages"]] == ["x" * (READ_CHARS - 10), "y" * 10]
    assert huge["truncated"] is True
    assert ctx.tools().invoke("document_read", {"document": "huge.txt", "line_start": 7}
                              ).result == {**huge, "passages": [
                                  {"text": "z", "section": "", "page": None, "lineStart": 7,
                                   "lineEnd": 8}], "truncated": False}


def _read(ctx: ThinkEngineContext, **args: Any) -> list[str]:
    result = ctx.tools().invoke("document_read", args)
    assert result.status is ToolCallStatus.SUCCESS, result.error
    return [p["text"] for p in result.result["passages"]]


def test_memory_record_is_called_again_by_a_rerun_turn_and_records_once(store):
    me, given = process(store), [message()]
    first = context(store, me, given=given).tools().invoke(
        "memory_record", {"text": "the budget is 10k", "kind": "fact"})
    assert first.status is ToolCallStatus.SUCCESS
    again = context(store, me, given=given)  # the worker died before the commit
    assert again.tools().invoke("memory_record", {"text": "the budget is 10k",
                                                  "kind": "fact"}).result == first.result
    assert len(store.port(MemoryStore).list_memory("acme", again.memory().cascade())) == 1
    # Not journaled: the journal holds the turn's input only, no call to ask the user about.
    assert [e.kind for e in store.port(JournalStore).journal("acme", me.id)] == [StepKind.INPUT]


class Recall:
    """The model of a later session: Arthur answers "noted" (each system prompt kept); an
    analyze worker calls ``memory_query`` for ``query`` once, keeps what it found and
    reports it."""

    def __init__(self, query: str) -> None:
        self.query, self.arthur, self.found = query, [], []
        self._lock = threading.Lock()

    def __call__(self, messages, tools):
        if "process_create" in {t.name for t in tools}:
            with self._lock:
                self.arthur.append(messages[0].content)
            return respond("noted")
        if messages[-1].role != "tool":
            return call("memory_query", query=self.query)
        with self._lock:
            self.found.append(json.loads(messages[-1].content)["result"])
        return respond("found")


def recall(emb, who: Principal, project: str, question: str) -> Recall:
    """A new session of ``who`` in ``project``: Arthur is asked ``question`` and an analyze
    worker of the session looks the widget market up in memory; what both saw."""
    model = Recall("widget market")
    emb.model = FunctionModel(model)
    session = emb.brain.sessions.create(who, project_id=project)
    emb.brain.sessions.steer(who, session.chat_process_id, question)
    worker = emb.brain.sessions.create_process(who, session.id, recipe="analyze",
                                               goal="Look up the widget market research")
    processes = emb.brain.store.port(SessionStore)
    wait_for(lambda: model.arthur and model.found and processes.get_process(
        who.tenant_id, worker.id).status is ProcessStatus.CLOSED, timeout=30,
        what="Arthur's turn and the worker's memory_query")
    return model


def test_a_marvin_report_is_project_memory_for_later_sessions_of_its_project_only(embedded):
    """Acceptance (issue 29): a marvin run records its report as project memory; a new
    session in the same project finds it through ``memory_query`` and in Arthur's memory
    summary; a session in another project or tenant does not."""
    session = run(embedded, Flow(lambda kind, m: aggregate_from(m) if kind == "aggregate"
                                 else plan("alpha"), lambda step, m: worker_json("ok")))
    marvin = marvin_of(embedded, session)
    report_id = marvin.engine_state["reportId"]
    assert report_id and report_id.startswith("mem_")
    event = next(line.content for line in chat(embedded, session.chat_process_id)
                 if line.role is ChatRole.EVENT and 'type="done"' in line.content
                 and marvin.id in line.content)
    assert json.loads(event.split("<payload>")[1].split("</payload>")[0])[
        "report_id"] == report_id
    store = embedded.brain.store
    entry = store.port(MemoryStore).get_memory("acme", report_id)
    assert (entry.kind, entry.scope, entry.scope_id, entry.source) == (
        MemoryKind.REPORT, MemoryScope.PROJECT, marvin.project_id, "marvin:aggregate")
    assert entry.text == "Research the widget market\n\nSynthesis of n2."

    # A new session of the same project: memory_query finds the report, and Arthur's first
    # turn has it in the project memory summary.
    later = recall(embedded, embedded.who, marvin.project_id, "What did the research find?")
    assert [(h["id"], h["kind"], h["scope"]) for h in later.found[0]] == [
        (report_id, "report", "project")]
    summary = later.arthur[0]
    summary = summary[summary.index("<project-memory>"):summary.index("</project-memory>")]
    assert f'<entry id="{report_id}" kind="report" source="marvin:aggregate"' in summary
    assert "Synthesis of n2." in summary

    # Another project of the tenant, and another tenant's project of the same name: nothing.
    embedded.brain.identity.create_project("acme", "Elsewhere", project_id="elsewhere")
    embedded.brain.identity.create_tenant("zeta", "zeta")
    embedded.brain.identity.create_user("zeta", "zed", "zed")
    for who, project in ((embedded.who, "elsewhere"), (Principal("zeta", "zed"), "default")):
        assert marvin.project_id == "default"
        other = recall(embedded, who, project, "What did the research find?")
        assert other.found == [[]], (who, project)
        assert "<project-memory>" not in other.arthur[0] and report_id not in other.arthur[0]
        assert "Synthesis of n2." not in other.arthur[0]
