"""SQLite ``LaneStore``: tables ``messages``, ``chat``, ``turns`` and ``timers``, and the ``lanes`` row
of each process (owned by ``sessions.py``).

Atomicity: every write is one ``BEGIN IMMEDIATE`` transaction, which takes the
file's single write lock up front, so ``acquire_epoch``, ``request_control``,
``append_message`` and ``commit_turn`` are atomic across threads and
processes. ``commit_turn`` checks the epoch, drains, numbers chat lines,
spawns processes (``insert_process_in``), appends outbox messages
(``append_in``), records the turn, enqueues its events (the event outbox's
``enqueue_in``), adds its token usage (``usage.add_usage_in``) and clears the turn
journal (``journal.clear_in``) in that one transaction; being fenced
raises inside it, which rolls everything back. ``append_in`` is also how the
user Inbox's ``save_inbox_item`` appends its message in its own transaction.
Sequence numbers: ``lanes.next_seq`` / ``next_chat_seq`` are read and bumped
under the write lock, so they are gapless and in commit order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from pydantic_core import to_json

from vancetope_brain.errors import Conflict, Fenced, NotFound
from vancetope_brain.models import (
    ChatMessage,
    Committed,
    InboxMessage,
    ProcessStatus,
    ThinkProcess,
    TurnCommit,
    TurnRecord,
    TurnStart,
    lifecycle,
    utcnow,
)
from vancetope_brain.store.event_outbox import turn_events
from vancetope_brain.store.lanes import LaneStore, turn_start_read_by_read
from vancetope_brain.store.sql import iso, to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all, marks
from vancetope_brain.store.sqlite.event_outbox import enqueue_in
from vancetope_brain.store.sqlite.journal import clear_in as clear_journal_in
from vancetope_brain.store.sqlite.sessions import (
    UNSETTLED_LANES,
    insert_process_in,
    load_process,
    process_row_in,
)
from vancetope_brain.store.sqlite.usage import add_usage_in

_TABLES = """
-- (Columns added by a migration must be added in _MIGRATIONS too.)
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, target_process_id TEXT NOT NULL,
    seq INTEGER NOT NULL, idempotency_key TEXT, created_ms INTEGER NOT NULL,
    drained_at TEXT, drained_epoch INTEGER, doc TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, dead_ms INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_seq ON messages (tenant_id, target_process_id, seq);
CREATE UNIQUE INDEX IF NOT EXISTS messages_idempotency
    ON messages (tenant_id, target_process_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Partial indexes hold only pending rows, so a turn's inbox read and the
-- sweeper never walk drained history.
CREATE INDEX IF NOT EXISTS messages_pending
    ON messages (tenant_id, target_process_id, seq) WHERE drained_at IS NULL;
CREATE INDEX IF NOT EXISTS messages_stale ON messages (created_ms) WHERE drained_at IS NULL;
-- Dead letters only (``dead_letters.py``).
CREATE INDEX IF NOT EXISTS messages_dead ON messages (tenant_id, dead_ms) WHERE dead_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS chat (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    seq INTEGER NOT NULL, role TEXT NOT NULL, source_message_id TEXT, doc TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS chat_seq ON chat (tenant_id, process_id, seq);
CREATE UNIQUE INDEX IF NOT EXISTS chat_source
    ON chat (tenant_id, process_id, source_message_id, role)
    WHERE source_message_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    epoch INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_by_process ON turns (tenant_id, process_id, epoch);
CREATE INDEX IF NOT EXISTS turns_by_lifecycle
    ON turns (tenant_id, process_id, json_extract(doc, '$.lifecycle'), epoch);
CREATE TABLE IF NOT EXISTS timers (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    due_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS timers_due ON timers (due_ms);
"""

_MIGRATIONS = {
    7: ("ALTER TABLE messages ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE messages ADD COLUMN dead_ms INTEGER"),
}

MESSAGE_SELECT = "SELECT doc, seq, drained_at, drained_epoch, attempts FROM messages"
# Only the fields a turn may change; status lives in ``lanes``.
_SET_OUTCOME = (
    "UPDATE processes SET doc = json_set(doc, '$.closeReason', ?, '$.lastError', ?, "
    "'$.engineFailures', ?, '$.updatedAt', ?) WHERE id = ?"
)
_SET_OUTCOME_AND_STATE = (
    "UPDATE processes SET doc = json_set(doc, '$.closeReason', ?, '$.lastError', ?, "
    "'$.engineFailures', ?, '$.updatedAt', ?, '$.engineState', json(?)) WHERE id = ?"
)


def load_message(row: tuple[str, int, str | None, int | None, int]) -> InboxMessage:
    """A message from a ``MESSAGE_SELECT`` row: ``doc`` with the columns over it."""
    doc, seq, drained_at, drained_epoch, attempts = row
    raw = json.loads(doc)
    raw.update(seq=seq, drainedAt=drained_at, drainedEpoch=drained_epoch, attempts=attempts)
    return InboxMessage.load(raw)


def _lane_in(conn: sqlite3.Connection, tenant_id: str, process_id: str,
             columns: str) -> tuple[int, ...]:
    """Columns of the process's ``lanes`` row inside an open write transaction. Raises
    ``NotFound``."""
    row = conn.execute(f"SELECT {columns} FROM lanes WHERE process_id = ? AND tenant_id = ?",
                       (process_id, tenant_id)).fetchone()
    if row is None:
        raise NotFound(f"process {process_id} not found")
    return tuple(row)


def append_in(conn: sqlite3.Connection, message: InboxMessage) -> tuple[InboxMessage, bool]:
    """``append_message`` inside an open write transaction."""
    tenant_id, target = message.tenant_id, message.target_process_id
    (next_seq,) = _lane_in(conn, tenant_id, target, "next_seq")
    if message.idempotency_key is not None:
        first = conn.execute(
            f"{MESSAGE_SELECT} WHERE tenant_id = ? AND target_process_id = ? "
            "AND idempotency_key = ?",
            (tenant_id, target, message.idempotency_key),
        ).fetchone()
        if first is not None:
            return load_message(first), False
    seq = next_seq + 1
    stored = message.model_copy(update={"seq": seq, "drained_at": None, "drained_epoch": None,
                                        "attempts": 0, "dead_letter": None})
    conn.execute("UPDATE lanes SET next_seq = ? WHERE process_id = ?", (seq, target))
    conn.execute(
        "INSERT INTO messages (id, tenant_id, target_process_id, seq, idempotency_key, "
        "created_ms, doc) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (stored.id, tenant_id, target, seq, stored.idempotency_key,
         to_ms(stored.created_at), stored.model_dump_json(by_alias=True)),
    )
    return stored, True


def _commit_in(conn: sqlite3.Connection, tenant_id: str, process_id: str, epoch: int,
               commit: TurnCommit) -> Committed:
    """The body of ``commit_turn``; raises ``Fenced`` to roll everything back."""
    # The session id comes with the lane (one statement): the turn's events name it.
    row = conn.execute("SELECT l.epoch, l.next_chat_seq, p.session_id FROM lanes l "
                       "JOIN processes p ON p.id = l.process_id "
                       "WHERE l.process_id = ? AND l.tenant_id = ?",
                       (process_id, tenant_id)).fetchone()
    if row is None:
        raise NotFound(f"process {process_id} not found")
    current_epoch, chat_seq, session_id = row
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
            [(iso(now), epoch, mid, tenant_id, process_id) for mid in drained],
        )
        if cursor.rowcount != len(drained):
            raise Fenced(f"a message listed by this turn of {process_id} is already drained")
    if commit.dead_letters:
        cursor = conn.executemany(
            "UPDATE messages SET drained_at = ?, drained_epoch = ?, dead_ms = ?, "
            "doc = json_set(doc, '$.deadLetter', json(?)) "
            "WHERE id = ? AND tenant_id = ? AND target_process_id = ? AND drained_at IS NULL",
            [(iso(now), epoch, to_ms(mark.at), mark.model_dump_json(by_alias=True), mid,
              tenant_id, process_id) for mid, mark in commit.dead_letters.items()],
        )
        if cursor.rowcount != len(commit.dead_letters):
            raise Fenced(f"a dead letter of this turn of {process_id} is already drained")
    if commit.uncounted_ids:  # nearly always empty: a turn reads what it counted
        conn.executemany(
            "UPDATE messages SET attempts = attempts - 1 WHERE id = ? AND tenant_id = ? "
            "AND target_process_id = ? AND drained_at IS NULL AND attempts > 0",
            [(mid, tenant_id, process_id) for mid in dict.fromkeys(commit.uncounted_ids)])
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
        "UPDATE lanes SET status = ?, next_chat_seq = ?, turn_attempts = 0, "
        "pending_control = CASE WHEN pending_control = ? THEN NULL ELSE pending_control END, "
        "control_requested_ms = CASE WHEN pending_control = ? THEN NULL "
        "ELSE control_requested_ms END WHERE process_id = ?",
        (commit.status.value, chat_seq, commit.control_handled, commit.control_handled,
         process_id),
    )
    close_reason = commit.close_reason.value if commit.close_reason else None
    outcome = (close_reason, commit.last_error, commit.engine_failures, iso(now))
    if commit.engine_state is None:
        conn.execute(_SET_OUTCOME, (*outcome, process_id))
    else:
        conn.execute(_SET_OUTCOME_AND_STATE,
                     (*outcome, to_json(commit.engine_state).decode(), process_id))
    for child in commit.spawned:
        insert_process_in(conn, child)
    for message in commit.outbox:
        append_in(conn, message)
    closed = commit.status is ProcessStatus.CLOSED
    if closed or commit.journal_opened:
        clear_journal_in(conn, tenant_id, process_id, in_doubt=closed)
    for timer in commit.timers:
        conn.execute(
            "INSERT INTO timers (id, tenant_id, process_id, due_ms, doc) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET due_ms = excluded.due_ms, doc = excluded.doc",
            (timer.id, tenant_id, process_id, to_ms(timer.due_at),
             timer.model_dump_json(by_alias=True)))
    record = commit.record.model_copy(
        update={"tenant_id": tenant_id, "process_id": process_id, "epoch": epoch})
    conn.execute(
        "INSERT INTO turns (id, tenant_id, process_id, epoch, doc) VALUES (?, ?, ?, ?, ?)",
        (record.id, tenant_id, process_id, record.epoch, record.model_dump_json(by_alias=True)),
    )
    if commit.usage:
        add_usage_in(conn, commit.usage)
    events = []
    if written or commit.events:
        events = turn_events(tenant_id, session_id, process_id, epoch, written, commit.events)
        enqueue_in(conn, events)
    return Committed(written, events)


class SqliteLanes(SqliteAdapter, LaneStore):
    tables = _TABLES
    migrations = _MIGRATIONS

    def append_message(self, message: InboxMessage) -> tuple[InboxMessage, bool]:
        with self.db.write() as conn:
            return append_in(conn, message)

    def pending_messages(self, tenant_id: str, process_id: str,
                         limit: int = 1000) -> list[InboxMessage]:
        rows = self.db.read(
            f"{MESSAGE_SELECT} WHERE tenant_id = ? AND target_process_id = ? "
            "AND drained_at IS NULL ORDER BY seq LIMIT ?",
            (tenant_id, process_id, limit),
        )
        return [load_message(row) for row in rows]

    def turn_start(self, tenant_id: str, process_id: str, *, messages: int,
                   events: int) -> TurnStart:
        return turn_start_read_by_read(self.db, tenant_id, process_id, messages=messages,
                                       events=events)

    def stale_pending(self, older_than: datetime, limit: int = 100) -> list[tuple[str, str]]:
        # Oldest wait first; each branch walks its partial index (messages_stale,
        # lanes_control), so neither touches drained history or idle lanes.
        cutoff = to_ms(older_than)
        held = sorted(s.value for s in lifecycle.HOLDS_MESSAGES)
        closed = ProcessStatus.CLOSED.value
        rows = self.db.read(
            "SELECT tenant_id, process_id FROM ("
            " SELECT m.tenant_id, m.target_process_id AS process_id, m.created_ms AS since"
            " FROM messages m JOIN lanes l"
            " ON l.process_id = m.target_process_id AND l.tenant_id = m.tenant_id"
            f" WHERE m.drained_at IS NULL AND m.created_ms < ? AND (l.status NOT IN"
            f"  {marks(held)}"
            "  OR l.status = ? AND (SELECT json_extract(p.doc, '$.closeReason')"
            "   FROM processes p WHERE p.id = l.process_id) = ?)"
            " UNION ALL"
            " SELECT tenant_id, process_id, control_requested_ms FROM lanes"
            " WHERE pending_control IS NOT NULL AND control_requested_ms < ? AND status <> ?"
            ") GROUP BY tenant_id, process_id ORDER BY MIN(since) LIMIT ?",
            (cutoff, *held, closed, lifecycle.ANSWERS_WHEN_CLOSED.value, cutoff, closed,
             limit),
        )
        return [(tenant, process) for tenant, process in rows]

    def unsettled(self, limit: int = 100) -> list[tuple[str, str]]:
        rows = self.db.read(
            f"SELECT tenant_id, process_id FROM lanes WHERE {UNSETTLED_LANES} LIMIT ?",
            (limit,))
        return [(tenant, process) for tenant, process in rows]

    def acquire_epoch(self, tenant_id: str, process_id: str,
                      message_ids: Sequence[str] = ()) -> ThinkProcess:
        with self.db.write() as conn:
            doc, prior, epoch, next_seq, pending_control, requested_ms, attempts = \
                process_row_in(conn, tenant_id, process_id)
            status = ProcessStatus.RUNNING.value \
                if ProcessStatus(prior) in lifecycle.MARKED_RUNNING else prior
            conn.execute("UPDATE lanes SET epoch = ?, status = ?, turn_attempts = ? "
                         "WHERE process_id = ?", (epoch + 1, status, attempts + 1, process_id))
            conn.executemany(
                "UPDATE messages SET attempts = attempts + 1 WHERE id = ? AND tenant_id = ? "
                "AND target_process_id = ? AND drained_at IS NULL",
                [(mid, tenant_id, process_id) for mid in dict.fromkeys(message_ids)])
        return load_process((doc, prior, epoch + 1, next_seq, pending_control, requested_ms,
                             attempts))

    def request_control(self, tenant_id: str, process_id: str, call: str,
                        allowed_from: frozenset[ProcessStatus]) -> ThinkProcess:
        call = str(call)
        with self.db.write() as conn:
            doc, status, epoch, next_seq, _, _, attempts = process_row_in(conn, tenant_id,
                                                                          process_id)
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
        return load_process((doc, status, epoch, next_seq, call, requested_ms, attempts))

    def commit_turn(self, tenant_id: str, process_id: str, epoch: int,
                    commit: TurnCommit) -> Committed | None:
        try:
            with self.db.write() as conn:
                return _commit_in(conn, tenant_id, process_id, epoch, commit)
        except Fenced:
            return None

    def chat_history(
        self, tenant_id: str, process_id: str, *, before_seq: int | None = None, limit: int = 100
    ) -> list[ChatMessage]:
        rows = self.db.read(
            "SELECT doc FROM chat WHERE tenant_id = ? AND process_id = ? AND seq < ? "
            "ORDER BY seq DESC LIMIT ?",
            (tenant_id, process_id, before_seq if before_seq is not None else 2**62, limit),
        )
        return load_all(ChatMessage, reversed(rows))

    def turn_records(self, tenant_id: str, process_id: str, *, lifecycle: str | None = None,
                     last: int | None = None) -> list[TurnRecord]:
        where, args = "tenant_id = ? AND process_id = ?", [tenant_id, process_id]
        if lifecycle is not None:  # the expression of turns_by_lifecycle, word for word
            where, args = where + " AND json_extract(doc, '$.lifecycle') = ?", [*args, lifecycle]
        if last is None:
            return load_all(TurnRecord, self.db.read(
                f"SELECT doc FROM turns WHERE {where} ORDER BY epoch, rowid", tuple(args)))
        return load_all(TurnRecord, reversed(self.db.read(
            f"SELECT doc FROM turns WHERE {where} ORDER BY epoch DESC, rowid DESC LIMIT ?",
            (*args, last))))
