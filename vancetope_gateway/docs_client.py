"""``vancetope docs add|list|rm``: a project's knowledge documents from the terminal.

It finds the server and the token as ``vancetope chat`` does (``discovery``), uploads each
file to ``POST /projects/<project>/documents`` (multipart, the same bearer token) showing the
bytes sent, then follows the document over the WebSocket (``document-updated`` pushes, and a
``document-get`` now and then in case a push was missed) until it is READY or FAILED. ``list``
and ``rm`` are the ``document-list`` and ``document-delete`` frames.
"""

from __future__ import annotations

import http.client
import json
import mimetypes
import os
import queue
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, urlsplit

from vancetope_brain.config import Config
from vancetope_brain.errors import (
    DocumentTooLarge,
    NotFound,
    Unauthorized,
    UnreadableDocument,
    VancetopeError,
)
from vancetope_brain.models.knowledge import MAX_DOCUMENT_BYTES
from vancetope_gateway.chat_client import ChatClient
from vancetope_gateway.discovery import Token, chat_config, chat_token, server_url

SEND_CHUNK = 64 * 1024
POLL_SECONDS = 1.0
"""How often a document's status is read while no push about it came."""
WAIT_SECONDS = 300.0
"""How long ``add`` follows one document before giving up on seeing it READY or FAILED."""
Progress = Callable[[int, int], None]


def http_base(ws_url: str) -> str:
    """``ws://host:port/ws`` → ``http://host:port`` (``wss`` → ``https``)."""
    parts = urlsplit(ws_url)
    scheme = "https" if parts.scheme in ("wss", "https") else "http"
    return f"{scheme}://{parts.netloc}"


def upload_document(base: str, token: str, project_id: str, name: str, data: bytes,
                    media_type: str | None = None,
                    progress: Progress | None = None) -> tuple[int, dict[str, Any]]:
    """POST the file as multipart/form-data; the answer's status and JSON body. A server that
    refuses the upload before reading it (413) is answered, not an error."""
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\n").encode() \
        + name.encode() + (f"\r\n--{boundary}\r\nContent-Disposition: form-data; "
                           f"name=\"file\"; filename=\"upload\"\r\nContent-Type: "
                           f"{media_type or 'application/octet-stream'}\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    parts = urlsplit(base)
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" \
        else http.client.HTTPConnection
    connection = connection_class(parts.netloc, timeout=120)
    try:
        connection.putrequest("POST", f"/projects/{quote(project_id, safe='')}/documents")
        connection.putheader("Authorization", f"Bearer {token}")
        connection.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        connection.putheader("Content-Length", str(len(head) + len(data) + len(tail)))
        connection.endheaders()
        try:
            connection.send(head)
            for start in range(0, len(data), SEND_CHUNK):
                connection.send(data[start:start + SEND_CHUNK])
                if progress is not None:
                    progress(min(start + SEND_CHUNK, len(data)), len(data))
            connection.send(tail)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before reading it all: the answer says why
        response = connection.getresponse()
        raw = response.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"code": "http_error", "message": raw[:200].decode(errors="replace")}
        return response.status, body
    except OSError as e:
        raise VancetopeError(f"cannot reach {base}: {e}; is `vancetope serve` running?") from e
    finally:
        connection.close()


class DocsCommand:
    """One ``vancetope docs`` run: the server, the token and an open protocol connection."""

    def __init__(self, config: Config, *, url: str | None, token: str | None,
                 out: TextIO | None = None, err: TextIO | None = None) -> None:
        config = chat_config(config, os.environ)
        self.url = server_url(config, os.environ, url)
        self.token: Token = chat_token(config, os.environ, token)
        self.out, self.err = out or sys.stdout, err or sys.stderr
        try:
            self.client = ChatClient(self.url, self.token.secret)
        except Unauthorized as e:
            raise Unauthorized(f"{e}; {self.token.advice()}") from e

    def close(self) -> None:
        self.client.close()

    def add(self, files: list[Path], project_id: str, *, wait: bool = True) -> int:
        """Upload each file, then follow it to READY or FAILED; 1 if any was refused or
        FAILED."""
        failed = 0
        for path in files:
            try:
                doc = self._upload(path, project_id)
            except VancetopeError as e:
                print(f"{path}: {getattr(e, 'code', 'error')}: {e}", file=self.err)
                failed += 1
                continue
            if wait and doc["status"] not in ("READY", "FAILED"):
                doc = self._follow(doc)
            failed += doc["status"] != "READY"
            print(_outcome(path.name, doc), file=self.out if doc["status"] == "READY"
                  else self.err)
        return 1 if failed else 0

    def show(self, project_id: str) -> int:
        docs = self.client.request("document-list", projectId=project_id)["documents"]
        if not docs:
            print(f"(no documents in project {project_id}; add some with `vancetope docs add "
                  f"FILE…`)", file=self.err)
        for doc in docs:
            print(f"{doc['id']}  {doc['status']:<8}  {_size(doc['size']):>9}  "
                  f"{doc['chunkCount']:>6} chunks  {doc['name']}", file=self.out)
        return 0

    def remove(self, names: list[str], project_id: str) -> int:
        """Delete each document, named by its name or id; 1 if any was not found."""
        docs = self.client.request("document-list", projectId=project_id)["documents"]
        missing = 0
        for wanted in names:
            found = [d for d in docs if wanted in (d["id"], d["name"])]
            if not found:
                print(f"{wanted}: no document of that name or id in project {project_id} "
                      f"(see `vancetope docs list`)", file=self.err)
                missing += 1
                continue
            self.client.request("document-delete", projectId=project_id,
                                documentId=found[0]["id"])
            print(f"deleted {found[0]['name']} ({found[0]['id']})", file=self.out)
        return 1 if missing else 0

    def _upload(self, path: Path, project_id: str) -> dict[str, Any]:
        try:
            size = path.stat().st_size
            if size > MAX_DOCUMENT_BYTES:
                raise DocumentTooLarge(f"{size} bytes; one file may have at most "
                                       f"{MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB: split it")
            data = path.read_bytes()
        except OSError as e:
            raise UnreadableDocument(f"cannot read the file: {e.strerror}") from e
        shown = _Progress(path.name, self.err)
        status, body = upload_document(http_base(self.url), self.token.secret, project_id,
                                       path.name, data, mimetypes.guess_type(path.name)[0],
                                       shown)
        shown.done()
        if status >= 400:
            error = VancetopeError(f"{body.get('message', status)}{_advice(body.get('code'))}")
            error.code = body.get("code", "error")
            raise error
        doc: dict[str, Any] = body["document"]
        if not body.get("changed", True):
            print(f"{path.name}: unchanged (the same bytes are indexed already)", file=self.err)
        return doc

    def _follow(self, doc: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_SECONDS
        print(f"{doc['name']}: {doc['status']}…", file=self.err, flush=True)
        while time.monotonic() < deadline:
            try:
                frame = self.client.events.get(timeout=POLL_SECONDS)
            except queue.Empty:
                try:
                    doc = self.client.request("document-get", projectId=doc["projectId"],
                                              documentId=doc["id"])["document"]
                except VancetopeError as e:
                    if getattr(e, "code", None) == NotFound.code:
                        return {**doc, "status": "FAILED", "errorCode": NotFound.code,
                                "error": "it was deleted meanwhile"}
                    raise
            else:
                if frame.get("type") == "closed":
                    raise VancetopeError(f"the connection to {self.url} was lost; see the "
                                         f"document with `vancetope docs list`")
                pushed = frame.get("data", {}).get("document")
                if frame.get("type") != "document-updated" or pushed["id"] != doc["id"] or \
                        pushed["version"] != doc["version"]:
                    continue
                if pushed["status"] != doc["status"] and \
                        pushed["status"] not in ("READY", "FAILED"):  # _outcome says those
                    print(f"{doc['name']}: {pushed['status']}…", file=self.err, flush=True)
                doc = pushed
            if doc["status"] in ("READY", "FAILED"):
                return doc
        raise VancetopeError(f"{doc['name']} is still {doc['status']} after {WAIT_SECONDS:g} s: "
                             f"is a worker running? See it later with `vancetope docs list`")


class _Progress:
    """Bytes sent, on one line that is rewritten on a terminal (only the total otherwise)."""

    def __init__(self, name: str, err: TextIO) -> None:
        self._name, self._err = name, err
        self._tty = err.isatty()
        self._sent = 0

    def __call__(self, sent: int, total: int) -> None:
        self._sent = sent
        if self._tty:
            self._err.write(f"\r{self._name}: uploading {_size(sent)} of {_size(total)} "
                            f"({100 * sent // max(total, 1)}%)")
            self._err.flush()

    def done(self) -> None:
        end = "\n" if self._tty else ""
        self._err.write(f"{end}{self._name}: uploaded {_size(self._sent)}\n")
        self._err.flush()


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / (1024 * 1024):.1f} MiB"


def _outcome(name: str, doc: dict[str, Any]) -> str:
    if doc["status"] == "READY":
        pages = f", {_count(doc['pages'], 'page')}" if doc.get("pages") else ""
        return f"{name}: READY, {_count(doc['chunkCount'], 'chunk')}{pages} ({doc['id']})"
    return (f"{name}: FAILED ({doc.get('errorCode')}): {doc.get('error')}"
            f"{_advice(doc.get('errorCode'))}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _advice(code: str | None) -> str:
    """What to do next about an error code."""
    return {
        "unsupported_document": " — convert it to text, Markdown, HTML or PDF and add it again",
        "unreadable_document": " — check the file (a scanned PDF has no text; an encrypted "
                               "one needs its password removed) and add it again",
        "document_too_large": " — split the file and add the parts",
        "project_knowledge_full": " — delete documents with `vancetope docs rm`",
        "tenant_knowledge_full": " — delete documents of this or another project",
        "not_found": " — check --project (`vancetope docs list --project P`)",
        "runtime_failure": " — the server could not queue it: try again",
    }.get(code or "", "")
