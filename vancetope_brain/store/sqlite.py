"""The SQLite adapter: one file, WAL, safe across threads and OS processes on one host."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic_core import to_json

from vancetope_brain.errors import Conflict, Fenced, NotFound, StoreError
from vancetope_brain.models import (
    ApiToken,
    ChatMessage,
    Fingerprint,
    InboxMessage,
    ProcessStatus,
    Project,
    Session,
    SessionStatus,
    SuspendCause,
    Tenant,
    ThinkProcess,
    TurnCommit,
    TurnRecord,
    User,
    utcnow,
)
from vancetope_brain.store._sqlite_config import SqliteConfigMixin
from vancetope_brain.store._sqlite_db import (
    ThreadConnection,
    connect,
    create_schema,
    from_ms,
    load_one,
    retry_busy,
    to_ms,
)
from vancetope_brain.store._sqlite_user_inbox import SqliteUserInboxMixin
from vancetope_brain.store.base import Store

_STARTS_TURN = ("INIT", "IDLE", "BLOCKED")
_NOT_SWEPT = ("CLOSED", "PAUSED", "SUSPENDED")

_PROCESS_SELECT = (
    "SELECT p.doc, l.status, l.epoch, l.next_seq, l.pending_control, l.control_requested_ms "
    "FROM lanes l JOIN processes p ON p.id = l.process_id"
)
_MESSAGE_SELECT = "SELECT doc, seq, drained_at, drained_epoch FROM messages"
# Only the fields a turn may change; status lives in ``lanes``.
_SET_OUTCOME = (
    "UPDATE processes SET doc = json_set(doc, '$.closeReason', ?, '$.lastError', ?, "
    "'$.updatedAt', ?) WHERE id = ?"
)
_SET_OUTCOME_AND_STATE = (
    "UPDATE processes SET doc = json_set(doc, '$.closeReason', ?, '$.lastError', ?, "
    "'$.updatedAt', ?, '$.engineState', json(?)) WHERE id = ?"
)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _process(row: tuple[str, str, int, int, str | None, int | None]) -> ThinkProcess:
    doc, status, epoch, next_seq, pending_control, control_requested_ms = row
    raw = json.loads(doc)
    raw.update(status=status, epoch=epoch, nextSeq=next_seq, pendingControl=pending_control,
               controlRequestedAt=from_ms(control_requested_ms))
    return ThinkProcess.load(raw)


def _token(row: tuple[str, int]) -> ApiToken:
    doc, revoked = row
    raw = json.loads(doc)
    raw["revoked"] = bool(revoked)  # the column is authoritative, as for ``lanes``
    return ApiToken.load(raw)


_D = TypeVar("_D", Tenant, Project, User, ApiToken)


def _oldest_first(records: Iterable[_D]) -> list[_D]:
    return sorted(records, key=lambda record: record.created_at)


def _message(row: tuple[str, int, str | None, int | None]) -> InboxMessage:
    doc, seq, drained_at, drained_epoch = row
    raw = json.loads(doc)
    raw.update(seq=seq, drainedAt=drained_at, drainedEpoch=drained_epoch)
    return InboxMessage.load(raw)


class SqliteStore(SqliteConfigMixin, SqliteUserInboxMixin, Store):
    """The Store on one SQLite file (the reference adapter).

    One connection per thread (re-opened after ``fork``), WAL journal; a
    statement that meets another writer's lock retries every 50 µs–2 ms for up
    to 10 s (``retry_busy``). Every write runs in a ``BEGIN IMMEDIATE`` transaction, which takes the file's single write lock
    up front, so ``acquire_epoch``, ``request_control``, ``append_message`` and
    ``commit_turn`` are atomic across threads and processes. The fields those
    change on a process (status, epoch, seqs, pending control) live in its
    ``lanes`` row, not in its JSON document. ``synchronous=NORMAL``: a returned
    write survives a crash of any process, but the last commits may be lost
    on power failure or an OS crash (WAL then skips an fsync per commit).
    Recipes and settings: ``_sqlite_config``; the user Inbox and the delivery
    log: ``_sqlite_user_inbox``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._local = threading.local()
        # Every connection opened, with the pid that opened it: close() must
        # not touch what a forked child inherited.
        self._connections: dict[sqlite3.Connection, int] = {}
        # One writer per OS process at a time: threads of this process queue on a lock
        # (no CPU) instead of all spinning on SQLite's file lock; only other processes
        # are waited for with retry_busy.
        self._writer = threading.Lock()
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            create_schema(self._conn())
        except (OSError, sqlite3.Error) as e:
            self.close()
            raise StoreError(f"cannot open SQLite store {self._path}: {e}") from e
        except StoreError:
            self.close()
            raise

    # ── plumbing ──────────────────────────────────────────────────────────
    def _conn(self) -> sqlite3.Connection:
        owned: ThreadConnection | None = getattr(self._local, "owned", None)
        # A connection inherited through fork must not be used by the child.
        if owned is None or owned.pid != os.getpid():
            owned = self._local.owned = ThreadConnection(connect(self._path), self._connections)
        return owned.conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.IntegrityError as e:
            raise Conflict(f"duplicate record: {e}") from e
        except sqlite3.Error as e:
            raise StoreError(f"SQLite store {self._path}: {e}") from e

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction, rolled back on any exception."""
        with self._errors(), self._writer:
            conn = self._conn()
            retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._errors():
            conn = self._conn()
            return retry_busy(lambda: conn.execute(sql, params).fetchall())

    def _execute(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Cursor:
        """One writing statement in its own transaction."""
        with self._write() as conn:
            return conn.execute(sql, params)

    def ping(self) -> None:
        self._read("SELECT 1", ())

    def close(self) -> None:
        """Close every connection this process opened (other threads' too)."""
        pid = os.getpid()
        for conn, opener in list(self._connections.items()):
            if opener == pid:
                self._connections.pop(conn, None)
                conn.close()
        self._local = threading.local()

    # ── identity ──────────────────────────────────────────────────────────
    # Administration-sized lists: read in insertion order, then sorted by
    # ``createdAt`` (stable, so equal times keep insertion order).
    def create_tenant(self, tenant: Tenant) -> None:
        self._execute("INSERT INTO tenants (id, doc) VALUES (?, ?)",
                     (tenant.id, tenant.model_dump_json(by_alias=True)))

    def list_tenants(self) -> list[Tenant]:
        rows = self._read("SELECT doc FROM tenants ORDER BY rowid", ())
        return _oldest_first(Tenant.load(json.loads(doc)) for (doc,) in rows)

    def create_project(self, project: Project) -> None:
        self._execute("INSERT INTO projects (tenant_id, id, doc) VALUES (?, ?, ?)",
                     (project.tenant_id, project.id, project.model_dump_json(by_alias=True)))

    def get_project(self, tenant_id: str, project_id: str) -> Project:
        return load_one(Project, self._read("SELECT doc FROM projects WHERE tenant_id = ? AND "
                                            "id = ?", (tenant_id, project_id)),
                        f"project {project_id} not found")

    def list_projects(self, tenant_id: str) -> list[Project]:
        rows = self._read("SELECT doc FROM projects WHERE tenant_id = ? ORDER BY rowid",
                          (tenant_id,))
        return _oldest_first(Project.load(json.loads(doc)) for (doc,) in rows)

    def create_user(self, user: User) -> None:
        self._execute("INSERT INTO users (id, tenant_id, doc) VALUES (?, ?, ?)",
                     (user.id, user.tenant_id, user.model_dump_json(by_alias=True)))

    def list_users(self, tenant_id: str) -> list[User]:
        rows = self._read("SELECT doc FROM users WHERE tenant_id = ? ORDER BY rowid",
                          (tenant_id,))
        return _oldest_first(User.load(json.loads(doc)) for (doc,) in rows)

    def get_user(self, tenant_id: str, user_id: str) -> User:
        return load_one(User, self._read("SELECT doc FROM users WHERE id = ? AND tenant_id = ?",
                                         (user_id, tenant_id)), f"user {user_id} not found")

    def create_token(self, token: ApiToken) -> None:
        self._execute(
            "INSERT INTO api_tokens (id, tenant_id, user_id, token_hash, revoked, doc) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (token.id, token.tenant_id, token.user_id, token.token_hash, int(token.revoked),
             token.model_dump_json(by_alias=True)),
        )

    def list_tokens(self, tenant_id: str, user_id: str) -> list[ApiToken]:
        rows = self._read(
            "SELECT doc, revoked FROM api_tokens WHERE tenant_id = ? AND user_id = ? "
            "ORDER BY rowid", (tenant_id, user_id))
        return _oldest_first(_token(row) for row in rows)

    def revoke_token(self, tenant_id: str, token_id: str) -> None:
        cursor = self._execute(
            "UPDATE api_tokens SET revoked = 1, doc = json_set(doc, '$.revoked', json('true')) "
            "WHERE id = ? AND tenant_id = ?", (token_id, tenant_id))
        if cursor.rowcount == 0:
            raise NotFound(f"token {token_id} not found")

    def token_by_hash(self, token_hash: str) -> ApiToken | None:
        rows = self._read("SELECT doc, revoked FROM api_tokens WHERE token_hash = ? AND revoked = 0",
                          (token_hash,))
        return _token(rows[0]) if rows else None

    # ── sessions ──────────────────────────────────────────────────────────
    def create_session(self, session: Session) -> None:
        self._execute(
            "INSERT INTO sessions (id, tenant_id, user_id, created_ms, doc) VALUES (?, ?, ?, ?, ?)",
            (session.id, session.tenant_id, session.user_id, to_ms(session.created_at),
             session.model_dump_json(by_alias=True)),
        )

    def get_session(self, tenant_id: str, session_id: str) -> Session:
        return load_one(Session, self._read("SELECT doc FROM sessions WHERE id = ? AND "
                                            "tenant_id = ?", (session_id, tenant_id)),
                        f"session {session_id} not found")

    def list_sessions(self, tenant_id: str, user_id: str) -> list[Session]:
        rows = self._read(
            "SELECT doc FROM sessions WHERE tenant_id = ? AND user_id = ? "
            "ORDER BY created_ms DESC, rowid DESC",
            (tenant_id, user_id),
        )
        return [Session.load(json.loads(doc)) for (doc,) in rows]

    def set_chat_process(self, tenant_id: str, session_id: str, process_id: str) -> None:
        cursor = self._execute(
            "UPDATE sessions SET doc = json_set(doc, '$.chatProcessId', ?, '$.updatedAt', ?) "
            "WHERE id = ? AND tenant_id = ?",
            (process_id, _iso(utcnow()), session_id, tenant_id),
        )
        if cursor.rowcount == 0:
            raise NotFound(f"session {session_id} not found")

    def update_session_status(self, tenant_id: str, session_id: str, status: SessionStatus, *,
                              allowed_from: frozenset[SessionStatus],
                              suspend_cause: SuspendCause | None = None) -> Session:
        with self._write() as conn:
            row = conn.execute("SELECT doc FROM sessions WHERE id = ? AND tenant_id = ?",
                               (session_id, tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"session {session_id} not found")
            current = Session.load(json.loads(row[0]))
            if current.status not in allowed_from:
                raise Conflict(f"session {session_id} is {current.status.value}; cannot make it "
                               f"{status.value}")
            updated = current.model_copy(update={"status": status, "suspend_cause": suspend_cause,
                                                 "updated_at": utcnow()})
            conn.execute("UPDATE sessions SET doc = ? WHERE id = ?",
                         (updated.model_dump_json(by_alias=True), session_id))
        return updated

    def set_fingerprint(self, tenant_id: str, session_id: str,
                        fingerprint: Fingerprint) -> Session:
        with self._write() as conn:
            conn.execute(
                "UPDATE sessions SET doc = json_set(doc, '$.fingerprint', json(?)) "
                "WHERE id = ? AND tenant_id = ? AND json_extract(doc, '$.fingerprint') IS NULL",
                (fingerprint.model_dump_json(by_alias=True), session_id, tenant_id))
        return self.get_session(tenant_id, session_id)

    # ── processes ─────────────────────────────────────────────────────────
    def set_context_drift(self, tenant_id: str, process_id: str, drift: bool) -> None:
        cursor = self._execute(
            "UPDATE processes SET doc = json_set(doc, '$.contextDrift', json(?)) "
            "WHERE id = ? AND tenant_id = ?",
            ("true" if drift else "false", process_id, tenant_id))
        if cursor.rowcount == 0:
            raise NotFound(f"process {process_id} not found")

    def create_process(self, process: ThinkProcess) -> None:
        with self._write() as conn:
            _insert_process(conn, process)

    def get_process(self, tenant_id: str, process_id: str) -> ThinkProcess:
        rows = self._read(f"{_PROCESS_SELECT} WHERE l.process_id = ? AND l.tenant_id = ?",
                          (process_id, tenant_id))
        if not rows:
            raise NotFound(f"process {process_id} not found")
        return _process(rows[0])

    def list_processes(self, tenant_id: str, session_id: str) -> list[ThinkProcess]:
        rows = self._read(
            f"{_PROCESS_SELECT} WHERE p.tenant_id = ? AND p.session_id = ? "
            "ORDER BY p.created_ms, p.rowid",
            (tenant_id, session_id),
        )
        return [_process(row) for row in rows]

    def acquire_epoch(self, tenant_id: str, process_id: str) -> ThinkProcess:
        with self._write() as conn:
            row = conn.execute(f"{_PROCESS_SELECT} WHERE l.process_id = ? AND l.tenant_id = ?",
                               (process_id, tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"process {process_id} not found")
            doc, prior, epoch, *rest = row
            status = "RUNNING" if prior in _STARTS_TURN else prior
            conn.execute("UPDATE lanes SET epoch = ?, status = ? WHERE process_id = ?",
                         (epoch + 1, status, process_id))
        return _process((doc, prior, epoch + 1, *rest))

    def request_control(self, tenant_id: str, process_id: str, call: str,
                        allowed_from: frozenset[ProcessStatus]) -> ThinkProcess:
        call = str(call)
        with self._write() as conn:
            row = conn.execute(f"{_PROCESS_SELECT} WHERE l.process_id = ? AND l.tenant_id = ?",
                               (process_id, tenant_id)).fetchone()
            if row is None:
                raise NotFound(f"process {process_id} not found")
            doc, status, epoch, next_seq, _, _ = row
            allowed = {ProcessStatus(s).value for s in allowed_from}
            if status not in allowed:
                raise Conflict(f"cannot {call} process {process_id}: it is {status} "
                               f"(allowed from {', '.join(sorted(allowed)) or 'nothing'})")
            requested_ms = to_ms(utcnow())
            conn.execute(
                "UPDATE lanes SET pending_control = ?, control_requested_ms = ? "
                "WHERE process_id = ?",
                (call, requested_ms, process_id),
            )
        return _process((doc, status, epoch, next_seq, call, requested_ms))

    def commit_turn(self, tenant_id: str, process_id: str, epoch: int,
                    commit: TurnCommit) -> list[ChatMessage] | None:
        try:
            with self._write() as conn:
                return self._commit_in(conn, tenant_id, process_id, epoch, commit)
        except Fenced:
            return None

    def _commit_in(self, conn: sqlite3.Connection, tenant_id: str, process_id: str, epoch: int,
                   commit: TurnCommit) -> list[ChatMessage]:
        """The body of ``commit_turn``; raises ``Fenced`` to roll everything back."""
        row = conn.execute(
            "SELECT epoch, next_chat_seq FROM lanes WHERE process_id = ? AND tenant_id = ?",
            (process_id, tenant_id),
        ).fetchone()
        if row is None:
            raise NotFound(f"process {process_id} not found")
        current_epoch, chat_seq = row
        if current_epoch != epoch:
            raise Fenced(f"epoch {epoch} of {process_id} is stale (now {current_epoch})")
        now = utcnow()
        drained = list(dict.fromkeys(commit.drained_ids))
        if drained:
            # The conditional update is the "still undrained" check: fewer rows
            # than ids means another turn got there first (or a foreign id).
            cursor = conn.executemany(
                "UPDATE messages SET drained_at = ?, drained_epoch = ? "
                "WHERE id = ? AND tenant_id = ? AND target_process_id = ? AND drained_at IS NULL",
                [(_iso(now), epoch, mid, tenant_id, process_id) for mid in drained],
            )
            if cursor.rowcount != len(drained):
                raise Fenced(f"a message listed by this turn of {process_id} is already drained")
        written: list[ChatMessage] = []
        for line in commit.chat:
            line = line.model_copy(
                update={"seq": chat_seq + 1, "tenant_id": tenant_id, "process_id": process_id}
            )
            inserted = conn.execute(
                "INSERT INTO chat (id, tenant_id, process_id, seq, role, source_message_id, doc) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, process_id, source_message_id, role) "
                "WHERE source_message_id IS NOT NULL DO NOTHING",
                (line.id, tenant_id, process_id, line.seq, line.role.value,
                 line.source_message_id, line.model_dump_json(by_alias=True)),
            ).rowcount
            if inserted:
                written.append(line)
            chat_seq += inserted
        # Both CASEs read the row as it was before this UPDATE; a NULL
        # control_handled matches nothing, so a pending call is then kept.
        conn.execute(
            "UPDATE lanes SET status = ?, next_chat_seq = ?, "
            "pending_control = CASE WHEN pending_control = ? THEN NULL ELSE pending_control END, "
            "control_requested_ms = CASE WHEN pending_control = ? THEN NULL "
            "ELSE control_requested_ms END WHERE process_id = ?",
            (commit.status.value, chat_seq, commit.control_handled, commit.control_handled,
             process_id),
        )
        close_reason = commit.close_reason.value if commit.close_reason else None
        if commit.engine_state is None:
            conn.execute(_SET_OUTCOME, (close_reason, commit.last_error, _iso(now), process_id))
        else:
            conn.execute(_SET_OUTCOME_AND_STATE, (close_reason, commit.last_error, _iso(now),
                                                  to_json(commit.engine_state).decode(), process_id))
        for child in commit.spawned:
            _insert_process(conn, child)
        for message in commit.outbox:
            self._append_in(conn, message)
        record = commit.record.model_copy(
            update={"tenant_id": tenant_id, "process_id": process_id, "epoch": epoch})
        conn.execute(
            "INSERT INTO turns (id, tenant_id, process_id, epoch, doc) VALUES (?, ?, ?, ?, ?)",
            (record.id, tenant_id, process_id, record.epoch, record.model_dump_json(by_alias=True)),
        )
        return written

    # ── inbox ─────────────────────────────────────────────────────────────
    def append_message(self, message: InboxMessage) -> tuple[InboxMessage, bool]:
        with self._write() as conn:
            return self._append_in(conn, message)

    def _append_in(self, conn: sqlite3.Connection,
                   message: InboxMessage) -> tuple[InboxMessage, bool]:
        """``append_message`` inside an open write transaction (``_commit_in`` and the user
        Inbox's ``save_inbox_item`` use it too)."""
        tenant_id, target = message.tenant_id, message.target_process_id
        row = conn.execute(
            "SELECT next_seq FROM lanes WHERE process_id = ? AND tenant_id = ?",
            (target, tenant_id),
        ).fetchone()
        if row is None:
            raise NotFound(f"process {target} not found")
        if message.idempotency_key is not None:
            first = conn.execute(
                f"{_MESSAGE_SELECT} WHERE tenant_id = ? AND target_process_id = ? "
                "AND idempotency_key = ?",
                (tenant_id, target, message.idempotency_key),
            ).fetchone()
            if first is not None:
                return _message(first), False
        seq = row[0] + 1
        stored = message.model_copy(update={"seq": seq, "drained_at": None, "drained_epoch": None})
        conn.execute("UPDATE lanes SET next_seq = ? WHERE process_id = ?", (seq, target))
        conn.execute(
            "INSERT INTO messages (id, tenant_id, target_process_id, seq, idempotency_key, "
            "created_ms, doc) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (stored.id, tenant_id, target, seq, stored.idempotency_key,
             to_ms(stored.created_at), stored.model_dump_json(by_alias=True)),
        )
        return stored, True

    def pending_messages(self, tenant_id: str, process_id: str, limit: int = 1000) -> list[InboxMessage]:
        rows = self._read(
            f"{_MESSAGE_SELECT} WHERE tenant_id = ? AND target_process_id = ? "
            "AND drained_at IS NULL ORDER BY seq LIMIT ?",
            (tenant_id, process_id, limit),
        )
        return [_message(row) for row in rows]

    def stale_pending(self, older_than: datetime, limit: int = 100) -> list[tuple[str, str]]:
        # Oldest wait first; each branch walks its partial index (messages_stale,
        # lanes_control), so neither touches drained history or idle lanes.
        cutoff = to_ms(older_than)
        rows = self._read(
            "SELECT tenant_id, process_id FROM ("
            " SELECT m.tenant_id, m.target_process_id AS process_id, m.created_ms AS since"
            " FROM messages m JOIN lanes l"
            " ON l.process_id = m.target_process_id AND l.tenant_id = m.tenant_id"
            " WHERE m.drained_at IS NULL AND m.created_ms < ? AND l.status NOT IN (?, ?, ?)"
            " UNION ALL"
            " SELECT tenant_id, process_id, control_requested_ms FROM lanes"
            " WHERE pending_control IS NOT NULL AND control_requested_ms < ? AND status <> ?"
            ") GROUP BY tenant_id, process_id ORDER BY MIN(since) LIMIT ?",
            (cutoff, *_NOT_SWEPT, cutoff, "CLOSED", limit),
        )
        return [(tenant, process) for tenant, process in rows]

    # ── chat and audit ────────────────────────────────────────────────────
    def chat_history(
        self, tenant_id: str, process_id: str, *, before_seq: int | None = None, limit: int = 100
    ) -> list[ChatMessage]:
        rows = self._read(
            "SELECT doc FROM chat WHERE tenant_id = ? AND process_id = ? AND seq < ? "
            "ORDER BY seq DESC LIMIT ?",
            (tenant_id, process_id, before_seq if before_seq is not None else 2**62, limit),
        )
        return [ChatMessage.load(json.loads(doc)) for (doc,) in reversed(rows)]

    def turn_records(self, tenant_id: str, process_id: str) -> list[TurnRecord]:
        rows = self._read(
            "SELECT doc FROM turns WHERE tenant_id = ? AND process_id = ? ORDER BY epoch, rowid",
            (tenant_id, process_id),
        )
        return [TurnRecord.load(json.loads(doc)) for (doc,) in rows]


def _insert_process(conn: sqlite3.Connection, process: ThinkProcess) -> None:
    conn.execute(
        "INSERT INTO processes (id, tenant_id, session_id, created_ms, doc) "
        "VALUES (?, ?, ?, ?, ?)",
        (process.id, process.tenant_id, process.session_id, to_ms(process.created_at),
         process.model_dump_json(by_alias=True)),
    )
    conn.execute(
        "INSERT INTO lanes (process_id, tenant_id, status, epoch, next_seq, next_chat_seq, "
        "pending_control, control_requested_ms) VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
        (process.id, process.tenant_id, process.status.value, process.epoch,
         process.next_seq, process.pending_control,
         None if process.control_requested_at is None
         else to_ms(process.control_requested_at)),
    )

