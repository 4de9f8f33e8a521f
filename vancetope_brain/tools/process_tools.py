"""Server tools of the engines: Arthur's (arthur-engine §3.3: spawn and steer worker
processes, read the recipe catalogue and the recipe's manuals) and ``inbox_post``
(user-interaction.txt §10.1), which may carry an output's small file inline. Each works
through the calling turn's context.

Idempotency (``ToolManifest.idempotent``): the probes are; ``process_create``,
``process_steer`` and ``process_stop`` are too, because their effect is part of the turn's
commit — an attempt that died started, sent and stopped nothing, so the next attempt must
call them again (a replayed result would name a child that was never stored). ``inbox_post``
is not: it writes the item at once, with the model's ``idempotency_key`` or else the
journaled call's key (``context.running_call_key``), so the run of a call the user approves
after a crash in it returns the item that run wrote. Its inline file is stored when the call is prepared
(``_store_inline``), before the call is announced, journaled or written to the chat, which
carry a short reference instead of the bytes; the file's id derives from the process and the
file, so a retried turn that makes the call again stores nothing new.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from vancetope_brain.errors import ToolError, UserError
from vancetope_brain.llm import ToolSpec
from vancetope_brain.models import ProcessStatus, ThinkProcess
from vancetope_brain.models.inbox import Criticality, ItemType, NewItem
from vancetope_brain.tools.dispatcher import Safety, server_tool, user_errors_as_tool_errors


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


_ID = {"type": "string", "description": "a process id from process_list or process_create"}


def _summary(process: ThinkProcess) -> dict[str, Any]:
    return {"processId": process.id, "name": process.name, "status": process.status.value,
            "engine": process.engine, "recipe": process.recipe_name, "goal": process.goal,
            "parentProcessId": process.parent_process_id,
            "closeReason": process.close_reason.value if process.close_reason else None,
            "contextDrift": process.context_drift}


@server_tool(ToolSpec("process_create", "Start a worker process in this session. Prefer a "
                      "recipe from recipe_list; the recipe decides the engine.", _schema({
                          "recipe": {"type": "string"},
                          "engine": {"type": "string", "description": "only without a recipe"},
                          "name": {"type": "string", "description": "short, unique, kebab-case"},
                          "goal": {"type": "string", "description": "what the worker must do"},
                          "params": {"type": "object"}}, ["goal"])), idempotent=True)
@user_errors_as_tool_errors
def process_create(context: Any, goal: str, recipe: str | None = None,
                   engine: str | None = None, name: str = "",
                   params: dict[str, Any] | None = None) -> dict[str, Any]:
    child = context.processes().spawn(recipe=recipe, engine=engine, name=name, goal=goal,
                                      params=params)
    return {**_summary(child), "status": "STARTING"}


@server_tool(ToolSpec("process_steer", "Send a message to one of this session's processes "
                      "(e.g. forward the user's answer to a worker that asked).", _schema(
                          {"processId": _ID, "message": {"type": "string"}},
                          ["processId", "message"])), idempotent=True)
@user_errors_as_tool_errors
def process_steer(context: Any, processId: str, message: str) -> dict[str, Any]:  # noqa: N803
    context.processes().steer(processId, message)
    return {"ok": True}


@server_tool(ToolSpec("process_stop", "Stop a process of this session, and everything it "
                      "started.", _schema({"processId": _ID}, ["processId"])),
             idempotent=True)
@user_errors_as_tool_errors
def process_stop(context: Any, processId: str) -> dict[str, Any]:  # noqa: N803
    context.processes().stop(processId)
    return {"ok": True}


@server_tool(ToolSpec("process_list", "The processes of this session (without closed ones "
                      "unless all is true).", _schema({"all": {"type": "boolean"}}, [])),
             safety=Safety.SAFE_PROBE)
def process_list(context: Any, all: bool = False) -> list[dict[str, Any]]:  # noqa: A002
    return [_summary(p) for p in context.processes().list()
            if all or p.status is not ProcessStatus.CLOSED]


@server_tool(ToolSpec("process_status", "Details of one process of this session.",
                      _schema({"processId": _ID}, ["processId"])), safety=Safety.SAFE_PROBE)
@user_errors_as_tool_errors
def process_status(context: Any, processId: str) -> dict[str, Any]:  # noqa: N803
    return _summary(context.processes().get(processId))


@server_tool(ToolSpec("recipe_list", "The worker recipes you can start (project, tenant and "
                      "bundled).", _schema({}, [])), safety=Safety.SAFE_PROBE)
def recipe_list(context: Any) -> list[dict[str, Any]]:
    return context.recipes().catalogue()


@server_tool(ToolSpec("recipe_describe", "One recipe in full: engine, default params, prompt, "
                      "tool changes.", _schema({"name": {"type": "string"}}, ["name"])),
             safety=Safety.SAFE_PROBE)
@user_errors_as_tool_errors
def recipe_describe(context: Any, name: str) -> dict[str, Any]:
    return context.recipes().describe(name)


@server_tool(ToolSpec("manual_list", "The manuals your recipe gives you.", _schema({}, [])),
             safety=Safety.SAFE_PROBE)
def manual_list(context: Any) -> list[str]:
    return context.recipes().manuals()


@server_tool(ToolSpec("manual_read", "Read one of your manuals.",
                      _schema({"name": {"type": "string"}}, ["name"])), safety=Safety.SAFE_PROBE)
@user_errors_as_tool_errors
def manual_read(context: Any, name: str) -> str:
    return context.recipes().manual(name)




_ITEM_TYPES = ["APPROVAL", "DECISION", "FEEDBACK", "ORDERING", "STRUCTURE_EDIT", "OUTPUT_TEXT",
               "OUTPUT_IMAGE", "OUTPUT_DOCUMENT"]


_ATTACHMENT = {
    "type": "object", "description": "a file to show in an OUTPUT_IMAGE or OUTPUT_DOCUMENT item "
    "instead of payload.url: its text as content, or its bytes as content_base64; the server "
    "stores it and the call is recorded with its attachment_id and size_bytes instead (give "
    "an attachment_id to show a file stored before); the payload gets its attachmentId, "
    "mimeType (and for a document filename and sizeBytes)",
    "properties": {"filename": {"type": "string"}, "mime_type": {"type": "string"},
                   "content": {"type": "string"}, "content_base64": {"type": "string"},
                   "attachment_id": {"type": "string"}, "size_bytes": {"type": "integer"}},
    "required": ["filename", "mime_type"], "additionalProperties": False}


def _store_inline(context: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``inbox_post`` prepared (``server_tool(prepare=…)``): an inline attachment stored once
    and replaced by ``{attachment_id, filename, mime_type, size_bytes}``; one that cannot be
    stored by ``{filename, mime_type, refused}`` (the call then fails with that reason)."""
    attachment = params.get("attachment")
    if not isinstance(attachment, dict) or "attachment_id" in attachment \
            or "refused" in attachment:
        return params
    shown = {k: attachment[k] for k in ("filename", "mime_type") if k in attachment}
    try:
        data = _inline_bytes(params.get("type"), attachment)
        meta = context.inbox().attach(
            data, str(attachment.get("filename", "")), str(attachment.get("mime_type", "")),
            key="inbox_post:" + hashlib.sha256(b"\0".join((
                str(attachment.get("filename", "")).encode(),
                str(attachment.get("mime_type", "")).encode(), data))).hexdigest())
    except (UserError, OSError) as e:  # OSError: the file could not be written
        return {**params, "attachment": {**shown, "refused": str(e)}}
    return {**params, "attachment": {"attachment_id": meta["id"], "filename": meta["filename"],
                                     "mime_type": meta["mimeType"],
                                     "size_bytes": meta["sizeBytes"]}}


@server_tool(ToolSpec(
    "inbox_post",
    "Put a structured question (APPROVAL, DECISION, FEEDBACK, ORDERING, STRUCTURE_EDIT) or an "
    "output (OUTPUT_TEXT, OUTPUT_IMAGE, OUTPUT_DOCUMENT) into a user's Inbox. A question "
    "blocks this process until it is answered; the answer arrives as an <inbox-answer>. "
    "A LOW question with payload.default is answered with the default at once.",
    _schema({
        "type": {"type": "string", "enum": _ITEM_TYPES},
        "title": {"type": "string"},
        "body": {"type": "string", "description": "Markdown"},
        "payload": {"type": "object", "description": "type-specific, e.g. DECISION: "
                    "{options: [{value, label}], allowFreeText, default}"},
        "criticality": {"type": "string", "enum": ["LOW", "NORMAL", "CRITICAL"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "target_user": {"type": "string", "description": "a user id of this tenant "
                        "(default: the session's user)"},
        "attachment": _ATTACHMENT,
        "idempotency_key": {"type": "string", "description": "repeat it when retrying the "
                            "same post, so it is created once"}}, ["type", "title"])),
    prepare=_store_inline)
@user_errors_as_tool_errors
def inbox_post(context: Any, type: str, title: str, body: str | None = None,  # noqa: A002
               payload: dict[str, Any] | None = None, criticality: str = "NORMAL",
               tags: list[str] | None = None, target_user: str | None = None,
               idempotency_key: str | None = None,
               attachment: dict[str, Any] | None = None) -> dict[str, Any]:
    try:
        kind, level = ItemType(type), Criticality(criticality)
    except ValueError as e:
        raise ToolError(str(e)) from e
    if attachment is not None:
        stored = _store_inline(context, {"type": type, "attachment": attachment})["attachment"]
        payload = _attached(context, kind, payload or {}, stored)
    if idempotency_key is None and (running := context.running_call_key()) is not None:
        # A crash after the item was written, before the journal recorded the result: the
        # run the user approves then has this key too and gets the first item back.
        idempotency_key = f"call:{running}"
    item, created = context.inbox().post(NewItem(
        type=kind, title=title, body=body, payload=payload, criticality=level,
        tags=tuple(tags or ()), assigned_to=target_user, idempotency_key=idempotency_key))
    return {"itemId": item.id, "status": item.status.value, "created": created,
            "assignedTo": item.assigned_to_user_id,
            "answer": item.answer.dump() if item.answer else None,
            "resolvedBy": item.resolved_by.value if item.resolved_by else None}


MAX_INLINE_ATTACHMENT_BYTES = 128 * 1024
"""Largest file ``inbox_post`` takes inline (decoded): the turn journal records the model's
completion, which holds the call's arguments, and one journal entry holds at most 256 KiB
(``store.journal.MAX_ENTRY_BYTES``), base64 included. Engine code stores larger files with
``context.inbox().attach``."""


def _inline_bytes(kind: Any, attachment: dict[str, Any]) -> bytes:
    """The bytes of an inline attachment of an item of type ``kind``, checked."""
    _shows_a_file(kind)
    text, encoded = attachment.get("content"), attachment.get("content_base64")
    if (text is None) == (encoded is None):
        raise ToolError("attachment: give exactly one of content (text) and content_base64")
    try:
        data = str(text).encode() if text is not None else \
            base64.b64decode(str(encoded), validate=True)
    except (binascii.Error, ValueError) as e:
        raise ToolError(f"attachment.content_base64 is not valid base64: {e}") from e
    if len(data) > MAX_INLINE_ATTACHMENT_BYTES:
        raise ToolError(f"attachment is {len(data)} bytes; inbox_post takes at most "
                        f"{MAX_INLINE_ATTACHMENT_BYTES} inline")
    return data


def _shows_a_file(kind: Any) -> None:
    if kind not in ("OUTPUT_IMAGE", "OUTPUT_DOCUMENT"):
        raise ToolError(f"attachment: only OUTPUT_IMAGE and OUTPUT_DOCUMENT items show a "
                        f"file, not {kind}")


def _attached(context: Any, kind: Any, payload: dict[str, Any],
              attachment: dict[str, Any]) -> dict[str, Any]:
    """Name a stored ``attachment`` (prepared: ``_store_inline``) in the payload (filename,
    type and size come from the stored file, so they cannot disagree with it)."""
    if "refused" in attachment:
        raise ToolError(str(attachment["refused"]))
    _shows_a_file(kind.value)
    meta = context.inbox().attachment(str(attachment.get("attachment_id", "")))
    named = {**payload, "attachmentId": meta["id"], "mimeType": meta["mimeType"]}
    if kind is ItemType.OUTPUT_DOCUMENT:
        named |= {"filename": meta["filename"], "sizeBytes": meta["sizeBytes"]}
    return named
