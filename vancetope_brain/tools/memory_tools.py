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
from vancetope_brain.llm import ToolSpec
from vancetope_brain.models.memory import MemoryEntry, MemoryKind, MemoryScope
from vancetope_brain.tools.dispatcher import Safety, server_tool, user_errors_as_tool_errors

_LEVELS = [s.value for s in MemoryScope]
READ_PASSAGES = 20
"""Passages one ``document_read`` returns at most."""
READ_CHARS = 12_000
"""Characters of passage text one ``document_read`` returns at most (the last passage cut)."""


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
    "document_read", "Read one of your project's documents by citation: the document (id or "
    "name) and where in it — a section (its whole heading path, as a citation gives it), a "
    "page, a line range — or nothing to read from its start. Returns the passages there in "
    f"document order, at most {READ_PASSAGES} passages and {READ_CHARS} characters; "
    "\"truncated\" says there is more.", _schema({
        "document": {"type": "string", "description": "the document's id or name"},
        "section": {"type": "string", "description": "the section's heading path"},
        "page": {"type": "integer", "minimum": 1},
        "line_start": {"type": "integer", "minimum": 1},
        "line_end": {"type": "integer", "minimum": 1,
                     "description": "the last line (line_start if left out)"}},
        ["document"])), safety=Safety.SAFE_PROBE)
@user_errors_as_tool_errors
def document_read(context: Any, document: str, section: str | None = None,
                  page: int | None = None, line_start: int | None = None,
                  line_end: int | None = None) -> dict[str, Any]:
    knowledge = context.knowledge()
    docs = knowledge.documents()
    doc = next((d for d in docs if document in (d.id, d.name)), None)
    if doc is None:
        names = ", ".join(d.name for d in docs[:20]) or "none"
        raise ToolError(f"no document {document!r} in this project (documents: {names})")
    if line_start is None and line_end is not None:
        raise ToolError("line_end needs line_start")
    lines = None if line_start is None else (line_start, line_end or line_start)
    if lines is not None and lines[1] < lines[0]:
        raise ToolError(f"line_end {lines[1]} is before line_start {lines[0]}")
    chunks = knowledge.read(doc.id, section=section, page=page, lines=lines,
                            limit=READ_PASSAGES + 1)
    if not chunks:
        raise ToolError(f"{doc.name} has no passage there (status {doc.status.value}); "
                        "give a position a citation names, or none to read from the start")
    kept, passages, room = chunks[:READ_PASSAGES], [], READ_CHARS
    for chunk in kept:
        if room <= 0:
            break
        passages.append({"text": chunk.text[:room], "section": chunk.section,
                         "page": chunk.page, "lineStart": chunk.line_start,
                         "lineEnd": chunk.line_end})
        room -= len(chunk.text)
    truncated = len(chunks) > len(kept) or room < 0
    return {"document": doc.name, "documentId": doc.id, "passages": passages,
            "truncated": truncated}
