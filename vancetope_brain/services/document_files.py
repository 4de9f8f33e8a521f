"""Where the bytes of knowledge documents wait for a worker: files under the attachments root.

Layout: ``<root>/<tenant>/documents/<document id>/<version>``. ``root`` is
``VANCETOPE_ATTACHMENTS_DIR``, which every gateway and worker of a cluster already shares for
Inbox attachments, so a worker reads what any gateway wrote. Not in the store: a file may be
20 MiB, past a MongoDB document's 16 MiB, and SQLite would carry it through its WAL; the store
keeps the record (name, size, ``sha256``, version, status) and the chunks.

A version's file is written once, atomically (a temporary file in the same folder, then a
rename), so a reader sees all of it or none. Ids are checked against strict patterns before
any path is built, so no input can leave ``root``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from vancetope_brain.config import PRIVATE_DIR
from vancetope_brain.errors import UnreadableDocument

_TENANT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""The identity service's id rule (no '/', not '.' or '..')."""
_DOCUMENT_ID = re.compile(r"doc_[0-9a-f]{16}")
FOLDER = "documents"
"""The folder of a tenant's document bytes beside its attachments (``att_…`` files)."""


class DocumentFiles:
    """The bytes of each document version, shared by gateways and workers."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def put(self, tenant_id: str, document_id: str, version: int, data: bytes) -> None:
        """Keep ``data`` as that version's bytes (atomically; a second put replaces them)."""
        folder = self._folder(tenant_id, document_id)
        for level in (self._root, self._root / tenant_id, folder.parent, folder):
            level.mkdir(mode=PRIVATE_DIR, exist_ok=True, parents=level == self._root)
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temporary, folder / str(version))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def read(self, tenant_id: str, document_id: str, version: int) -> bytes:
        """That version's bytes; ``UnreadableDocument`` when they are gone (the document
        was deleted, or the upload died before they were kept: add the file again)."""
        try:
            return (self._folder(tenant_id, document_id) / str(version)).read_bytes()
        except FileNotFoundError:
            raise UnreadableDocument(f"the bytes of version {version} of {document_id} are "
                                     f"gone; add the file again") from None

    def prune(self, tenant_id: str, document_id: str, keep: int) -> None:
        """Remove the bytes of every version older than ``keep`` (a newer one, being
        written for a later add, stays)."""
        folder = self._folder(tenant_id, document_id)
        with contextlib.suppress(FileNotFoundError):
            for path in folder.iterdir():
                if path.name.isdigit() and int(path.name) < keep:
                    path.unlink(missing_ok=True)

    def remove(self, tenant_id: str, document_id: str) -> None:
        """Remove every version's bytes of the document."""
        shutil.rmtree(self._folder(tenant_id, document_id), ignore_errors=True)

    def versions(self, tenant_id: str, document_id: str) -> list[int]:
        """The versions whose bytes are kept, in order."""
        folder = self._folder(tenant_id, document_id)
        if not folder.is_dir():
            return []
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())

    def _folder(self, tenant_id: str, document_id: str) -> Path:
        if not (_TENANT_ID.fullmatch(tenant_id) and _DOCUMENT_ID.fullmatch(document_id)):
            raise ValueError(f"invalid document {tenant_id!r}/{document_id!r}")
        return self._root / tenant_id / FOLDER / document_id
