"""Attachment bytes on local disk, reached through signed, expiring URLs (user-interaction §15).

Layout: ``<root>/<tenant>/<id>`` holds the bytes and ``<root>/<tenant>/<id>.json``
their filename, mime type and size. A URL carries ``exp`` (Unix seconds) and
``sig`` = HMAC-SHA256(secret, tenant/id/exp): the signature *is* the
authorization, so a link works in ``<img src>`` and in an e-mail, and one
tenant's link can never open another tenant's file. Ids are checked against
strict patterns before any path is built, so no input can leave ``root``.

Every gateway and worker of a cluster must share ``root`` and the secret
(``VANCETOPE_ATTACHMENTS_DIR``, ``VANCETOPE_SECRET_KEY``).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vancetope_brain.config import PRIVATE_DIR, Config
from vancetope_brain.errors import ConfigError, Forbidden, InvalidInput, NotFound
from vancetope_brain.models.base import new_id

MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
ATTACHMENT_ID = re.compile(r"att_[0-9a-f]{16}")
MIME_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")
SECRET_BYTES = 32

# The identity service's id rule: cannot be empty, '.' or '..', and has no '/'.
_TENANT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_MAX_FILENAME = 200


class AttachmentStore:
    """Writes attachments once and opens them for holders of a valid signed URL.

    ``clock`` returns Unix seconds; tests inject one to expire links.
    """

    def __init__(self, root: Path, secret: bytes, ttl: int, base_url: str, *,
                 clock: Callable[[], float] = time.time,
                 max_bytes: int = MAX_ATTACHMENT_BYTES) -> None:
        self._root = root
        self._secret = secret
        self._ttl = ttl
        self._base_url = base_url.rstrip("/")
        self._clock = clock
        self._max_bytes = max_bytes

    def put(self, tenant_id: str, data: bytes, filename: str, mime_type: str, *,
            key: str | None = None) -> dict[str, Any]:
        """Store ``data``; returns ``{id, filename, mimeType, sizeBytes}``.

        With a ``key`` the id is derived from it (and the tenant), and a put whose key was
        stored already stores nothing and returns the first file's metadata: a call that is
        repeated (a retried turn) keeps one file. The files appear atomically (bytes first,
        then the metadata that makes them visible), so a concurrent ``open`` sees all or
        nothing.
        """
        if not _TENANT_ID.fullmatch(tenant_id):
            raise InvalidInput(f"invalid tenant id {tenant_id!r}")
        if len(data) > self._max_bytes:
            raise InvalidInput(f"attachment is {len(data)} bytes; at most {self._max_bytes} "
                               "are allowed")
        mime = mime_type.strip().lower()
        if not MIME_TYPE.fullmatch(mime):
            raise InvalidInput(f"mimeType {mime_type!r} is not a type/subtype like 'image/png'")
        attachment_id = new_id("att") if key is None else \
            "att_" + hashlib.sha256(f"{tenant_id}\0{key}".encode()).hexdigest()[:16]
        if key is not None:
            with contextlib.suppress(NotFound):
                return self.meta(tenant_id, attachment_id)
        meta = {"id": attachment_id, "filename": safe_filename(filename), "mimeType": mime,
                "sizeBytes": len(data)}
        folder = self._root / tenant_id
        self._root.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)  # mode: the leaf only
        folder.mkdir(mode=PRIVATE_DIR, exist_ok=True)
        _write_atomically(folder / attachment_id, data)
        _write_atomically(folder / f"{attachment_id}.json", json.dumps(meta).encode())
        return meta

    def signed_url(self, tenant_id: str, attachment_id: str) -> str:
        """An absolute URL that opens the attachment until ``ttl`` seconds from now."""
        if not (_TENANT_ID.fullmatch(tenant_id) and ATTACHMENT_ID.fullmatch(attachment_id)):
            raise InvalidInput(f"invalid attachment {tenant_id!r}/{attachment_id!r}")
        exp = int(self._clock()) + self._ttl
        sig = self._sign(tenant_id, attachment_id, exp)
        return f"{self._base_url}/attachments/{tenant_id}/{attachment_id}?exp={exp}&sig={sig}"

    def open(self, tenant_id: str, attachment_id: str, exp: int | str,
             sig: str) -> tuple[Path, dict[str, Any]]:
        """The file and its metadata, for the raw ``exp`` and ``sig`` of a signed URL.

        Raises ``Forbidden`` for a wrong or expired signature (checked before
        existence, so probing reveals nothing) and ``NotFound`` when the id is
        malformed or nothing is stored under it.
        """
        if not (_TENANT_ID.fullmatch(tenant_id) and ATTACHMENT_ID.fullmatch(attachment_id)):
            raise NotFound("no such attachment")
        try:
            expires_at = int(exp)
        except ValueError:
            raise Forbidden("attachment link is malformed: exp must be an integer") from None
        expected = self._sign(tenant_id, attachment_id, expires_at)
        if not hmac.compare_digest(expected.encode(), sig.encode()):
            raise Forbidden("attachment link signature is invalid")
        if self._clock() > expires_at:
            raise Forbidden("attachment link has expired; ask for a fresh link")
        return self._root / tenant_id / attachment_id, self.meta(tenant_id, attachment_id)

    def meta(self, tenant_id: str, attachment_id: str) -> dict[str, Any]:
        """``{id, filename, mimeType, sizeBytes}`` of a stored attachment of the tenant;
        ``NotFound`` when the id is malformed or nothing (complete) is stored under it."""
        if not (_TENANT_ID.fullmatch(tenant_id) and ATTACHMENT_ID.fullmatch(attachment_id)):
            raise NotFound("no such attachment")
        path = self._root / tenant_id / attachment_id
        try:
            meta: dict[str, Any] = json.loads((path.parent / f"{attachment_id}.json").read_text())
        except FileNotFoundError:
            raise NotFound("no such attachment") from None
        if not path.is_file():
            raise NotFound("no such attachment")
        return meta

    def _sign(self, tenant_id: str, attachment_id: str, exp: int) -> str:
        # The "attachment:" prefix keeps these signatures apart from anything
        # else the same secret may sign later.
        message = f"attachment:{tenant_id}/{attachment_id}/{exp}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()


def safe_filename(filename: str) -> str:
    """The last path component without control characters, capped; a download name, never a path."""
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] != "C").strip().lstrip(".")
    return name[:_MAX_FILENAME] or "attachment"


def load_secret(config: Config) -> bytes:
    """The key that signs attachment URLs: ``VANCETOPE_SECRET_KEY``, else ``<data dir>/secret.key``.

    The file is created once with 32 random bytes and mode 0600. It is written
    to a temporary file and hard-linked into place, so of two processes racing
    to create it exactly one wins and both read the winner's key.
    """
    if config.secret_key:
        return config.secret_key.encode()
    path = config.data_dir / "secret.key"
    if not path.exists():
        config.data_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=config.data_dir, prefix=".secret-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(SECRET_BYTES))
            with contextlib.suppress(FileExistsError):  # another process won: its key is the key
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    secret = path.read_bytes()
    if len(secret) < SECRET_BYTES:
        raise ConfigError(f"{path} holds {len(secret)} bytes; a secret key needs at least "
                          f"{SECRET_BYTES} (delete the file to generate a new one)")
    return secret


def _write_atomically(path: Path, data: bytes) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
