"""PostgreSQL ``LaneStore``: tables ``messages``, ``chat``, ``turns`` and ``timers``, and the
``lanes`` row of each process (owned by ``sessions.py``).

Atomicity: every write is one transaction at READ COMMITTED that first locks the
process's ``lanes`` row ``FOR UPDATE``; that row orders everything of a lane.
``request_control`` reads and rewrites it under the lock. ``acquire_epoch`` is one
statement: a ``WITH`` query locks the row ``FOR UPDATE`` and reads it as it is once
locked (the latest version, also after waiting for another writer), and the ``UPDATE``
of the same statement rewrites it from that read and counts the attempt of its
messages. ``append_in`` locks the target's row, then looks its idempotency key up (a
statement run after the lock sees every append committed before it) and takes
``next_seq + 1``; a message without a key takes the lock, its number and its insert in
one statement (``UPDATE lanes … RETURNING`` in a ``WITH``, the ``INSERT`` reading it),
which is all of ``append_message`` then: sequence numbers are gap-free, and an
append's message becomes visible before the next append of that process can even read
``next_seq``, so they become visible in ``seq`` order. ``append_in`` is also how the
user Inbox's ``save_inbox_item`` appends its message in its own transaction.

``commit_turn`` locks its own lane and the lanes its outbox messages go to, in
``process_id`` order (``lane_lock_in``: two turns sending each other messages never
deadlock), checks the epoch, inserts the chat lines in one statement numbered from
``next_chat_seq`` (a line whose source is stored already is skipped and takes no
number: checked under the lock, with ``ON CONFLICT DO NOTHING`` behind it), spawns
processes (``insert_process_in``), appends outbox messages (``append_in``), marks dead
letters and upserts timers, then writes the lane, the process's outcome, the counts
given back, the journal's clearing (``journal.clear_statement``), the turn record, its
events (``event_outbox.enqueue_statement``), its token usage (``usage.add_statement``) and
the drain in one statement
(``_db.run_together``: they touch disjoint rows); the drain is its last part, a
conditional ``UPDATE`` whose row count the cursor reports: fewer rows than ids means
another turn got there first. All in that one transaction; being fenced raises inside
it, which rolls everything back. That is the commit of a turn that spawns, sends,
dead-letters or sets a timer; an ordinary turn's commit (none of these) is one
statement, a call of the function of ``commit_turn.sql`` (``_db.function``), which makes
the same writes under the same lock, the drain first (in a block of its own, undone and
reported as fenced when a message is already drained), and builds the outbox events
from the lines it wrote: a function's statements each read a snapshot taken when they
start, so after the lock they see every write committed before it, as the
transaction's statements do.

``fire_timer`` (``timers.py``, the ``TimerStore``) locks the timer's lane, then deletes the timer by (id, due time): of
two sweepers firing one timer at once, the second finds it gone and appends nothing.
A transaction that locks a lane and a timer locks the lane first (``commit_turn`` too).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from vancetope_brain.errors import Conflict, Fenced, NotFound
from vancetope_brain.models import (
    ChatMessage,
    Committed,
    InboxMessage,
    OutboxEvent,
    ProcessStatus,
    StepState,
    ThinkProcess,
    TurnCommit,
    TurnRecord,
    TurnStart,
    lifecycle,
    utcnow,
)
from vancetope_brain.store.event_outbox import CHAT_MESSAGE, turn_events
from vancetope_brain.store.lanes import LaneStore
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import (
    JsonDoc,
    doc_json,
    function,
    load_all,
    run_together,
)
from vancetope_brain.store.postgres.event_outbox import enqueue_statement
from vancetope_brain.store.postgres.journal import clear_statement as clear_journal
from vancetope_brain.store.postgres.sessions import (
    PROCESS_BY_ID,
    PROCESS_COLUMNS,
    UNSETTLED_LANES,
    insert_process_in,
    lane_lock_in,
    load_process,
    process_row_in,
)
from vancetope_brain.store.postgres.usage import add_statement as add_usage_statement
from vancetope_brain.store.postgres.usage import usage_json
from vancetope_brain.store.sql import iso, to_ms

_COMMIT_TURN = function("commit_turn").name

_TABLES = """
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, target_process_id TEXT NOT NULL,
    seq BIGINT NOT NULL, idempotency_key TEXT, created_ms BIGINT NOT NULL,
    drained_at TEXT, drained_epoch BIGINT, doc JSONB NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, dead_ms BIGINT
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
CREATE INDEX IF NOT EXISTS messages_dead ON messages (tenant_id, dead_ms)
    WHERE dead_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS chat (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    seq BIGINT NOT NULL, role TEXT NOT NULL, source_message_id TEXT, doc JSONB NOT NULL,
    row_no BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE UNIQUE INDEX IF NOT EXISTS chat_seq ON chat (tenant_id, process_id, seq);
CREATE UNIQUE INDEX IF NOT EXISTS chat_source
    ON chat (tenant_id, process_id, source_message_id, role)
    WHERE source_message_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    epoch BIGINT NOT NULL, doc JSONB NOT NULL,
    row_no BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX IF NOT EXISTS turns_by_process ON turns (tenant_id, process_id, epoch);
CREATE INDEX IF NOT EXISTS turns_by_lifecycle
    ON turns (tenant_id, process_id, (doc->>'lifecycle'), epoch);
CREATE TABLE IF NOT EXISTS timers (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, process_id TEXT NOT NULL,
    due_ms BIGINT NOT NULL, doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS timers_due ON timers (due_ms);
CREATE INDEX IF NOT EXISTS timers_by_process ON timers (tenant_id, process_id);
"""

_MIGRATIONS = {
    # 2: ``chat`` gains its insertion order (the transfer port exports chat in it, as SQLite
    # does by rowid); the rows already stored are numbered in the order the table is read.
    2: ("ALTER TABLE chat ADD COLUMN IF NOT EXISTS row_no BIGINT GENERATED ALWAYS AS IDENTITY",),
}

MESSAGE_SELECT = "SELECT doc, seq, drained_at, drained_epoch, attempts FROM messages"
# Only the fields a turn may change; status lives in ``lanes``.
_SET_OUTCOME = (
    "UPDATE processes SET doc = doc || jsonb_build_object('closeReason', %s::text, "
    "'lastError', %s::text, 'engineFailures', %s::integer, 'updatedAt', %s::text) "
    "WHERE id = %s"
)
_SET_OUTCOME_AND_STATE = (
    "UPDATE processes SET doc = doc || jsonb_build_object('closeReason', %s::text, "
    "'lastError', %s::text, 'engineFailures', %s::integer, 'updatedAt', %s::text, "
    "'engineState', %s::jsonb) WHERE id = %s"
)

MessageRow = tuple[dict[str, Any], int, str | None, int | None, int]

# One statement, so one snapshot: the process row, and its outbox's and inbox's first rows
# as arrays (a message as the ``MESSAGE_SELECT`` row in a JSON array), each through its
# index (event_outbox_by_process, messages_pending).
_TURN_START = (
    f"SELECT {PROCESS_COLUMNS}, "
    "ARRAY(SELECT e.doc FROM event_outbox e WHERE e.tenant_id = l.tenant_id "
    "AND e.process_id = l.process_id ORDER BY e.epoch, e.idx LIMIT %s), "
    "ARRAY(SELECT jsonb_build_array(m.doc, m.seq, m.drained_at, m.drained_epoch, m.attempts) "
    "FROM messages m WHERE m.tenant_id = l.tenant_id AND m.target_process_id = l.process_id "
    "AND m.drained_at IS NULL ORDER BY m.seq LIMIT %s) "
    "FROM lanes l JOIN processes p ON p.id = l.process_id "
    "WHERE l.process_id = %s AND l.tenant_id = %s"
)


def load_message(row: MessageRow) -> InboxMessage:
    """A message from a ``MESSAGE_SELECT`` row: ``doc`` with the columns over it."""
    doc, seq, drained_at, drained_epoch, attempts = row
    raw = dict(doc)
    raw.update(seq=seq, drainedAt=drained_at, drainedEpoch=drained_epoch, attempts=attempts)
    return InboxMessage.load(raw)


def _lane_in(conn: psycopg.Connection[Any], tenant_id: str, process_id: str,
             columns: str) -> tuple[Any, ...]:
    """Columns of the process's ``lanes`` row, locked ``FOR UPDATE`` until the transaction
    ends. Raises ``NotFound``."""
    row = conn.execute(f"SELECT {columns} FROM lanes WHERE process_id = %s AND tenant_id = %s "
                       "FOR UPDATE", (process_id, tenant_id)).fetchone()
    if row is None:
        raise NotFound(f"process {process_id} not found")
    return tuple(row)


def append_in(conn: psycopg.Connection[Any],
              message: InboxMessage) -> tuple[InboxMessage, bool]:
    """``append_message`` inside an open transaction (it locks the target's lane)."""
    if message.idempotency_key is None:
        # Nothing to look up under the lock: the lock, the number and the insert are one
        # statement (its UPDATE locks the row as FOR UPDATE does).
        return _insert_next(conn, message), True
    tenant_id, target = message.tenant_id, message.target_process_id
    _lane_in(conn, tenant_id, target, "1")
    first = conn.execute(
        f"{MESSAGE_SELECT} WHERE tenant_id = %s AND target_process_id = %s "
        "AND idempotency_key = %s",
        (tenant_id, target, message.idempotency_key),
    ).fetchone()
    if first is not None:
        return load_message(first), False
    return _insert_next(conn, message), True


def _insert_next(conn: psycopg.Connection[Any], message: InboxMessage) -> InboxMessage:
    """Insert ``message`` as the next number of its lane (``_next_statement``). Raises
    ``NotFound`` (inserting nothing) if the lane does not exist."""
    stored, sql, params = _next_statement(message)
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise NotFound(f"process {message.target_process_id} not found")
    return stored.model_copy(update={"seq": row[0]})


def _next_statement(message: InboxMessage) -> tuple[InboxMessage, str, tuple[Any, ...]]:
    """The message as stored but for its number, and the one statement that moves its
    lane's ``next_seq`` on (locking the row until the transaction ends) and inserts it
    under that number, returning the number (no row: no such lane, nothing inserted)."""
    stored = message.model_copy(update={"seq": 0, "drained_at": None, "drained_epoch": None,
                                        "attempts": 0, "dead_letter": None})
    return stored, (
        "WITH lane AS (UPDATE lanes SET next_seq = next_seq + 1 WHERE process_id = %s "
        "AND tenant_id = %s RETURNING next_seq) "
        "INSERT INTO messages (id, tenant_id, target_process_id, seq, idempotency_key, "
        "created_ms, doc) SELECT %s, %s, %s, next_seq, %s, %s, "
        "%s || jsonb_build_object('seq', next_seq) FROM lane RETURNING seq"), (
        message.target_process_id, message.tenant_id, stored.id, message.tenant_id,
        message.target_process_id, stored.idempotency_key, to_ms(stored.created_at),
        doc_json(stored))


def _commit_in(conn: psycopg.Connection[Any], tenant_id: str, process_id: str, epoch: int,
               commit: TurnCommit) -> Committed:
    """The body of ``commit_turn``; raises ``Fenced`` to roll everything back. Statements:
    the lock, the chat lines, then every other write of an ordinary turn in one statement
    (``run_together``); spawns, outbox messages, dead letters and timers add theirs."""
    lane_lock_in(conn, [process_id, *(m.target_process_id for m in commit.outbox)])
    current_epoch, chat_seq, session_id = _lane_in(
        conn, tenant_id, process_id,
        "epoch, next_chat_seq, (SELECT session_id FROM processes WHERE id = lanes.process_id)")
    if current_epoch != epoch:
        raise Fenced(f"epoch {epoch} of {process_id} is stale (now {current_epoch})")
    now = utcnow()
    written = _insert_chat_in(conn, tenant_id, process_id, chat_seq, commit.chat)
    for child in commit.spawned:
        insert_process_in(conn, child)
    for message in commit.outbox:
        append_in(conn, message)
    for mid, mark in commit.dead_letters.items():
        changed = conn.execute(
            "UPDATE messages SET drained_at = %s, drained_epoch = %s, dead_ms = %s, "
            "doc = doc || jsonb_build_object('deadLetter', %s::jsonb) "
            "WHERE id = %s AND tenant_id = %s AND target_process_id = %s "
            "AND drained_at IS NULL",
            (iso(now), epoch, to_ms(mark.at), doc_json(mark), mid,
             tenant_id, process_id)).rowcount
        if changed != 1:
            raise Fenced(f"a dead letter of this turn of {process_id} is already drained")
    if commit.timers:
        conn.cursor().executemany(
            "INSERT INTO timers (id, tenant_id, process_id, due_ms, doc) "
            "VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET due_ms = excluded.due_ms, doc = excluded.doc",
            [(timer.id, tenant_id, process_id, to_ms(timer.due_at),
              doc_json(timer)) for timer in commit.timers])
    events = turn_events(tenant_id, session_id, process_id, epoch, written, commit.events) \
        if written or commit.events else []
    drained = list(dict.fromkeys(commit.drained_ids))
    writes = [*_turn_writes(tenant_id, process_id, epoch, commit, drained,
                            written[-1].seq if written else chat_seq, iso(now)),
              *([enqueue_statement(events)] if events else []),
              *([add_usage_statement(commit.usage)] if commit.usage else [])]
    # The conditional update is the "still undrained" check: fewer rows than ids means
    # another turn got there first (or a foreign id). It is the last statement, whose
    # row count the cursor reports.
    writes.append((
        "UPDATE messages SET drained_at = %s, drained_epoch = %s "
        "WHERE id = ANY(%s) AND tenant_id = %s AND target_process_id = %s "
        "AND drained_at IS NULL",
        [iso(now), epoch, drained, tenant_id, process_id]))
    if run_together(conn, writes) != len(drained):
        raise Fenced(f"a message listed by this turn of {process_id} is already drained")
    return Committed(written, events)


def _insert_chat_in(conn: psycopg.Connection[Any], tenant_id: str, process_id: str,
                    chat_seq: int, lines: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Insert a turn's chat lines in one statement, numbered from ``chat_seq + 1`` in their
    order; a line whose (source message, role) is stored already, or came earlier in
    ``lines``, is skipped and takes no number. The transaction holds the lane's lock,
    under which every chat line of the process is written, so the check sees them all.
    Returns the lines written, with their numbers."""
    fresh = _fresh_lines(tenant_id, process_id, lines)
    if not fresh:
        return []
    rows = ", ".join(["(%s::int, %s::text, %s::text, %s::text, %s::jsonb)"] * len(fresh))
    numbered = dict(conn.execute(
        f"WITH line (ord, id, role, source_message_id, doc) AS (VALUES {rows}), "
        "fresh AS (SELECT line.*, %s + row_number() OVER (ORDER BY ord) AS seq FROM line "
        "WHERE source_message_id IS NULL OR NOT EXISTS (SELECT 1 FROM chat c "
        "WHERE c.tenant_id = %s AND c.process_id = %s "
        "AND c.source_message_id = line.source_message_id AND c.role = line.role)) "
        "INSERT INTO chat (id, tenant_id, process_id, seq, role, source_message_id, doc) "
        "SELECT id, %s, %s, seq, role, source_message_id, "
        "doc || jsonb_build_object('seq', seq) FROM fresh ORDER BY ord "
        "ON CONFLICT (tenant_id, process_id, source_message_id, role) "
        "WHERE source_message_id IS NOT NULL DO NOTHING RETURNING id, seq",
        [*(value for i, line in enumerate(fresh)
           for value in (i, line.id, line.role.value, line.source_message_id,
                         doc_json(line))),
         chat_seq, tenant_id, process_id, tenant_id, process_id]).fetchall())
    return [line.model_copy(update={"seq": numbered[line.id]})
            for line in fresh if line.id in numbered]


def _fresh_lines(tenant_id: str, process_id: str,
                 lines: Sequence[ChatMessage]) -> list[ChatMessage]:
    """A turn's chat lines as stored but for their numbers (``seq`` 0), in order, the first
    of each (source message, role) only."""
    fresh: dict[tuple[str, str] | str, ChatMessage] = {}
    for line in lines:
        key = (line.source_message_id, line.role.value) \
            if line.source_message_id is not None else line.id
        fresh.setdefault(key, line.model_copy(
            update={"seq": 0, "tenant_id": tenant_id, "process_id": process_id}))
    return list(fresh.values())


def _lines_json(tenant_id: str, process_id: str, lines: Sequence[ChatMessage]) -> JsonDoc:
    """A turn's chat lines as the JSON array ``vt_commit_turn`` takes (``_fresh_lines``)."""
    fresh = _fresh_lines(tenant_id, process_id, lines)
    return JsonDoc(f"[{','.join(doc_json(line) for line in fresh)}]")


def _turn_writes(tenant_id: str, process_id: str, epoch: int, commit: TurnCommit,
                 drained: list[str], chat_seq: int, now: str) -> list[tuple[str, list[Any]]]:
    """The writes of every commit that ``run_together`` joins: the lane, the process's
    outcome, the attempts of messages read but left pending, the journal, the turn record.
    Each touches rows none of the others (nor the drain) touches."""
    # Both CASEs read the row as it was before this UPDATE; a NULL
    # control_handled matches nothing, so a pending call is then kept.
    writes: list[tuple[str, list[Any]]] = [(
        "UPDATE lanes SET status = %s, next_chat_seq = %s, turn_attempts = 0, "
        "pending_control = CASE WHEN pending_control = %s THEN NULL "
        "ELSE pending_control END, "
        "control_requested_ms = CASE WHEN pending_control = %s THEN NULL "
        "ELSE control_requested_ms END WHERE process_id = %s",
        [commit.status.value, chat_seq, commit.control_handled, commit.control_handled,
         process_id])]
    close_reason = commit.close_reason.value if commit.close_reason else None
    outcome = [close_reason, commit.last_error, commit.engine_failures, now]
    if commit.engine_state is None:
        writes.append((_SET_OUTCOME, [*outcome, process_id]))
    else:
        writes.append((_SET_OUTCOME_AND_STATE,
                       [*outcome, doc_json(commit.engine_state), process_id]))
    # A message this turn drained or dead-lettered is not counted back (it is no longer
    # pending), and must not be written twice in one statement.
    read = set(drained) | set(commit.dead_letters)
    uncounted = [mid for mid in dict.fromkeys(commit.uncounted_ids) if mid not in read]
    if uncounted:
        writes.append((
            "UPDATE messages SET attempts = attempts - 1 WHERE id = ANY(%s) "
            "AND tenant_id = %s AND target_process_id = %s AND drained_at IS NULL "
            "AND attempts > 0", [uncounted, tenant_id, process_id]))
    closed = commit.status is ProcessStatus.CLOSED
    if closed or commit.journal_opened:
        writes.append(clear_journal(tenant_id, process_id, in_doubt=closed))
    record = commit.record.model_copy(
        update={"tenant_id": tenant_id, "process_id": process_id, "epoch": epoch})
    writes.append((
        "INSERT INTO turns (id, tenant_id, process_id, epoch, doc) VALUES (%s, %s, %s, %s, %s)",
        [record.id, tenant_id, process_id, record.epoch, doc_json(record)]))
    return writes


class PostgresLanes(PostgresAdapter, LaneStore):
    tables = _TABLES
    functions = ("commit_turn",)
    migrations = _MIGRATIONS

    def append_message(self, message: InboxMessage) -> tuple[InboxMessage, bool]:
        if message.idempotency_key is None:  # one statement: its own transaction
            stored, sql, params = _next_statement(message)
            rows = self.db.read(sql, params)
            if not rows:
                raise NotFound(f"process {message.target_process_id} not found")
            return stored.model_copy(update={"seq": rows[0][0]}), True
        with self.db.write() as conn:
            return append_in(conn, message)

    def pending_messages(self, tenant_id: str, process_id: str,
                         limit: int = 1000) -> list[InboxMessage]:
        rows = self.db.read(
            f"{MESSAGE_SELECT} WHERE tenant_id = %s AND target_process_id = %s "
            "AND drained_at IS NULL ORDER BY seq LIMIT %s",
            (tenant_id, process_id, limit),
        )
        return [load_message(row) for row in rows]

    def turn_start(self, tenant_id: str, process_id: str, *, messages: int,
                   events: int) -> TurnStart:
        rows = self.db.read(_TURN_START, (events, messages, process_id, tenant_id))
        if not rows:
            raise NotFound(f"process {process_id} not found")
        doc, status, epoch, next_seq, control, requested_ms, attempts, outbox, pending = rows[0]
        return TurnStart(
            process=load_process((doc, status, epoch, next_seq, control, requested_ms, attempts)),
            events=[OutboxEvent.load(event) for event in outbox],
            pending=[load_message((m[0], m[1], m[2], m[3], m[4])) for m in pending])

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
            " WHERE m.drained_at IS NULL AND m.created_ms < %s AND (l.status <> ALL(%s)"
            "  OR l.status = %s AND (SELECT p.doc->>'closeReason'"
            "   FROM processes p WHERE p.id = l.process_id) = %s)"
            " UNION ALL"
            " SELECT tenant_id, process_id, control_requested_ms FROM lanes"
            " WHERE pending_control IS NOT NULL AND control_requested_ms < %s AND status <> %s"
            ") waiting GROUP BY tenant_id, process_id ORDER BY MIN(since) LIMIT %s",
            (cutoff, held, closed, lifecycle.ANSWERS_WHEN_CLOSED.value, cutoff, closed,
             limit),
        )
        return [(tenant, process) for tenant, process in rows]

    def unsettled(self, limit: int = 100) -> list[tuple[str, str]]:
        rows = self.db.read(
            f"SELECT tenant_id, process_id FROM lanes WHERE {UNSETTLED_LANES} LIMIT %s",
            (limit,))
        return [(tenant, process) for tenant, process in rows]

    def acquire_epoch(self, tenant_id: str, process_id: str,
                      message_ids: Sequence[str] = ()) -> ThinkProcess:
        # One statement: ``locked`` locks the lane and reads the row as it is once locked
        # (what the UPDATE then rewrites, and the process returned); the attempts of its
        # messages are counted only if the lane exists.
        running = sorted(s.value for s in lifecycle.MARKED_RUNNING)
        rows = self.db.read(
            f"WITH locked AS ({PROCESS_BY_ID} FOR UPDATE OF l), "
            "lane AS (UPDATE lanes SET epoch = locked.epoch + 1, "
            "status = CASE WHEN locked.status = ANY(%s) THEN %s ELSE locked.status END, "
            "turn_attempts = locked.turn_attempts + 1 FROM locked "
            "WHERE lanes.process_id = %s), "
            "counted AS (UPDATE messages SET attempts = attempts + 1 WHERE id = ANY(%s) "
            "AND tenant_id = %s AND target_process_id = %s AND drained_at IS NULL "
            "AND EXISTS (SELECT 1 FROM locked)) "
            "SELECT * FROM locked",
            (process_id, tenant_id, running, ProcessStatus.RUNNING.value, process_id,
             list(dict.fromkeys(message_ids)), tenant_id, process_id))
        if not rows:
            raise NotFound(f"process {process_id} not found")
        doc, prior, epoch, next_seq, pending_control, requested_ms, attempts = rows[0]
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
                "UPDATE lanes SET pending_control = %s, control_requested_ms = %s "
                "WHERE process_id = %s",
                (call, requested_ms, process_id),
            )
        return load_process((doc, status, epoch, next_seq, call, requested_ms, attempts))

    def commit_turn(self, tenant_id: str, process_id: str, epoch: int,
                    commit: TurnCommit) -> Committed | None:
        if not (commit.spawned or commit.outbox or commit.dead_letters or commit.timers):
            return self._commit_ordinary(tenant_id, process_id, epoch, commit)
        try:
            with self.db.write() as conn:
                return _commit_in(conn, tenant_id, process_id, epoch, commit)
        except Fenced:
            return None

    def _commit_ordinary(self, tenant_id: str, process_id: str, epoch: int,
                         commit: TurnCommit) -> Committed | None:
        """``commit_turn`` of a turn that spawns, sends, dead-letters and sets nothing: one
        statement, the function ``vt_commit_turn`` (``commit_turn.sql``)."""
        now = utcnow()
        drained = list(dict.fromkeys(commit.drained_ids))
        read = set(drained)
        outcome: dict[str, Any] = {
            "closeReason": commit.close_reason.value if commit.close_reason else None,
            "lastError": commit.last_error, "engineFailures": commit.engine_failures,
            "updatedAt": iso(now)}
        if commit.engine_state is not None:
            outcome["engineState"] = commit.engine_state
        closed = commit.status is ProcessStatus.CLOSED
        record = commit.record.model_copy(
            update={"tenant_id": tenant_id, "process_id": process_id, "epoch": epoch})
        event = OutboxEvent(id="", tenant_id=tenant_id, session_id="", process_id=process_id,
                            epoch=epoch, index=0, type="", created_at=now)
        (result,) = self.db.read(
            f"SELECT {_COMMIT_TURN}(%s, %s, %s::bigint, %s, %s, %s::text, %s, %s::text[], "
            "%s, %s, %s, %s, %s, %s, %s, %s, %s::bigint, %s, %s::text[], %s)",
            (tenant_id, process_id, epoch, _lines_json(tenant_id, process_id, commit.chat),
             commit.status.value, commit.control_handled, doc_json(outcome),
             [mid for mid in dict.fromkeys(commit.uncounted_ids) if mid not in read],
             closed or commit.journal_opened, closed, StepState.IN_DOUBT.value, record.id,
             doc_json(record), doc_json(event),
             doc_json([{"type": e.type, "data": e.data} for e in commit.events]),
             CHAT_MESSAGE, to_ms(now), iso(now), drained, usage_json(commit.usage)))[0]
        if result["status"] == "missing":
            raise NotFound(f"process {process_id} not found")
        if result["status"] != "ok":
            return None
        return Committed(load_all(ChatMessage, ((doc,) for doc in result["lines"])),
                         load_all(OutboxEvent, ((doc,) for doc in result["events"])))

    def chat_history(
        self, tenant_id: str, process_id: str, *, before_seq: int | None = None, limit: int = 100
    ) -> list[ChatMessage]:
        rows = self.db.read(
            "SELECT doc FROM chat WHERE tenant_id = %s AND process_id = %s AND seq < %s "
            "ORDER BY seq DESC LIMIT %s",
            (tenant_id, process_id, before_seq if before_seq is not None else 2**62, limit),
        )
        return load_all(ChatMessage, reversed(rows))

    def turn_records(self, tenant_id: str, process_id: str, *, lifecycle: str | None = None,
                     last: int | None = None) -> list[TurnRecord]:
        where, args = "tenant_id = %s AND process_id = %s", [tenant_id, process_id]
        if lifecycle is not None:  # the expression of turns_by_lifecycle, word for word
            where, args = where + " AND doc->>'lifecycle' = %s", [*args, lifecycle]
        if last is None:
            return load_all(TurnRecord, self.db.read(
                f"SELECT doc FROM turns WHERE {where} ORDER BY epoch, row_no", tuple(args)))
        return load_all(TurnRecord, reversed(self.db.read(
            f"SELECT doc FROM turns WHERE {where} ORDER BY epoch DESC, row_no DESC LIMIT %s",
            (*args, last))))
