"""Moving a used store with ``vancetope admin export`` and ``import`` (issue 30 item 6): a
SQLite store that served real turns (the embedded server's local user, its token and sample
document, a conversation, Inbox items, settings, vectors) is exported, imported into
PostgreSQL and exported again — the same records, byte for byte — and the runtime started on
PostgreSQL goes on with the conversation where it was. ``test_transfer.py`` tests the file
format itself."""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mongomock
import numpy as np
import pytest

from tests.helpers import server_env, wait_for
from vancetope_brain import keys
from vancetope_brain.config import Config
from vancetope_brain.errors import Unauthorized
from vancetope_brain.identity import Principal
from vancetope_brain.identity.service import DEFAULT_PROJECT, LOCAL_TENANT, LOCAL_USER
from vancetope_brain.knowledge.sample import seed_sample
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole, ProcessStatus
from vancetope_brain.models.inbox import ItemType, NewItem
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.services.transfer import export_store, import_store, source_of, tally_store
from vancetope_brain.store import (
    DocumentVectors,
    LaneStore,
    SessionStore,
    TransferStore,
    open_store,
)
from vancetope_brain.store.mongo import MongoBackend
from vancetope_gateway.cli import main
from vancetope_gateway.parts import build_gateway
from workers.celery_app import create_celery, enqueue_index_on, enqueue_on
from workers.embedded import EmbeddedWorker

LOCAL = Principal(LOCAL_TENANT, LOCAL_USER)


class Runtime:
    """A gateway's parts and an in-process Celery worker on the store at ``store_url`` (as
    ``conftest.Embedded`` builds them, without creating any identity), answering with
    ``model``."""

    def __init__(self, data_dir: Path, store_url: str, model: FunctionModel) -> None:
        config = Config.from_env(server_env(data_dir, VANCETOPE_STORE_URL=store_url))
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.store = open_store(config.store_url)
        app = create_celery(config, model_for=lambda process: model, store=self.store)
        self.brain = build_gateway(config, enqueue_on(app), enqueue_index=enqueue_index_on(app),
                                   store=self.store)
        for flag in self.brain.redis.scan_iter(match=keys.shard_queued("*")):
            self.brain.redis.delete(flag)
        self.worker_parts = app.vancetope_worker()
        self.worker = EmbeddedWorker(app, concurrency=2)
        self.worker.start()

    def chat(self, pid: str, lines: int) -> list[tuple[ChatRole, str]]:
        """The process's chat once it holds ``lines`` lines and the process is IDLE."""
        history = wait_for(lambda: (h := self.store.port(LaneStore).chat_history(
            LOCAL_TENANT, pid, limit=1000)) and len(h) >= lines and self.store.port(
            SessionStore).get_process(LOCAL_TENANT, pid).status is ProcessStatus.IDLE and h,
            timeout=30, what=f"{lines} chat lines")
        return [(line.role, line.content) for line in history]

    def stop(self) -> None:
        self.worker.stop()
        self.worker_parts.close()
        self.store.close()


def _answer(messages, tools) -> str:
    return f"answer to {sum(m.role == 'user' for m in messages)} question(s)"


@dataclass(frozen=True)
class Used:
    """A used SQLite store and what the test needs to know of it."""

    data_dir: Path
    url: str
    export: Path
    """Its export by ``vancetope admin export``."""
    secret: str
    revoked: str
    pid: str
    chat: list[tuple[ChatRole, str]]
    last_seq: int


def _admin(env: dict[str, str], *argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """``vancetope admin …`` in this process with ``env`` as its only VANCETOPE_ variables;
    (exit code, stdout, stderr)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in os.environ if n.startswith("VANCETOPE_")]:
            mp.delenv(name)
        for name, value in env.items():
            mp.setenv(name, value)
        out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        if stdin is not None:
            mp.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        code = main(["admin", *argv])
        out.flush()
        return code, out.buffer.getvalue().decode(), err.getvalue()  # type: ignore[attr-defined]


def _env(data_dir: Path, url: str) -> dict[str, str]:
    return {"VANCETOPE_DATA_DIR": str(data_dir), "VANCETOPE_STORE_URL": url}


@pytest.fixture(scope="module")
def used(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Used]:
    data_dir = tmp_path_factory.mktemp("used")
    url = f"sqlite:///{data_dir / 'vancetope.db'}"
    runtime = Runtime(data_dir, url, FunctionModel(_answer))
    try:
        brain = runtime.brain
        secret, _ = brain.identity.bootstrap_local(
            data_dir / "token",
            on_new_project=lambda t, p, u: seed_sample(runtime.store, t, p, u))
        token, revoked = brain.identity.create_token(LOCAL_TENANT, LOCAL_USER, "old laptop")
        brain.identity.revoke_token(LOCAL_TENANT, token.id)
        brain.settings.set(LOCAL_TENANT, SettingScope.user(LOCAL_USER),
                           "inbox.autoArchiveAfterDays", 3)
        document = runtime.store.port(DocumentVectors)
        sample = next(iter(brain.documents.list(LOCAL, DEFAULT_PROJECT)))
        assert document.write_vectors(LOCAL_TENANT, DEFAULT_PROJECT, sample.id, sample.version,
                                      "test-embedding", np.arange(1.0, 1.0 + 3 * sample.chunk_count)
                                      .reshape(sample.chunk_count, 3))
        session = brain.sessions.create_interactive(LOCAL, title="Moving house")
        pid = session.chat_process_id
        brain.sessions.steer(LOCAL, pid, "Which boxes go first? ✓")
        runtime.chat(pid, 3)
        last, _ = brain.sessions.steer(LOCAL, pid, "And the piano?")
        chat = runtime.chat(pid, 5)
        brain.inbox.create(LOCAL_TENANT, LOCAL_USER, NewItem(ItemType.APPROVAL, "Hire movers?"))
        brain.inbox.create(LOCAL_TENANT, LOCAL_USER, NewItem(ItemType.OUTPUT_TEXT, "Checklist"))
    finally:
        runtime.stop()
    export = data_dir / "export.jsonl.gz"
    code, out, err = _admin(_env(data_dir, url), "export", str(export))
    assert code == 0, err
    assert out.startswith("exported: ") and "digest" in out and "chat: " in err
    yield Used(data_dir, url, export, secret, revoked, pid, chat, last.seq)


def _text(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def _records(path: Path) -> bytes:
    """An export's record, end and done lines (not its header and checkpoints)."""
    return b"".join(line + b"\n" for line in _text(path).splitlines()[1:]
                    if not line.startswith(b'{"after"'))


def _done(path: Path) -> dict[str, Any]:
    return json.loads(_text(path).splitlines()[-1])


def test_a_used_sqlite_store_moves_to_postgres_and_goes_on(used: Used, postgres_url: str,
                                                          tmp_path: Path) -> None:
    records = _records(used.export)
    assert b'"kind":"inbox_items"' in records and b'"kind":"api_tokens"' in records
    assert "Which boxes go first? ✓".encode() in records
    pg = _env(tmp_path, postgres_url)
    code, out, err = _admin(pg, "import", str(used.export))
    assert code == 0, err
    assert out.startswith("verified: the store holds the file's ")
    assert out.endswith(f"(digest {_done(used.export)['digest']})\n")
    code, _, err = _admin(pg, "export", str(tmp_path / "again.jsonl"))
    assert code == 0, err
    # Every kind fits one page here, so even the checkpoints carry no cursor: byte-equal
    # after the header (which names the source and the time).
    assert _text(tmp_path / "again.jsonl").split(b"\n", 1)[1] == \
        _text(used.export).split(b"\n", 1)[1]
    assert _done(tmp_path / "again.jsonl") == _done(used.export)

    # The runtime on PostgreSQL: the next message of the conversation sees all of it.
    model = FunctionModel(_answer)
    runtime = Runtime(tmp_path, postgres_url, model)
    try:
        brain = runtime.brain
        assert brain.identity.authenticate(used.secret) == LOCAL
        with pytest.raises(Unauthorized):
            brain.identity.authenticate(used.revoked)
        message, _ = brain.sessions.steer(LOCAL, used.pid, "Done moving?")
        assert message.seq == used.last_seq + 1
        chat = runtime.chat(used.pid, 7)
        assert chat[:5] == used.chat
        assert chat[5:] == [(ChatRole.USER, "Done moving?"),
                            (ChatRole.ASSISTANT, "answer to 3 question(s)")]
        seen = [m.content for m in model.calls[0].messages
                if m.content.startswith(("Which", "answer", "And", "Done"))]
        assert seen == ["Which boxes go first? ✓", "answer to 1 question(s)", "And the piano?",
                        "answer to 2 question(s)", "Done moving?"]
        turns = runtime.store.port(LaneStore).turn_records(LOCAL_TENANT, used.pid)
        assert [t.epoch for t in turns] == sorted({t.epoch for t in turns}) and len(turns) >= 3
        assert [i.title for i in brain.inbox.list(LOCAL)] == ["Checklist", "Hire movers?"]
    finally:
        runtime.stop()


def test_through_a_pipe_into_another_sqlite_store(used: Used, tmp_path: Path) -> None:
    code, piped, err = _admin(_env(used.data_dir, used.url), "export", "-", "--page", "1")
    assert code == 0 and err.startswith("tenants: "), err
    assert piped.encode().splitlines()[1:] != []
    other = _env(tmp_path, f"sqlite:///{tmp_path / 'copy.db'}")
    code, out, err = _admin(other, "import", "-", stdin=piped.encode())
    assert code == 0 and out.startswith("verified: "), err
    code, _, _ = _admin(other, "export", str(tmp_path / "copy.jsonl"))
    assert code == 0
    assert _records(tmp_path / "copy.jsonl") == _records(used.export)
    code, out, err = _admin(other, "import", str(used.export))
    assert (code, out) == (2, "")
    assert err.startswith("vancetope: the destination store is not empty") and \
        err.count("\n") == 1 and "--resume" in err


def test_page_size_and_a_resumed_export_on_sqlite(used: Used, tmp_path: Path) -> None:
    store = open_store(used.url)
    try:
        port, source = store.port(TransferStore), source_of(store)
        assert source == {"backend": "sqlite", "schemaVersion": store.schema_version()}
        export_store(port, source, str(tmp_path / "one.jsonl"), page=1)
        export_store(port, source, str(tmp_path / "many.jsonl"), page=1000)
        assert _records(tmp_path / "one.jsonl") == _records(tmp_path / "many.jsonl") == \
            _records(used.export)
        whole = (tmp_path / "one.jsonl").read_bytes()
        middle = whole.index(b'{"kind":"chat"') + 10
        (tmp_path / "one.jsonl").rename(tmp_path / "cut.jsonl.partial")
        (tmp_path / "cut.jsonl.partial").write_bytes(whole[:middle])
    finally:
        store.close()
    code, out, err = _admin(_env(used.data_dir, used.url), "export", str(tmp_path / "cut.jsonl"),
                            "--resume", "--page", "1")
    assert code == 0 and "resuming" in err, err
    assert (tmp_path / "cut.jsonl").read_bytes() == whole
    code, out, _ = _admin(_env(used.data_dir, used.url), "export", str(tmp_path / "cut.jsonl"),
                          "--resume")
    assert code == 0 and out.startswith("complete already: ")


def test_an_import_into_a_store_holding_other_records_fails_its_check(used: Used,
                                                                      tmp_path: Path) -> None:
    other = _env(tmp_path, f"sqlite:///{tmp_path / 'other.db'}")
    assert _admin(other, "tenant", "create", "Other", "--id", "other")[0] == 0
    code, out, err = _admin(other, "import", str(used.export), "--resume", "-q")
    assert (code, out) == (2, "")
    assert err.startswith("vancetope: after the import the store differs from the file in "
                          "tenants (2 here, 1 in the file); projects (2 here, 1 in the file)")
    assert err.count("\n") == 1


def test_the_used_store_moves_to_mongodb_with_the_same_digests(used: Used) -> None:
    store = MongoBackend.from_client(mongomock.MongoClient(tz_aware=True), "vancetope_xfer")
    try:
        done = import_store(store.port(TransferStore), str(used.export))
        assert done.differences == [] and done.written == _done(used.export)["count"]
        assert tally_store(store.port(TransferStore)).digest == _done(used.export)["digest"]
        assert source_of(store) == {"backend": "mongo", "schemaVersion": None}
    finally:
        store.close()
