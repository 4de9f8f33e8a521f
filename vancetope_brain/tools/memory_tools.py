"""Memory tools of workers (issue 29; think-engines: tools are per recipe): ``memory_query``,
``memory_read``, ``memory_record`` and ``document_read``, each through the calling turn's
``context.memory()`` / ``context.knowledge()``, so a tool sees exactly the process's scope
chain and project. No engine has them by default; the worker recipes that need them add them
(``allowedToolsAdd``), Arthur's default pool does not (arthur-engine §3.3).

Idempotency (``ToolManifest.idempotent``): the reading tools are probes. ``memory_record``
writes at once, yet is registered idempotent, so the journal does not hold it STARTED (and
ask the user after a crash) but simply calls it again: every record carries an idempotency
key — the model's ``key``, or else one ``context.memory().record`` derives from the turn
journal (the turn another attempt adopts, the entry's content and its occurrence in the
turn). The attempt after a crash replays the turn's recorded completions, so it makes the
same calls in the same order, derives the same keys and gets the first entries back.
"""

from __future__ import annotations

from typing import Any

from vancetope_brain.errors import ToolError
from vancetope_brain.knowledge.retrieval import MAX_TOP_K
from vancetope_brain.llm import ToolSpec
from vancetope_brain.models.knowledge import SearchHit
from vancetope_brain.models.memory import MemoryEntry, MemoryKind, MemoryScope
from vancetope_brain.tools.dispatcher import Safety, server_tool, user_errors_as_tool_errors

_LEVELS = [s.value for s in MemoryScope]


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def _entry(entry: MemoryEntry) -> dict[str, Any]:
    return {"id": entry.id, "kind": entry.kind.value, "scope": entry.scope.value,
            "text": entry.text, "tags": entry.tags, "source": entry.source,
            "createdAt": entry.created_at.isoformat()}


@server_tool(ToolSpec(
    "memory_query", "Search the memory entries you can see (yours, your session's, your "
    "project's, its group's and your tenant's: innermost first) for a text.", _schema({
        "query": {"type": "string", "description": "words to look for"},
        "scope": {"type": "string", "enum": _LEVELS, "description": "one level only"},
        "top_k": {"type": "integer", "minimum": 1, "maximum": 20},
        "min_score": {"type": "number", "minimum": 0, "maximum": 1}}, ["query"])),
    safety=Safety.SAFE_PROBE)
@user_errors_as_tool_errors
def memory_query(context: Any, query: str, scope: str | None = None, top_k: int = 5,
                 min_score: float = 0.0) -> list[dict[str, Any]]:
    hits = context.memory().query(query, scope=scope, top_k=min(top_k, 20),
                                  min_score=min_score)
    return [{**_entry(hit.entry), "score": round(hit.score, 3)} for hit in hits]


@server_tool(ToolSpec("memory_read", "Read one memory entry by its id (from memory_query or "
                      "a report's report_id).",
                      _schema({"id": {"type": "string"}}, ["id"])), safety=Safety.SAFE_PROBE)
@user_errors_as_tool_errors
def memory_read(context: Any, id: str) -> dict[str, Any]:  # noqa: A002
    return _entry(context.memory().read(id))


@server_tool(ToolSpec(
    "memory_record", "Record a memory entry: a note, fact or decision worth keeping. At "
    "project scope (the default) later sessions of the project find it; at process scope "
    "only you do. Give a key to make a repeated record return the first one.", _schema({
        "text": {"type": "string"},
        "kind": {"type": "string", "enum": [MemoryKind.NOTE, MemoryKind.FACT,
                                            MemoryKind.DECISION, MemoryKind.SUMMARY]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "scope": {"type": "string", "enum": _LEVELS},
        "source": {"type": "string", "description": "what the text comes from"},
        "key": {"type": "string", "description": "the same key again records nothing new"}},
        ["text"])), idempotent=True)
@user_errors_as_tool_errors
def memory_record(context: Any, text: str, kind: str = "note", tags: list[str] | None = None,
                  scope: str = "project", source: str | None = None,
                  key: str | None = None) -> dict[str, Any]:
    entry_id = context.memory().record(text, kind=kind, tags=tags or (), scope=scope,
                                       source=source, key=key)
    return {"id": entry_id}


@server_tool(ToolSpec(
    "document_read", "Read passages of one of your project's documents by citation: the "
    "document (id or name) and a section, a page or a line; give query words to find the "
    "passages (they are found by search: passages sharing no word with the query, the "
    "section or the document's name are not returned).", _schema({
        "document": {"type": "string", "description": "the document's id or name"},
        "section": {"type": "string", "description": "a section heading (part of it will do)"},
        "page": {"type": "integer", "minimum": 1},
        "line": {"type": "integer", "minimum": 1, "description": "a line within the passage"},
        "query": {"type": "string"}}, ["document"])), safety=Safety.SAFE_PROBE)
@user_errors_as_tool_errors
def document_read(context: Any, document: str, section: str | None = None,
                  page: int | None = None, line: int | None = None,
                  query: str | None = None) -> dict[str, Any]:
    knowledge = context.knowledge()
    docs = knowledge.documents()
    doc = next((d for d in docs if document in (d.id, d.name)), None)
    if doc is None:
        names = ", ".join(d.name for d in docs[:20]) or "none"
        raise ToolError(f"no document {document!r} in this project (documents: {names})")
    text = " ".join(part for part in (query, section, doc.name) if part)
    hits: list[SearchHit] = [h for h in knowledge.query(text, top_k=MAX_TOP_K, min_score=0.0)
                             if h.chunk.document_id == doc.id and _cited(h, section, page, line)]
    hits.sort(key=lambda h: h.chunk.ordinal)
    return {"document": doc.name, "documentId": doc.id, "passages": [
        {"text": h.chunk.text, **h.citation.model_dump(mode="json", by_alias=True,
                                                       exclude={"document_id",
                                                                "document_name"})}
        for h in hits]}


def _cited(hit: SearchHit, section: str | None, page: int | None, line: int | None) -> bool:
    chunk = hit.chunk
    if section and section.casefold() not in chunk.section.casefold():
        return False
    if page is not None and chunk.page != page:
        return False
    return line is None or (chunk.line_start is not None and chunk.line_end is not None
                            and chunk.line_start <= line <= chunk.line_end)
