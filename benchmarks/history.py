"""Flat as history grows: lane turns against an empty store and against one that already holds
a long history, and the store's size as it grows.

    python benchmarks/history.py                        # 1M messages, 100k turns; 100 × 10
    python benchmarks/history.py --explain              # only the query plans of a turn
    python benchmarks/history.py --history-messages 100000 --no-peer   # a quick run

What it does (all on 127.0.0.1):

1. **Templates**: one real session, its chat process, an INIT turn and one steered turn,
   written by the product itself (``build_gateway`` + the worker's ``LaneRunner`` with the
   zero-latency model of ``bench_worker.py``) into a scratch SQLite file. Every seeded row
   is a copy of one of those rows (``tenants``, ``projects``, ``users``, ``sessions``,
   ``processes``, ``lanes``, ``messages``, ``chat``, ``turns``) with new ids, seqs, times
   and texts, so the seeded store holds exactly what the product writes.
2. **Seeding** (bulk ``executemany`` in the store's own schema, 20,000 rows a transaction):
   ``--tenants`` tenants with ``--users`` users each; sessions of 2 processes each (the chat
   and a second one), every process with ``--per-process`` drained messages of history.
   History comes in turns of 1–19 messages (``--history-messages`` ÷ ``--history-turns``
   a turn on average, as a turn drains everything pending): each turn leaves its messages
   (drained), one user chat line per message, one assistant line and one turn record.
   ``--own-share`` of the history (default 10 %) goes to the benchmark's own processes,
   given to them once their sessions exist (``lane_turns.run``'s ``after_connect``):
   their lanes' seqs and epochs move on past it, so their next turns read and number
   after a long history, as a long-lived chat's would. The other processes' history is
   built once per size into ``--cache`` (reused by later runs with the same sizes).
   Sizes: ``--sizes`` fractions of the full history; the store's bytes (after a WAL
   checkpoint) are printed at each, with bytes per row.
3. **Runs**: ``lane_turns.run`` (the whole distributed path, see ``lane_turns.py``; its
   options pass through) on an empty store and on each ``--run-sizes`` store, back to back
   (``--rounds`` times, alternating), and a table of the seeded figures against the empty
   ones: turns/s and CPU ms per turn of the closed phase, latency p50/p99 of the seq and
   paced phases, and their ratios (the target: within 10 %).
4. **Query plans** (``--explain``, also run after the runs): every SQL statement a steer and
   a turn make (``sqlite3`` trace callback on the product's connections, in-process, on the
   seeded store) with its ``EXPLAIN QUERY PLAN`` and its time on the empty and the seeded
   store; a plan that scans a table or sorts into a temporary b-tree is flagged.
5. The bare Celery round trip and the LangGraph peer (``_compare.py``), once.

``--store postgres`` (``benchmarks/_store.py``): the same on PostgreSQL. The templates are
still written by the product into SQLite (their documents are the product's JSON text);
the seeding copies them into the PostgreSQL tables of ``vancetope_brain/store/postgres``
(the same columns but ``row_no``, which PostgreSQL numbers itself): sessions, processes and
lanes by ``COPY``, the history by ``INSERT … SELECT`` over ``generate_series`` on the
server with the same numbering (``PgSeeder``), every index and the session search's GIN
index on ``chat`` kept as the product keeps them, then ``VACUUM ANALYZE`` (statistics and
hint bits, as autovacuum leaves a long-lived store). A size kept for the runs is a
database ``vt_hist_<key hash>_<size>`` on the server (``CREATE DATABASE … TEMPLATE``),
reused by later runs of the same sizes like the SQLite cache files (its sizes and counts
in ``--cache``; ``DROP DATABASE`` to free it); each run's database is created from it.
The store's size is that of its tables with their indexes and TOAST. The query plans:
the statements are recorded by a psycopg cursor class of ours on the product's pooled
connections (``pg_stat_statements`` is not preloaded on these servers) with their
parameters spliced in, then ``EXPLAIN``-ed (a sequential scan or a sort is flagged) and
timed as literal SQL in a rolled-back transaction (so they are parsed and planned each
time, where the product's are prepared after 5 executions).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _compare  # noqa: E402
import _store  # noqa: E402
import lane_turns  # noqa: E402
from _redis import check_url, claimed_db, reset  # noqa: E402

TPL_TENANT, TPL_USER = "tplTenant0", "tplUser0"
MARK = "SEEDMARK"
BATCH = 20000
_TEXT = ("the of and to in is that for it as was with be by on not he this are or his from at "
         "which but have an they you were her she there been one all we their has would when "
         "if so no will more can out up other into could time some them only do new about "
         "report process worker summary question answer project result file data plan")
WORDS = _TEXT.split()
SEED_TABLES = ("tenants", "projects", "users", "sessions", "processes", "lanes", "messages",
               "chat", "turns")


# ── templates: the rows the product writes ──────────────────────────────────────────────

def _sub(text: str, subs: list[tuple[str, str]]) -> str:
    """``text`` with each ``old`` replaced by ``new``; every ``old`` must be there."""
    for old, new in subs:
        if old not in text:
            raise RuntimeError(f"template: {old!r} not found in {text[:200]!r}…")
        text = text.replace(old, new)
    return text


def _sql_replace(column: str, keys: dict[str, str]) -> str:
    """SQL that fills the ``@KEY@`` placeholders of ``column`` with the given expressions."""
    for key, expr in keys.items():
        column = f"replace({column}, '@{key}@', {expr})"
    return column


@dataclasses.dataclass
class Templates:
    columns: dict[str, list[str]]
    rows: dict[str, list[tuple[Any, ...]]]


def make_templates(redis_url: str, tmp: Path) -> Templates:
    """One session, its chat process, its INIT turn and one steered turn, by the product."""
    path = tmp / "template.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VANCETOPE_", "OPENAI_"))}
    env.update(VANCETOPE_REDIS_URL=redis_url, VANCETOPE_STORE_URL=f"sqlite:///{path}",
               VANCETOPE_DATA_DIR=str(tmp))
    from _inproc import in_process

    from vancetope_brain.identity import Principal

    product = in_process(env)
    worker, brain = product.worker, product.brain
    try:
        brain.identity.create_tenant(TPL_TENANT, TPL_TENANT)
        brain.identity.create_user(TPL_TENANT, TPL_USER, TPL_USER)
        who = Principal(TPL_TENANT, TPL_USER)
        session = brain.sessions.create_interactive(who, "history")
        pid = session.chat_process_id
        assert pid is not None
        for step in ("init", "steer"):
            if step == "steer":
                brain.sessions.steer(who, pid, MARK)
            outcome = worker.runner.run(TPL_TENANT, pid)
            if outcome.value != "committed":
                raise RuntimeError(f"template {step} turn: {outcome}")
    finally:
        product.close()
    conn = sqlite3.connect(path)
    try:
        columns, rows = {}, {}
        for table in SEED_TABLES:
            cur = conn.execute(f"SELECT * FROM {table} ORDER BY rowid")
            columns[table] = [d[0] for d in cur.description]
            rows[table] = cur.fetchall()
    finally:
        conn.close()
    counts = {t: len(r) for t, r in rows.items()}
    expected = {"tenants": 1, "users": 1, "sessions": 1, "processes": 1, "lanes": 1,
                "messages": 1, "chat": 3, "turns": 2}
    if any(counts[t] != n for t, n in expected.items()):
        raise RuntimeError(f"the template turns wrote {counts}, expected {expected} "
                           "(the product changed: adapt history.py)")
    return Templates(columns, rows)


# ── seeding ─────────────────────────────────────────────────────────────────────────────

# SQL: a time as the product's documents spell it (``2026-12-02T01:31:45.170000Z``).
_ISO = "(strftime('%Y-%m-%dT%H:%M:%f', ({}) / 1000.0, 'unixepoch') || '000Z')"
_NEW_ID = "('{}_' || lower(hex(randomblob(8))))"
_LOREM = " ".join(random.Random(16).choices(WORDS, k=1200))

_SEED_TEMP = """
CREATE TEMP TABLE IF NOT EXISTS seed_procs (
    pid TEXT PRIMARY KEY, tid TEXT, uid TEXT, sid TEXT,
    n INTEGER, seq0 INTEGER, chat0 INTEGER, epoch0 INTEGER, base_ms INTEGER);
CREATE TEMP TABLE IF NOT EXISTS seed_n (m INTEGER PRIMARY KEY);
CREATE TEMP TABLE IF NOT EXISTS seed_turns (
    pid TEXT, tid TEXT, sid TEXT, epoch INTEGER, cnt INTEGER, drained TEXT,
    started INTEGER, ended INTEGER, chat_seq INTEGER)
"""


class Seeder:
    """Clones the template rows into ``conn``: sessions and processes from Python (batched
    ``executemany``), the history of a batch of processes in SQL (``INSERT … SELECT`` with
    the template documents' values replaced, so SQLite's C code does the bulk)."""

    def __init__(self, conn: sqlite3.Connection, tpl: Templates, turn_size: int) -> None:
        self.conn, self.tpl, self.k = conn, tpl, turn_size
        self.batches: dict[str, list[tuple[Any, ...]]] = {t: [] for t in SEED_TABLES}
        self.procs: list[tuple[Any, ...]] = []
        self.counts = dict.fromkeys(("messages", "chat", "turns"), 0)
        self.temp_tables()
        r = tpl.rows
        self.idx = {t: {name: i for i, name in enumerate(tpl.columns[t])} for t in SEED_TABLES}
        sess, proc, msg = r["sessions"][0], r["processes"][0], r["messages"][0]
        welcome, user_line, reply = r["chat"]
        start, steer = r["turns"]
        sid, pid, mid = sess[0], proc[0], msg[0]
        ids = [(TPL_TENANT, "@TID@"), (TPL_USER, "@UID@"), (sid, "@SID@"), (pid, "@PID@")]
        self.rows = r
        self.t_tenant = [_sub(self._doc("tenants", row), [(TPL_TENANT, "@TID@")])
                         for row in r["tenants"]]
        self.t_project = [_sub(self._doc("projects", row), [(TPL_TENANT, "@TID@")])
                          for row in r["projects"]]
        self.t_user = _sub(self._doc("users", r["users"][0]),
                           [(TPL_TENANT, "@TID@"), (TPL_USER, "@UID@")])
        self.t_session = _sub(self._doc("sessions", sess), ids)
        self.t_process = _sub(self._doc("processes", proc), ids)
        self.t_welcome = _sub(self._doc("chat", welcome),
                              [(welcome[0], "@CID@"), *ids[:1], *ids[2:]])
        self.t_start = _sub(self._doc("turns", start),
                            [(start[0], "@ID@"), ids[0], ids[3]])
        msg_doc = self._doc("messages", msg)
        self.t_message = _sub(msg_doc, [
            (mid, "@MID@"), *ids[:2], ids[3], (f'"content":"{MARK}"', '"content":"@TEXT@"'),
            ('"seq":1,', '"seq":@SEQ@,'), (json.loads(msg_doc)["createdAt"], "@AT@")])
        chat_ids = [ids[0], ids[2], ids[3]]
        line_doc, reply_doc = self._doc("chat", user_line), self._doc("chat", reply)
        self.t_user_line = _sub(line_doc, [
            (user_line[0], "@CID@"), (mid, "@MID@"), *chat_ids,
            (f'"content":"{MARK}"', '"content":"@TEXT@"'), ('"seq":2,', '"seq":@SEQ@,'),
            (json.loads(line_doc)["createdAt"], "@AT@")])
        self.t_reply = _sub(reply_doc, [
            (reply[0], "@CID@"), *chat_ids, ('"content":"pong"', '"content":"@TEXT@"'),
            ('"seq":3,', '"seq":@SEQ@,'), (json.loads(reply_doc)["createdAt"], "@AT@")])
        steer_doc = self._doc("turns", steer)
        parsed = json.loads(steer_doc)
        self.t_turn = _sub(steer_doc, [
            (steer[0], "@ID@"), ids[0], ids[3], ('"epoch":2,', '"epoch":@EPOCH@,'),
            (json.dumps(parsed["drainedIds"], separators=(",", ":")), "@DRAINED@"),
            (parsed["startedAt"], "@STARTED@"), (parsed["endedAt"], "@ENDED@")])

    def temp_tables(self) -> None:
        for statement in _SEED_TEMP.split(";"):
            self.conn.execute(statement)

    def _doc(self, table: str, row: tuple[Any, ...]) -> str:
        return str(row[self.idx[table]["doc"]])

    # rows from Python
    def _add(self, table: str, row: tuple[Any, ...]) -> None:
        self.batches[table].append(row)

    def _clone(self, table: str, template_row: tuple[Any, ...], doc: str,
               **columns: Any) -> tuple[Any, ...]:
        row = list(template_row)
        for name, value in columns.items():
            row[self.idx[table][name]] = value
        row[self.idx[table]["doc"]] = doc
        return tuple(row)

    @staticmethod
    def _fill(doc: str, **values: Any) -> str:
        for key, value in values.items():
            doc = doc.replace(f"@{key.upper()}@", str(value))
        return doc

    def tenant(self, tid: str) -> None:
        for doc, row in zip(self.t_tenant, self.rows["tenants"], strict=True):
            self._add("tenants", self._clone("tenants", row, self._fill(doc, tid=tid), id=tid))
        for doc, row in zip(self.t_project, self.rows["projects"], strict=True):
            self._add("projects", self._clone("projects", row, self._fill(doc, tid=tid),
                                              tenant_id=tid))

    def user(self, tid: str, uid: str) -> None:
        self._add("users", self._clone("users", self.rows["users"][0],
                                       self._fill(self.t_user, tid=tid, uid=uid),
                                       id=uid, tenant_id=tid))

    def session(self, tid: str, uid: str, sid: str, chat_pid: str, created_ms: int) -> None:
        self._add("sessions", self._clone(
            "sessions", self.rows["sessions"][0],
            self._fill(self.t_session, tid=tid, uid=uid, sid=sid, pid=chat_pid),
            id=sid, tenant_id=tid, user_id=uid, created_ms=created_ms))

    def process(self, tid: str, uid: str, sid: str, pid: str, created_ms: int,
                messages: int) -> None:
        """A process as its INIT turn leaves it (welcome line, start turn), then ``messages``
        of history (written by the next ``flush``)."""
        self._add("processes", self._clone(
            "processes", self.rows["processes"][0],
            self._fill(self.t_process, tid=tid, uid=uid, sid=sid, pid=pid),
            id=pid, tenant_id=tid, session_id=sid, created_ms=created_ms))
        cid, turn_id = new_id("chat"), new_id("turn")
        self._add("chat", self._clone("chat", self.rows["chat"][0], self._fill(
            self.t_welcome, cid=cid, tid=tid, sid=sid, pid=pid), id=cid, tenant_id=tid,
            process_id=pid))
        self._add("turns", self._clone("turns", self.rows["turns"][0], self._fill(
            self.t_start, id=turn_id, tid=tid, pid=pid), id=turn_id, tenant_id=tid,
            process_id=pid))
        self.counts["chat"] += 1
        self.counts["turns"] += 1
        epoch, seq, chat_seq = self.after(messages, 1, 0, 1)
        row = list(self.rows["lanes"][0])
        i = self.idx["lanes"]
        row[i["process_id"]], row[i["tenant_id"]], row[i["status"]] = pid, tid, "IDLE"
        row[i["epoch"]], row[i["next_seq"]], row[i["next_chat_seq"]] = epoch, seq, chat_seq
        self._add("lanes", tuple(row))
        self.history(tid, uid, sid, pid, messages, epoch=1, seq=0, chat_seq=1,
                     t0_ms=created_ms + 1000)

    def after(self, messages: int, epoch: int, seq: int, chat_seq: int) -> tuple[int, int, int]:
        """Epoch, seq and chat seq of a lane after ``messages`` more of history."""
        turns = -(-messages // self.k)
        return epoch + turns, seq + messages, chat_seq + messages + turns

    def history(self, tid: str, uid: str, sid: str, pid: str, messages: int, *, epoch: int,
                seq: int, chat_seq: int, t0_ms: int) -> None:
        """``messages`` drained messages after ``epoch``/``seq``/``chat_seq``, in turns of
        ``turn_size`` (the last one shorter): each turn its messages, a user line per
        message, one assistant line, one turn record. Written by the next ``flush``."""
        if messages > 0:
            self.procs.append((pid, tid, uid, sid, messages, seq, chat_seq, epoch, t0_ms))

    def flush(self) -> None:
        conn = self.conn
        conn.execute("BEGIN")
        for table, rows in self.batches.items():
            if rows:
                cols = self.tpl.columns[table]
                conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
                                 f"({', '.join('?' * len(cols))})", rows)
                rows.clear()
        if self.procs:
            self._history_sql()
        conn.execute("COMMIT")

    def _history_sql(self) -> None:
        conn, k = self.conn, self.k
        conn.execute("DELETE FROM seed_procs")
        conn.executemany("INSERT INTO seed_procs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", self.procs)
        top = max(p[4] for p in self.procs)
        have = conn.execute("SELECT COALESCE(MAX(m), 0) FROM seed_n").fetchone()[0]
        if top > have:
            conn.execute("WITH RECURSIVE c(m) AS (SELECT ? UNION ALL SELECT m + 1 FROM c "
                         "WHERE m < ?) INSERT INTO seed_n SELECT m FROM c", (have + 1, top))
        # Messages: seq0 + m; turn t = (m - 1) / k + 1 drains them (epoch0 + t); a message
        # is sent a minute after the one before and drained 50 ms later.
        doc = _sql_replace("?", {"MID": "mid", "TID": "tid", "UID": "uid", "PID": "pid",
                                 "TEXT": "text", "SEQ": "seq", "AT": _ISO.format("at")})
        conn.execute(
            "WITH r AS MATERIALIZED (SELECT " + _NEW_ID.format("msg") + " AS mid, p.tid, p.uid,"
            " p.pid, p.seq0 + s.m AS seq, p.base_ms + s.m * 60000 AS at,"
            " p.epoch0 + (s.m - 1) / ? + 1 AS epoch,"
            " substr(?, 1 + abs(random()) % 4000, 15 + abs(random()) % 180) AS text"
            " FROM seed_procs p JOIN seed_n s ON s.m <= p.n)"
            " INSERT INTO messages (id, tenant_id, target_process_id, seq, idempotency_key,"
            " created_ms, drained_at, drained_epoch, doc, attempts, dead_ms)"
            f" SELECT mid, tid, pid, seq, NULL, at, {_ISO.format('at + 50')}, epoch, {doc},"
            " 1, NULL FROM r", (k, _LOREM, self.t_message))
        # A user line per message: chat0 + (t - 1)(k + 1) + its place in the turn.
        doc = _sql_replace("?", {"CID": "cid", "MID": "mid", "TID": "tid", "SID": "sid",
                                 "PID": "pid", "TEXT": "text", "SEQ": "cseq",
                                 "AT": _ISO.format("at")})
        conn.execute(
            "WITH r AS MATERIALIZED (SELECT " + _NEW_ID.format("chat") + " AS cid, m.id AS mid,"
            " p.tid, p.sid, p.pid, json_extract(m.doc, '$.message.content') AS text,"
            " p.chat0 + (m.seq - p.seq0 - 1) / ? * (? + 1) + (m.seq - p.seq0 - 1) % ? + 1"
            " AS cseq, m.created_ms + 20 AS at"
            " FROM seed_procs p JOIN messages m ON m.tenant_id = p.tid"
            " AND m.target_process_id = p.pid AND m.seq > p.seq0)"
            " INSERT INTO chat (id, tenant_id, process_id, seq, role, source_message_id, doc)"
            f" SELECT cid, tid, pid, cseq, 'user', mid, {doc} FROM r", (k, k, k, self.t_user_line))
        # Per turn: its assistant line (after its user lines) and its record.
        conn.execute("DELETE FROM seed_turns")
        conn.execute(
            "INSERT INTO seed_turns SELECT p.pid, p.tid, p.sid, m.drained_epoch, COUNT(*),"
            " json_group_array(m.id), MIN(m.created_ms), MAX(m.created_ms) + 900,"
            " p.chat0 + (m.drained_epoch - p.epoch0 - 1) * (? + 1) + COUNT(*) + 1"
            " FROM seed_procs p JOIN messages m ON m.tenant_id = p.tid"
            " AND m.target_process_id = p.pid AND m.seq > p.seq0"
            " GROUP BY p.pid, m.drained_epoch", (k,))
        doc = _sql_replace("?", {"CID": "cid", "TID": "tid", "SID": "sid", "PID": "pid",
                                 "TEXT": "text", "SEQ": "chat_seq", "AT": _ISO.format("ended")})
        conn.execute(
            "WITH r AS MATERIALIZED (SELECT " + _NEW_ID.format("chat") + " AS cid, tid, sid, pid,"
            " chat_seq, ended, substr(?, 1 + abs(random()) % 4000, 40 + abs(random()) % 600)"
            " AS text FROM seed_turns)"
            " INSERT INTO chat (id, tenant_id, process_id, seq, role, source_message_id, doc)"
            f" SELECT cid, tid, pid, chat_seq, 'assistant', NULL, {doc} FROM r",
            (_LOREM, self.t_reply))
        doc = _sql_replace("?", {"ID": "id", "TID": "tid", "PID": "pid", "EPOCH": "epoch",
                                 "DRAINED": "drained", "STARTED": _ISO.format("started - 30"),
                                 "ENDED": _ISO.format("ended")})
        conn.execute(
            "WITH r AS MATERIALIZED (SELECT " + _NEW_ID.format("turn") + " AS id, tid, pid,"
            " epoch, drained, started, ended FROM seed_turns)"
            f" INSERT INTO turns (id, tenant_id, process_id, epoch, doc)"
            f" SELECT id, tid, pid, epoch, {doc} FROM r", (self.t_turn,))
        n_msgs = sum(p[4] for p in self.procs)
        n_turns = conn.execute("SELECT COUNT(*) FROM seed_turns").fetchone()[0]
        self.counts["messages"] += n_msgs
        self.counts["chat"] += n_msgs + n_turns
        self.counts["turns"] += n_turns
        self.procs.clear()


# PostgreSQL: the same rows through the tables of ``vancetope_brain/store/postgres`` (the
# template rows come from SQLite, whose columns are PostgreSQL's but ``row_no``, an identity
# column PostgreSQL fills; a document's JSON text becomes ``jsonb``).
_PG_ISO = ("(to_char(timestamp 'epoch' + ({}) * interval '1 millisecond', "
           "'YYYY-MM-DD\"T\"HH24:MI:SS.US') || 'Z')")
_PG_NEW_ID = "('{}_' || substr(md5(random()::text || clock_timestamp()::text), 1, 16))"

_PG_SEED_TEMP = """
CREATE TEMP TABLE IF NOT EXISTS seed_procs (
    pid TEXT PRIMARY KEY, tid TEXT, uid TEXT, sid TEXT,
    n INTEGER, seq0 BIGINT, chat0 BIGINT, epoch0 BIGINT, base_ms BIGINT);
CREATE TEMP TABLE IF NOT EXISTS seed_turns (
    pid TEXT, tid TEXT, sid TEXT, epoch BIGINT, cnt BIGINT, drained TEXT,
    started BIGINT, ended BIGINT, chat_seq BIGINT)
"""


def _pg_replace(column: str, keys: dict[str, str]) -> str:
    """``_sql_replace`` for PostgreSQL (each value cast to text)."""
    for key, expr in keys.items():
        column = f"replace({column}, '@{key}@', ({expr})::text)"
    return column


class PgSeeder(Seeder):
    """``Seeder`` on PostgreSQL (a psycopg connection in autocommit mode): the rows from
    Python by ``COPY``, the history of a batch of processes by ``INSERT … SELECT`` over
    ``generate_series`` on the server, with the same numbering as on SQLite."""

    flushes = 0

    def temp_tables(self) -> None:
        for statement in _PG_SEED_TEMP.split(";"):
            self.conn.execute(statement)

    def flush(self) -> None:
        conn = self.conn
        with conn.transaction():
            for table, rows in self.batches.items():
                if rows:
                    cols = ", ".join(self.tpl.columns[table])
                    with conn.cursor().copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                        for row in rows:
                            copy.write_row(row)
                    rows.clear()
            if self.procs:
                self._history_sql()
        self.flushes += 1
        if self.flushes % 25 == 0:  # the planner must see the tables grow (index joins)
            conn.execute("ANALYZE messages, chat, turns")

    def _history_sql(self) -> None:
        conn, k = self.conn, self.k
        conn.execute("DELETE FROM seed_procs")
        conn.cursor().executemany("INSERT INTO seed_procs VALUES (%s, %s, %s, %s, %s, %s, %s, "
                                  "%s, %s)", self.procs)
        conn.execute("ANALYZE seed_procs")
        doc = _pg_replace("%s", {"MID": "mid", "TID": "tid", "UID": "uid", "PID": "pid",
                                 "TEXT": "text", "SEQ": "seq", "AT": _PG_ISO.format("at")})
        conn.execute(
            "WITH r AS MATERIALIZED (SELECT " + _PG_NEW_ID.format("msg") + " AS mid, p.tid,"
            " p.uid, p.pid, p.seq0 + s.m AS seq, p.base_ms + s.m * 60000 AS at,"
            " p.epoch0 + (s.m - 1) / %s + 1 AS epoch,"
            " substr(%s, 1 + floor(random() * 4000)::int, 15 + floor(random() * 180)::int)"
            " AS text FROM seed_procs p CROSS JOIN LATERAL generate_series(1, p.n) AS s(m))"
            " INSERT INTO messages (id, tenant_id, target_process_id, seq, idempotency_key,"
            " created_ms, drained_at, drained_epoch, doc, attempts, dead_ms)"
            f" SELECT mid, tid, pid, seq, NULL, at, {_PG_ISO.format('at + 50')}, epoch,"
            f" ({doc})::jsonb, 1, NULL FROM r", (k, _LOREM, self.t_message))
        doc = _pg_replace("%s", {"CID": "cid", "MID": "mid", "TID": "tid", "SID": "sid",
                                 "PID": "pid", "TEXT": "text", "SEQ": "cseq",
                                 "AT": _PG_ISO.format("at")})
        conn.execute(
            "WITH r AS MATERIALIZED (SELECT " + _PG_NEW_ID.format("chat") + " AS cid,"
            " m.id AS mid, p.tid, p.sid, p.pid, m.doc -> 'message' ->> 'content' AS text,"
            " p.chat0 + (m.seq - p.seq0 - 1) / %s * (%s + 1) + mod(m.seq - p.seq0 - 1, %s) + 1"
            " AS cseq, m.created_ms + 20 AS at"
            " FROM seed_procs p JOIN messages m ON m.tenant_id = p.tid"
            " AND m.target_process_id = p.pid AND m.seq > p.seq0)"
            " INSERT INTO chat (id, tenant_id, process_id, seq, role, source_message_id, doc)"
            f" SELECT cid, tid, pid, cseq, 'user', mid, ({doc})::jsonb FROM r",
            (k, k, k, self.t_user_line))
        conn.execute("DELETE FROM seed_turns")
        conn.execute(
            "INSERT INTO seed_turns SELECT p.pid, p.tid, p.sid, m.drained_epoch, COUNT(*),"
            " json_agg(m.id ORDER BY m.seq)::text, MIN(m.created_ms), MAX(m.created_ms) + 900,"
            " p.chat0 + (m.drained_epoch - p.epoch0 - 1) * (%s + 1) + COUNT(*) + 1"
            " FROM seed_procs p JOIN messages m ON m.tenant_id = p.tid"
            " AND m.target_process_id = p.pid AND m.seq > p.seq0"
            " GROUP BY p.pid, m.drained_epoch", (k,))
        doc = _pg_replace("%s", {"CID": "cid", "TID": "tid", "SID": "sid", "PID": "pid",
                                 "TEXT": "text", "SEQ": "chat_seq",
                                 "AT": _PG_ISO.format("ended")})
        conn.execute(
            "WITH r AS MATERIALIZED (SELECT " + _PG_NEW_ID.format("chat") + " AS cid, tid, sid,"
            " pid, chat_seq, ended, substr(%s, 1 + floor(random() * 4000)::int,"
            " 40 + floor(random() * 600)::int) AS text FROM seed_turns)"
            " INSERT INTO chat (id, tenant_id, process_id, seq, role, source_message_id, doc)"
            f" SELECT cid, tid, pid, chat_seq, 'assistant', NULL, ({doc})::jsonb FROM r",
            (_LOREM, self.t_reply))
        doc = _pg_replace("%s", {"ID": "id", "TID": "tid", "PID": "pid", "EPOCH": "epoch",
                                 "DRAINED": "drained",
                                 "STARTED": _PG_ISO.format("started - 30"),
                                 "ENDED": _PG_ISO.format("ended")})
        conn.execute(
            "WITH r AS MATERIALIZED (SELECT " + _PG_NEW_ID.format("turn") + " AS id, tid, pid,"
            " epoch, drained, started, ended FROM seed_turns)"
            " INSERT INTO turns (id, tenant_id, process_id, epoch, doc)"
            f" SELECT id, tid, pid, epoch, ({doc})::jsonb FROM r", (self.t_turn,))
        n_msgs = sum(p[4] for p in self.procs)
        n_turns = conn.execute("SELECT COUNT(*) FROM seed_turns").fetchone()[0]
        self.counts["messages"] += n_msgs
        self.counts["chat"] += n_msgs + n_turns
        self.counts["turns"] += n_turns
        self.procs.clear()


def new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(8).hex()}"


def _open_bulk(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")  # 256 MiB while seeding
    return conn


def store_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        return page_size * conn.execute("PRAGMA page_count").fetchone()[0]
    finally:
        conn.close()


def row_count(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("messages", "chat", "turns")}
    finally:
        conn.close()


@dataclasses.dataclass
class Plan:
    """How the history is spread."""

    messages: int           # the full history (fraction 1)
    turns: int
    own_share: float
    own_processes: int
    tenants: int
    users: int
    per_process: int

    @property
    def turn_size(self) -> int:
        """Messages a history turn drains on average."""
        return max(1, round(self.messages / max(1, self.turns)))

    def others(self, fraction: float) -> int:
        """Processes of other sessions at ``fraction`` of the full history."""
        return round(fraction * self.messages * (1 - self.own_share) / self.per_process)

    def own_per_process(self, fraction: float) -> int:
        return round(fraction * self.messages * self.own_share / max(1, self.own_processes))


def build_bases(plan: Plan, tpl: Templates, cache: Path, sizes: list[float],
                keep: set[float]) -> dict[float, tuple[Path | None, int, dict[str, int]]]:
    """The other tenants' history, grown through ``sizes``; at each size the store's bytes
    and row counts, and a copy of the file when the size is in ``keep``."""
    key = (f"m{plan.messages}-t{plan.turns}-o{plan.own_share}-p{plan.per_process}"
           f"-T{plan.tenants}x{plan.users}")
    out: dict[float, tuple[Path | None, int, dict[str, int]]] = {}
    meta = cache / f"history-{key}.json"
    wanted = {f: cache / f"history-{key}-{f}.db" for f in keep}
    if meta.exists() and all(p.exists() for p in wanted.values()):
        saved = json.loads(meta.read_text())
        if all(str(f) in saved for f in sizes):
            return {f: (wanted.get(f), *saved[str(f)]) for f in sizes}
    cache.mkdir(parents=True, exist_ok=True)
    work = cache / f"building-{os.getpid()}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    # The schema: the product's own, as any server creates it at open.
    from vancetope_brain.store import open_store
    open_store(f"sqlite:///{work}").close()
    conn = _open_bulk(work)
    rng = random.Random(16)
    seeder = Seeder(conn, tpl, plan.turn_size)
    now_ms = int(time.time() * 1000)
    users = [(f"tenant{t:03d}", f"user{t:03d}x{u:02d}") for t in range(plan.tenants)
             for u in range(plan.users)]
    for t in range(plan.tenants):
        seeder.tenant(f"tenant{t:03d}")
    for tid, uid in users:
        seeder.user(tid, uid)
    seeder.flush()
    started = time.monotonic()
    last = [started]

    def progress() -> None:
        now = time.monotonic()
        if now - last[0] >= 10:
            last[0] = now
            n = sum(seeder.counts.values())
            print(f"  seeding: {n:,} rows ({seeder.counts['messages']:,} messages, "
                  f"{seeder.counts['chat']:,} chat lines, {seeder.counts['turns']:,} turns), "
                  f"{n / (now - started):,.0f} rows/s", flush=True)

    made = 0
    for fraction in sorted(sizes):
        target = plan.others(fraction)
        while made < target:
            tid, uid = users[made // 2 % len(users)]
            if made % 2 == 0:
                sid, chat_pid = new_id("ses"), new_id("proc")
                created = now_ms - rng.randint(86_400_000, 90 * 86_400_000)
                seeder.session(tid, uid, sid, chat_pid, created)
                pid = chat_pid
            else:
                pid = new_id("proc")
            seeder.process(tid, uid, sid, pid, created, plan.per_process)
            made += 1
            if made % 200 == 0:
                seeder.flush()
                progress()
        seeder.flush()
        size = store_bytes(work)
        counts = row_count(work)
        copy = None
        if fraction in keep:
            copy = wanted[fraction]
            shutil.copyfile(work, copy)
        out[fraction] = (copy, size, counts)
        print(f"  size {fraction:g}: {sum(counts.values()):,} rows of history, "
              f"{size / 1e6:,.1f} MB ({time.monotonic() - started:.0f} s)", flush=True)
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    meta.write_text(json.dumps({str(f): [size, counts] for f, (_, size, counts) in out.items()}))
    return out


def pg_connect(url: str) -> Any:
    """A seeding connection (autocommit; commits without waiting for the WAL flush)."""
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    conn.execute("SET synchronous_commit = off")
    return conn


def pg_store_bytes(conn: Any) -> int:
    """Bytes of the store's tables with their indexes and TOAST (the catalogs left out)."""
    return int(conn.execute(
        "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' "
        "AND n.nspname = current_schema()").fetchone()[0])


def pg_row_count(conn: Any) -> dict[str, int]:
    return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("messages", "chat", "turns")}


def build_bases_pg(plan: Plan, tpl: Templates, cache: Path, sizes: list[float],
                   keep: set[float], server: str
                   ) -> dict[float, tuple[str | None, int, dict[str, int]]]:
    """``build_bases`` on PostgreSQL: the history is grown in a database of its own on
    ``server``; at each size in ``keep`` a copy is kept as database
    ``vt_hist_<key hash>_<size>`` (``CREATE DATABASE … TEMPLATE``), which each run's
    database is then created from. The copies stay on the server between runs, like
    the SQLite cache files (``DROP DATABASE`` them to free the space); their sizes and
    counts are in ``--cache``."""
    key = (f"m{plan.messages}-t{plan.turns}-o{plan.own_share}-p{plan.per_process}"
           f"-T{plan.tenants}x{plan.users}")
    tag = hashlib.sha1(key.encode()).hexdigest()[:10]
    out: dict[float, tuple[str | None, int, dict[str, int]]] = {}
    meta = cache / f"history-pg-{key}.json"
    wanted = {f: f"vt_hist_{tag}_{f:g}".replace(".", "_") for f in keep}
    if meta.exists() and all(_store.database_exists(server, n) for n in wanted.values()):
        saved = json.loads(meta.read_text())
        if all(str(f) in saved for f in sizes):
            return {f: (wanted.get(f), *saved[str(f)]) for f in sizes}
    cache.mkdir(parents=True, exist_ok=True)
    work = f"vt_hist_build_{os.getpid()}"
    _store.drop_database(server, work)
    _store.create_database(server, work)
    url = _store.db_url(server, work, app="vt-bench-seed")
    try:
        from vancetope_brain.store import open_store
        open_store(url).close()  # the schema: the product's own, as any server creates it
        conn = pg_connect(url)
        rng = random.Random(16)
        seeder = PgSeeder(conn, tpl, plan.turn_size)
        now_ms = int(time.time() * 1000)
        users = [(f"tenant{t:03d}", f"user{t:03d}x{u:02d}") for t in range(plan.tenants)
                 for u in range(plan.users)]
        for t in range(plan.tenants):
            seeder.tenant(f"tenant{t:03d}")
        for tid, uid in users:
            seeder.user(tid, uid)
        seeder.flush()
        started = time.monotonic()
        last = [started]
        made = 0
        for fraction in sorted(sizes):
            target = plan.others(fraction)
            while made < target:
                tid, uid = users[made // 2 % len(users)]
                if made % 2 == 0:
                    sid, chat_pid = new_id("ses"), new_id("proc")
                    created = now_ms - rng.randint(86_400_000, 90 * 86_400_000)
                    seeder.session(tid, uid, sid, chat_pid, created)
                    pid = chat_pid
                else:
                    pid = new_id("proc")
                seeder.process(tid, uid, sid, pid, created, plan.per_process)
                made += 1
                if made % 200 == 0:
                    seeder.flush()
                    now = time.monotonic()
                    if now - last[0] >= 10:
                        last[0] = now
                        n = sum(seeder.counts.values())
                        print(f"  seeding: {n:,} rows ({seeder.counts['messages']:,} messages,"
                              f" {seeder.counts['chat']:,} chat lines, "
                              f"{seeder.counts['turns']:,} turns), "
                              f"{n / (now - started):,.0f} rows/s", flush=True)
            seeder.flush()
            conn.execute("VACUUM ANALYZE")  # as autovacuum would leave it: stats, hint bits
            size, counts = pg_store_bytes(conn), pg_row_count(conn)
            copy = None
            if fraction in keep:
                copy = wanted[fraction]
                conn.close()
                _store.drop_database(server, copy)
                _store.create_database(server, copy, template=work)
                conn = seeder.conn = pg_connect(url)
                seeder.temp_tables()
            out[fraction] = (copy, size, counts)
            print(f"  size {fraction:g}: {sum(counts.values()):,} rows of history, "
                  f"{size / 1e6:,.1f} MB ({time.monotonic() - started:.0f} s)", flush=True)
        conn.close()
    finally:
        _store.drop_database(server, work)
    meta.write_text(json.dumps({str(f): [size, counts] for f, (_, size, counts) in out.items()}))
    return out


def seed_own(tpl: Templates, per_process: int,
             turn_size: int) -> Callable[[Path, list[tuple[str, str]]], None]:
    """``lane_turns.run``'s ``after_connect``: ``per_process`` messages of history for each
    of the benchmark's processes, after what they hold; their lanes move past it."""

    def seed(store: _store.BenchStore, processes: list[tuple[str, str]]) -> None:
        if per_process <= 0:
            return
        t0 = time.monotonic()
        if store.kind == "postgres":
            conn = pg_connect(_store.db_url(store.server_url, store.name, app="vt-bench-seed"))
            seeder: Seeder = PgSeeder(conn, tpl, turn_size)
            mark = "%s"
        else:
            conn = sqlite3.connect(store.path, isolation_level=None, timeout=30)
            conn.execute("PRAGMA synchronous = OFF")
            seeder = Seeder(conn, tpl, turn_size)
            mark = "?"
        base = int(time.time() * 1000) - 30 * 86_400_000
        # One process a transaction: the gateway and the workers keep writing meanwhile
        # (presence, leases), and wait at most 10 s for the write lock.
        for sid, pid in processes:
            tid, epoch, seq, chat_seq = conn.execute(
                "SELECT tenant_id, epoch, next_seq, next_chat_seq FROM lanes "
                f"WHERE process_id = {mark}", (pid,)).fetchone()
            (uid,) = conn.execute(f"SELECT user_id FROM sessions WHERE id = {mark}",
                                  (sid,)).fetchone()
            seeder.history(tid, uid, sid, pid, per_process, epoch=epoch, seq=seq,
                           chat_seq=chat_seq, t0_ms=base)
            seeder.flush()
            # The lane is idle (its INIT turn ended); its next turn numbers after this.
            conn.execute(f"UPDATE lanes SET epoch = {mark}, next_seq = {mark}, "
                         f"next_chat_seq = {mark} WHERE process_id = {mark}",
                         (*seeder.after(per_process, epoch, seq, chat_seq), pid))
        if store.kind == "postgres":
            conn.execute("ANALYZE messages, chat, turns")  # as autovacuum would, soon
        conn.close()
        print(f"gave the {len(processes)} benchmark processes {per_process:,} messages of "
              f"history each ({sum(seeder.counts.values()):,} rows, "
              f"{time.monotonic() - t0:.1f} s)", flush=True)

    return seed


# ── query plans ─────────────────────────────────────────────────────────────────────────

@contextlib.contextmanager
def traced_connections(statements: list[str]) -> Iterator[None]:
    """Every connection the product's SQLite backend opens records its statements."""
    import vancetope_brain.store.sqlite as backend

    original = backend.connect

    def connect(path: Path) -> sqlite3.Connection:
        conn = original(path)
        conn.set_trace_callback(statements.append)
        return conn

    backend.connect = connect  # type: ignore[assignment]
    try:
        yield
    finally:
        backend.connect = original  # type: ignore[assignment]


@contextlib.contextmanager
def traced_pg_connections(statements: list[str]) -> Iterator[None]:
    """Every connection the product's PostgreSQL backend opens records its statements, with
    their parameters spliced in as literals (psycopg's ``ClientCursor.mogrify``): a cursor
    class of ours on each pooled connection (``cursor_factory``), set up by the pool's
    ``configure`` hook. (``pg_stat_statements`` is not preloaded on the servers here.)"""
    import psycopg

    import vancetope_brain.store.postgres as backend

    original = backend._configure

    def literal(conn: Any, query: Any, params: Any) -> str:
        return psycopg.ClientCursor(conn).mogrify(query, params)

    class Traced(psycopg.Cursor):  # type: ignore[type-arg]
        def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
            statements.append(literal(self.connection, query, params))
            return super().execute(query, params, **kw)

        def executemany(self, query: Any, params_seq: Any, **kw: Any) -> None:
            params_seq = list(params_seq)
            statements.extend(literal(self.connection, query, p) for p in params_seq)
            return super().executemany(query, params_seq, **kw)

    def configure(conn: Any, **settings: Any) -> None:
        original(conn, **settings)
        conn.cursor_factory = Traced

    write = backend.PostgresBackend.write

    @contextlib.contextmanager
    def traced_write(self: Any) -> Iterator[Any]:
        statements.append("BEGIN")  # psycopg sends it outside a cursor
        with write(self) as conn:
            yield conn
        statements.append("COMMIT")

    backend._configure = configure  # type: ignore[assignment]
    backend.PostgresBackend.write = traced_write  # type: ignore[method-assign]
    try:
        yield
    finally:
        backend._configure = original  # type: ignore[assignment]
        backend.PostgresBackend.write = write  # type: ignore[method-assign]


def turn_statements(redis_url: str, store_url: str, tmp: Path, tid: str, uid: str,
                    pid: str) -> list[tuple[str, str]]:
    """(part, SQL) of a steer, the turn it wakes and a chat-history read of process ``pid``
    (the second of two rounds: caches warm, as in a running server)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VANCETOPE_", "OPENAI_"))}
    env.update(VANCETOPE_REDIS_URL=redis_url, VANCETOPE_STORE_URL=store_url,
               VANCETOPE_DATA_DIR=str(tmp))
    traced_connections_of = (traced_pg_connections if store_url.startswith("postgresql")
                             else traced_connections)
    from _inproc import in_process

    from vancetope_brain.identity import Principal

    statements: list[str] = []
    out: list[tuple[str, str]] = []
    with traced_connections_of(statements):
        product = in_process(env)
        worker, brain = product.worker, product.brain
        who = Principal(tid, uid)
        try:
            for round_ in range(2):
                statements.clear()
                brain.sessions.steer(who, pid, f"explain {round_}")
                steer = list(statements)
                statements.clear()
                outcome = worker.runner.run(tid, pid)
                if outcome.value != "committed":
                    raise RuntimeError(f"explain turn: {outcome}")
                turn = list(statements)
                statements.clear()
                brain.sessions.chat_history(who, pid, limit=100)
                history = list(statements)
            out = ([("steer", s) for s in steer] + [("turn", s) for s in turn]
                   + [("chat-history", s) for s in history])
        finally:
            product.close()
    return out


_LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+\b")


def _shape(sql: str) -> str:
    """A statement with its literals as ``?``."""
    return " ".join(_LITERAL.sub("?", sql).split())


def _time_us(conn: sqlite3.Connection, sql: str, runs: int = 30) -> float:
    """Median µs of ``sql`` in a transaction that is rolled back."""
    samples = []
    for _ in range(runs):
        conn.execute("BEGIN")
        t0 = time.perf_counter_ns()
        with contextlib.suppress(sqlite3.Error):
            conn.execute(sql).fetchall()
        samples.append(time.perf_counter_ns() - t0)
        conn.execute("ROLLBACK")
    return statistics.median(samples) / 1000


def explain(seeded_sql: list[tuple[str, str]], empty_sql: list[tuple[str, str]], empty: Path,
            seeded: Path) -> list[dict[str, Any]]:
    """Each statement of the seeded trace with its plan, timed on the seeded store against the
    statement at the same place of the empty store's trace (same part, same shape, same
    occurrence), timed on the empty store."""
    def keyed(trace: list[tuple[str, str]]) -> dict[tuple[str, str, int], str]:
        seen: dict[tuple[str, str], int] = {}
        out = {}
        for part, sql in trace:
            if sql.lstrip().split(None, 1)[0].upper() in ("BEGIN", "COMMIT", "ROLLBACK"):
                continue
            shape = _shape(sql)
            n = seen[(part, shape)] = seen.get((part, shape), -1) + 1
            out[(part, shape, n)] = sql
        return out

    on_empty = keyed(empty_sql)
    rows = []
    e_conn = sqlite3.connect(empty, isolation_level=None)
    s_conn = sqlite3.connect(seeded, isolation_level=None)
    try:
        for key, sql in keyed(seeded_sql).items():
            try:
                plan = [r[3] for r in s_conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
            except sqlite3.Error as e:
                plan = [f"(cannot explain: {e})"]
            flagged = [p for p in plan if (p.startswith("SCAN") and "USING" not in p
                                           and "CONSTANT ROW" not in p) or "TEMP B-TREE" in p]
            twin = on_empty.get(key)
            rows.append({"part": key[0], "sql": sql, "shape": key[1], "plan": plan,
                         "flagged": flagged,
                         "empty_us": round(_time_us(e_conn, twin), 1) if twin else None,
                         "seeded_us": round(_time_us(s_conn, sql), 1)})
    finally:
        e_conn.close()
        s_conn.close()
    return rows


def _pg_time_us(conn: Any, sql: str, runs: int = 30) -> float:
    """Median µs of ``sql`` in a transaction that is rolled back (PostgreSQL)."""
    import psycopg

    samples = []
    for _ in range(runs):
        conn.execute("BEGIN")
        t0 = time.perf_counter_ns()
        try:
            cur = conn.execute(sql)
            if cur.description:
                cur.fetchall()
        except psycopg.Error:
            pass
        samples.append(time.perf_counter_ns() - t0)
        conn.execute("ROLLBACK")
    return statistics.median(samples) / 1000


def explain_pg(seeded_sql: list[tuple[str, str]], empty_sql: list[tuple[str, str]],
               empty_url: str, seeded_url: str) -> list[dict[str, Any]]:
    """``explain`` on PostgreSQL: ``EXPLAIN`` of each statement of the seeded trace; a plan
    with a sequential scan or a sort is flagged (on tables this small a sort of a few rows
    is harmless: read the plan)."""
    import psycopg

    def keyed(trace: list[tuple[str, str]]) -> dict[tuple[str, str, int], str]:
        seen: dict[tuple[str, str], int] = {}
        out = {}
        for part, sql in trace:
            if sql in ("BEGIN", "COMMIT"):
                continue
            shape = _shape(sql)
            n = seen[(part, shape)] = seen.get((part, shape), -1) + 1
            out[(part, shape, n)] = sql
        return out

    on_empty = keyed(empty_sql)
    rows = []
    with psycopg.connect(empty_url, autocommit=True) as e_conn, \
            psycopg.connect(seeded_url, autocommit=True) as s_conn:
        for key, sql in keyed(seeded_sql).items():
            try:
                plan = [r[0] for r in s_conn.execute(f"EXPLAIN {sql}")]
            except psycopg.Error as e:
                plan = [f"(cannot explain: {e})"]
            flagged = [p.strip() for p in plan if "Seq Scan" in p or p.strip().startswith(
                ("Sort", "->  Sort"))]
            twin = on_empty.get(key)
            rows.append({"part": key[0], "sql": sql, "shape": key[1], "plan": plan,
                         "flagged": flagged,
                         "empty_us": round(_pg_time_us(e_conn, twin), 1) if twin else None,
                         "seeded_us": round(_pg_time_us(s_conn, sql), 1)})
    return rows


def print_counts(trace: list[tuple[str, str]]) -> None:
    """Statements per part of the seeded trace, and the explicit transactions among them
    (``BEGIN``; on PostgreSQL every other statement is a transaction of its own)."""
    parts = ("steer", "turn", "chat-history")
    counts = {part: sum(1 for p, sql in trace if p == part and sql not in ("BEGIN", "COMMIT"))
              for part in parts}
    begins = {part: sum(1 for p, sql in trace if p == part and sql.startswith("BEGIN"))
              for part in parts}
    print("statements on the seeded store (explicit transactions among them): " + ", ".join(
        f"{part} {counts[part]} ({begins[part]})" for part in parts), flush=True)


def print_plans(rows: list[dict[str, Any]]) -> None:
    print("\nstatements of a steer, a turn and a chat-history read on the process with the "
          "longest history (median µs over 30 runs, writes rolled back):")
    for r in rows:
        e = r["empty_us"]
        ratio = f"{r['seeded_us'] / e:.2f}×" if e else "-"
        mark = "  << " + "; ".join(r["flagged"]) if r["flagged"] else ""
        print(f"[{r['part']:<12}] empty {e if e is not None else float('nan'):>7.1f} seeded "
              f"{r['seeded_us']:>7.1f} µs ({ratio}){mark}\n    {r['shape'][:200]}\n"
              f"    plan: {' | '.join(r['plan'])}")


# ── runs ────────────────────────────────────────────────────────────────────────────────

def figures(results: list[dict[str, Any]]) -> dict[str, float | None]:
    by = {r["phase"]: r for r in results}

    def get(phase: str, *path: str) -> float | None:
        v: Any = by.get(phase)
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        return v

    cpu = get("closed", "cpu_ms_per_turn")
    return {
        "closed turns/s": get("closed", "turns_per_s"),
        "closed CPU ms/turn (ours)": lane_turns.ours_cpu(cpu),
        "closed worker CPU ms/turn": (round(sum(v for k, v in cpu.items()
                                                if k.startswith("worker")), 3)
                                      if cpu else None),
        "closed gateway CPU ms/turn": cpu.get("gateway") if cpu else None,
        "closed postgres CPU ms/turn": cpu.get("postgres") if cpu else None,
        "closed latency p50 ms": get("closed", "latency_ms", "p50"),
        "seq first event p50 ms": get("seq", "latency_ms", "p50"),
        "seq first event p99 ms": get("seq", "latency_ms", "p99"),
        "seq turn ended p50 ms": get("seq", "turn_ms_p50"),
        "paced latency p50 ms": get("paced", "latency_ms", "p50"),
        "paced latency p99 ms": get("paced", "latency_ms", "p99"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    g = p.add_argument_group("history")
    g.add_argument("--history-messages", type=int, default=1_000_000,
                   help="inbox messages of the full history (default 1,000,000)")
    g.add_argument("--history-turns", type=int, default=100_000,
                   help="turn records of the full history (default 100,000)")
    g.add_argument("--own-share", type=float, default=0.1,
                   help="share of the history on the benchmark's own processes (default 0.1)")
    g.add_argument("--no-own-history", action="store_true",
                   help="leave the benchmark's own processes without history (only the other "
                        "tenants' history is in the store: the store's own flatness)")
    g.add_argument("--tenants", type=int, default=20)
    g.add_argument("--users", type=int, default=5, help="users per tenant")
    g.add_argument("--per-process", type=int, default=100,
                   help="messages of history of each other tenants' process (default 100)")
    g.add_argument("--sizes", default="0,0.25,0.5,1",
                   help="fractions of the full history at which the store size is printed")
    g.add_argument("--run-sizes", default="1",
                   help="fractions to run lane_turns against, besides the empty store")
    g.add_argument("--rounds", type=int, default=1,
                   help="empty/seeded run pairs, alternating (default 1)")
    g.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "vt-history-cache"),
                   help="where the seeded stores are kept between runs")
    g.add_argument("--explain", action="store_true",
                   help="only the query plans of a turn (no lane_turns runs)")
    g.add_argument("--no-explain", action="store_true", help="skip the query plans")
    g.add_argument("--history-json", help="write this benchmark's figures as JSON here")
    ours, rest = p.parse_known_args(argv)
    if {"-h", "--help"} & set(rest):
        p.print_help()
        print("\nlane_turns options (passed through):")
    args = lane_turns.parse_args(rest)
    if (problem := check_url(args.redis_url)):
        p.error(problem)
    plan = Plan(ours.history_messages, ours.history_turns, ours.own_share, args.processes,
                ours.tenants, ours.users, ours.per_process)
    sizes = sorted({float(x) for x in ours.sizes.split(",")} | {1.0})
    run_sizes = sorted(float(x) for x in ours.run_sizes.split(",") if float(x) > 0)
    tmp = Path(tempfile.mkdtemp(prefix="vt-history-"))
    try:
        with claimed_db(args.redis_url) as args.redis_url:
            return run(args, ours, plan, sizes, run_sizes, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, ours: argparse.Namespace, plan: Plan, sizes: list[float],
        run_sizes: list[float], tmp: Path) -> int:
    t0 = time.monotonic()
    reset(args.redis_url)
    tpl = make_templates(args.redis_url, tmp)
    reset(args.redis_url)
    own = ("none on the benchmark's processes (--no-own-history)" if ours.no_own_history
           else f"{plan.own_share:.0%} on the {plan.own_processes} benchmark processes, "
                f"{plan.own_per_process(1):,} each")
    print(f"history: {plan.messages:,} messages in ~{plan.turns:,} turns at size 1 "
          f"({own}; the rest on {plan.others(1):,} processes of "
          f"{plan.tenants * plan.users} users in {plan.tenants} tenants, {plan.per_process} "
          "each)", flush=True)
    keep = set(run_sizes) or {1.0}
    pg = args.store == "postgres"
    bases: dict[float, tuple[Any, int, dict[str, int]]]
    if pg:
        bases = build_bases_pg(plan, tpl, Path(ours.cache), sizes, keep, args.postgres_url)
    else:
        bases = build_bases(plan, tpl, Path(ours.cache), sizes, keep)
    print(f"\nstore size as history grows (other tenants' history only; the benchmark's own "
          f"processes add {plan.own_share:.0%} more in the runs):")
    print(f"{'size':>5} {'messages':>10} {'chat':>10} {'turns':>8} {'rows':>10} {'MB':>9} "
          f"{'bytes/row':>10} {'marginal bytes/row':>19}")
    prev: tuple[int, int] | None = None
    table = []
    for f in sizes:
        _, size, counts = bases[f]
        rows = sum(counts.values())
        marginal = (size - prev[0]) / (rows - prev[1]) if prev and rows > prev[1] else None
        table.append({"fraction": f, "bytes": size, **counts})
        print(f"{f:>5g} {counts['messages']:>10,} {counts['chat']:>10,} {counts['turns']:>8,} "
              f"{rows:>10,} {size / 1e6:>9.1f} {size / rows if rows else 0:>10.0f} "
              f"{marginal if marginal is not None else float('nan'):>19.0f}")
        prev = (size, rows)
    result: dict[str, Any] = {"sizes": table, "runs": [], "plan": dataclasses.asdict(plan)}

    if not ours.explain:
        inner = argparse.Namespace(**vars(args))
        inner.no_celery = inner.no_peer = True  # the baselines run once, below
        inner.timeout = max(args.timeout, 600)
        # A seeded run is slower (the own processes' long chats): its phases get 5 minutes.
        inner.phase_timeout = max(args.phase_timeout, 300)
        for round_ in range(ours.rounds):
            for f in [0.0, *run_sizes]:
                inner.store_from = str(bases[f][0]) if f else None
                inner.json = str(tmp / f"run-{round_}-{f}.json")
                own = 0 if ours.no_own_history else plan.own_per_process(f)
                hook = seed_own(tpl, own, plan.turn_size) if f and own else None
                print(f"\n== round {round_ + 1}: lane_turns on "
                      + (f"the size-{f:g} store" if f else "an empty store"), flush=True)
                rc = lane_turns.run(inner, after_connect=hook)
                if rc != 0:
                    print(f"lane_turns failed ({rc}); stopping", flush=True)
                    return rc
                res = json.loads(Path(inner.json).read_text())["results"]
                result["runs"].append({"round": round_, "fraction": f, "figures": figures(res),
                                       "results": res})
        print_history_table(result["runs"], run_sizes)

    if not ours.no_explain and pg:
        plans = explain_on_pg(args, plan, tpl, tmp, bases[max(keep)][0], max(keep))
    elif not ours.no_explain:
        # The empty store: the template's, one process and two turns.
        empty = tmp / "explain-empty.db"
        seeded = tmp / "explain-seeded.db"
        shutil.copyfile(tmp / "template.db", empty)
        shutil.copyfile(bases[max(keep)][0], seeded)  # type: ignore[arg-type]
        print(f"\nquery plans: seeding one long chat on the size-{max(keep):g} store",
              flush=True)
        conn = sqlite3.connect(seeded, isolation_level=None)
        seeder = Seeder(conn, tpl, plan.turn_size)
        seeder.tenant(TPL_TENANT)
        seeder.user(TPL_TENANT, TPL_USER)
        sid, pid = new_id("ses"), new_id("proc")
        seeder.session(TPL_TENANT, TPL_USER, sid, pid, int(time.time() * 1000))
        seeder.process(TPL_TENANT, TPL_USER, sid, pid, int(time.time() * 1000) - 86_400_000,
                       max(plan.own_per_process(1), 1000))
        seeder.flush()
        conn.close()
        seeded_sql = turn_statements(args.redis_url, f"sqlite:///{seeded}", tmp, TPL_TENANT,
                                     TPL_USER, pid)
        reset(args.redis_url)
        empty_sql = turn_statements(args.redis_url, f"sqlite:///{empty}", tmp, TPL_TENANT,
                                    TPL_USER, tpl.rows["processes"][0][0])
        reset(args.redis_url)
        print_counts(seeded_sql)
        plans = explain(seeded_sql, empty_sql, empty, seeded)
    if not ours.no_explain:
        print_plans(plans)
        result["plans"] = plans

    if not ours.explain:
        base = _compare.measure(args, args.redis_url, tmp, _compare.Shape(
            workers=args.workers, pool=args.pool, concurrency=args.concurrency,
            in_flight=args.processes))
        seeded_runs = [r for r in result["runs"] if r["fraction"] == max(run_sizes)]
        last = seeded_runs[-1]["results"]
        ours_fig = lane_turns.ours_figures(last)
        print(f"\n(ours = the size-{max(run_sizes):g} store, last round)")
        _compare.print_table(base, ours_fig)
        result["comparison"] = _compare.as_dict(base, ours_fig)
    if ours.history_json:
        Path(ours.history_json).write_text(json.dumps(result, indent=2))
    print(f"\ndone in {time.monotonic() - t0:.0f} s")
    return 0


def explain_on_pg(args: argparse.Namespace, plan: Plan, tpl: Templates, tmp: Path,
                  base: str, fraction: float) -> list[dict[str, Any]]:
    """The query plans on PostgreSQL: the empty store holds the template's rows (one
    process, two turns), the seeded one is a copy of the size-``fraction`` store with one
    long chat more; both databases are dropped afterwards."""
    server = args.postgres_url
    tag = f"{os.getpid()}_{os.urandom(4).hex()}"
    empty, seeded = f"vt_hist_explain_empty_{tag}", f"vt_hist_explain_seeded_{tag}"
    empty_url = _store.db_url(server, empty, app="vt-bench-explain")
    seeded_url = _store.db_url(server, seeded, app="vt-bench-explain")
    from vancetope_brain.store import open_store
    try:
        _store.create_database(server, empty)
        open_store(empty_url).close()
        conn = pg_connect(empty_url)
        seeder = PgSeeder(conn, tpl, plan.turn_size)
        for table in SEED_TABLES:
            seeder.batches[table].extend(tpl.rows[table])
        seeder.flush()
        conn.execute("ANALYZE")
        conn.close()
        print(f"\nquery plans: seeding one long chat on the size-{fraction:g} store",
              flush=True)
        _store.create_database(server, seeded, template=base)
        conn = pg_connect(seeded_url)
        seeder = PgSeeder(conn, tpl, plan.turn_size)
        seeder.tenant(TPL_TENANT)
        seeder.user(TPL_TENANT, TPL_USER)
        sid, pid = new_id("ses"), new_id("proc")
        seeder.session(TPL_TENANT, TPL_USER, sid, pid, int(time.time() * 1000))
        seeder.process(TPL_TENANT, TPL_USER, sid, pid, int(time.time() * 1000) - 86_400_000,
                       max(plan.own_per_process(1), 1000))
        seeder.flush()
        conn.execute("ANALYZE messages, chat, turns")
        conn.close()
        seeded_sql = turn_statements(args.redis_url, seeded_url, tmp, TPL_TENANT, TPL_USER, pid)
        reset(args.redis_url)
        empty_sql = turn_statements(args.redis_url, empty_url, tmp, TPL_TENANT, TPL_USER,
                                    tpl.rows["processes"][0][0])
        reset(args.redis_url)
        print_counts(seeded_sql)
        return explain_pg(seeded_sql, empty_sql, empty_url, seeded_url)
    finally:
        _store.drop_database(server, empty)
        _store.drop_database(server, seeded)


def print_history_table(runs: list[dict[str, Any]], run_sizes: list[float]) -> None:
    print("\nseeded vs empty store (mean over rounds; ratio = seeded / empty; target within "
          "10 %):")
    keys = list(runs[0]["figures"])
    header = f"{'figure':<28} {'empty':>9}" + "".join(
        f" {f'size {f:g}':>9} {'ratio':>7}" for f in run_sizes)
    print(header)
    print("-" * len(header))
    for k in keys:
        if all(r["figures"][k] is None for r in runs):
            continue  # e.g. the postgres row of a SQLite run

        def mean(f: float, k: str = k) -> float | None:
            vals = [r["figures"][k] for r in runs if r["fraction"] == f
                    and r["figures"][k] is not None]
            return statistics.fmean(vals) if vals else None
        e = mean(0.0)
        line = f"{k:<28} {e if e is not None else float('nan'):>9.2f}"
        for f in run_sizes:
            v = mean(f)
            ratio = v / e if v is not None and e else float("nan")
            line += f" {v if v is not None else float('nan'):>9.2f} {ratio:>6.2f}×"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
