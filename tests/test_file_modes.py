"""What Vancetope creates for its data is its owner's alone (issue 12): directories 0700,
the SQLite file (and its -wal / -shm) and attachments 0600 — whatever the umask lets
others read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from vancetope_brain.inbox.attachments import AttachmentStore
from vancetope_brain.runtime import open_store
from vancetope_brain.store import IdentityStore


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def permissive_umask():
    old = os.umask(0o022)  # the usual default: others may read what is created
    yield
    os.umask(old)


def test_the_sqlite_store_and_its_folder_are_private(tmp_path: Path) -> None:
    path = tmp_path / "data" / "v.db"
    store = open_store(f"sqlite:///{path}")
    try:
        store.port(IdentityStore).list_tenants()  # a connection in WAL mode is open
        assert _mode(path.parent) == 0o700 and _mode(path) == 0o600
        for sidecar in (Path(f"{path}-wal"), Path(f"{path}-shm")):
            if sidecar.exists():
                assert _mode(sidecar) == 0o600, sidecar
    finally:
        store.close()


def test_attachments_and_their_folders_are_private(tmp_path: Path) -> None:
    root = tmp_path / "attachments"
    store = AttachmentStore(root, b"k" * 32, 60, "http://localhost")
    meta = store.put("acme", b"hello", "a.txt", "text/plain")
    assert _mode(root) == 0o700 and _mode(root / "acme") == 0o700
    assert _mode(root / "acme" / meta["id"]) == 0o600
