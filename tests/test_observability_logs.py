"""Structured logs (issue 15): in JSON every line of a turn carries tenant, session, process,
turn and epoch ids; text shows them too; the sweep and housekeeping lines go to DEBUG unless
they did something; a secret in a request line stays redacted in JSON."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from tests.helpers import wait_for
from vancetope_brain.llm import LlmMessage, ToolSpec
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.observability import logs
from vancetope_brain.store import LaneStore
from vancetope_gateway.logs import redact_access_logs

TURN_LOGGERS = ("vancetope_brain.lanes", "vancetope_brain.engines", "vancetope_brain.tools",
                "vancetope_brain.llm", "tests.test_observability_logs")
"""The modules that run inside a turn; the sweeper, the task wrapper and Celery do not."""

log = logging.getLogger(__name__)


class Captured:
    """A handler as ``logs.configure`` builds it, writing into memory."""

    def __init__(self, fmt: str) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(logs.formatter(fmt))
        self.handler.addFilter(logs.TurnIds())

    def lines(self) -> list[str]:
        return self.stream.getvalue().splitlines()


@pytest.fixture
def captured() -> Iterator[Captured]:
    capture = Captured("json")
    root = logging.getLogger()
    root.addHandler(capture.handler)
    yield capture
    root.removeHandler(capture.handler)


def _model(messages: list[LlmMessage], tools: list[ToolSpec]) -> str:
    last = next(m.content for m in reversed(messages) if m.role == "user")
    log.info("the model got %s", last)
    if last == "bad":
        raise ZeroDivisionError("engine bug")
    return f"echo: {last}"


def test_every_json_line_of_a_turn_carries_the_turns_ids(embedded, captured) -> None:
    emb = embedded
    emb.model = FunctionModel(_model)
    session = emb.brain.sessions.create_interactive(emb.who)
    pid = session.chat_process_id
    assert pid is not None
    lanes = emb.brain.store.port(LaneStore)
    emb.brain.sessions.steer(emb.who, pid, "hello")
    wait_for(lambda: len(lanes.chat_history("acme", pid)) >= 3, what="the answer")
    emb.brain.sessions.steer(emb.who, pid, "bad")  # a failed turn, logged with its traceback
    wait_for(lambda: len(lanes.chat_history("acme", pid)) >= 5, what="the error line")
    emb.worker.join()
    turns = {(r.id, r.epoch) for r in lanes.turn_records("acme", pid)}

    records = [json.loads(line) for line in captured.lines() if line.startswith("{")]
    of_turns = [r for r in records if r["logger"].startswith(TURN_LOGGERS)
                and r.get("process_id", pid) == pid]
    messages = [r["message"] for r in of_turns]
    assert "the model got hello" in messages and "the model got bad" in messages
    assert any(m.startswith("engine arthur failed") for m in messages)
    for record in of_turns:
        assert {k: record.get(k) for k in ("tenant_id", "session_id", "process_id")} == \
            {"tenant_id": "acme", "session_id": session.id, "process_id": pid}, record
        assert (record.get("turn_id"), record.get("epoch")) in turns, record
    failed = next(r for r in of_turns if r["message"].startswith("engine arthur failed"))
    assert "ZeroDivisionError: engine bug" in failed["exc_info"]
    assert {"time", "level", "logger", "message"} <= failed.keys()


def test_text_lines_show_the_ids_after_the_message() -> None:
    capture = Captured("text")
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "fenced", None, None)
    with logs.turn_context(tenant_id="acme", process_id="proc_1"):
        logs.bind(epoch=7)
        capture.handler.handle(record)
    capture.handler.handle(logging.LogRecord("x", logging.INFO, __file__, 1, "after", None,
                                             None))
    first, after = capture.lines()
    assert first.endswith("WARNING x: fenced [tenant=acme process=proc_1 epoch=7]")
    assert after.endswith("INFO x: after")


def _celery_line(logger: str, fmt: str, args: object) -> logging.LogRecord:
    return logging.getLogger(logger).makeRecord(logger, logging.INFO, __file__, 1, fmt,
                                                (args,), None)


@pytest.mark.parametrize(("logger", "args", "kept"), [
    ("celery.worker.strategy", {"name": "vancetope.sweep", "id": "t1"}, False),
    ("celery.app.trace", {"name": "vancetope.sweep", "id": "t1", "return_value": "0"}, False),
    ("celery.worker.strategy", {"name": "vancetope.webhooks", "id": "t4"}, False),
    ("celery.app.trace", {"name": "vancetope.webhooks", "id": "t4", "return_value": "0"},
     False),
    ("celery.app.trace", {"name": "vancetope.webhooks", "id": "t5", "return_value": "1"},
     True),
    ("celery.app.trace", {"name": "vancetope.housekeeping", "id": "t2",
                          "return_value": "2"}, True),
    ("celery.app.trace", {"name": "vancetope.lane_turn", "id": "t3",
                          "return_value": "'committed'"}, True),
])
def test_maintenance_lines_are_debug_unless_the_job_did_something(logger, args, kept) -> None:
    quiet = logs.QuietMaintenance()
    record = _celery_line(logger, "Task %(name)s[%(id)s] done", args)
    level = logging.getLogger(logger).level
    logging.getLogger(logger).setLevel(logging.INFO)
    try:
        assert quiet.filter(record) is kept
        assert record.levelname == ("INFO" if kept else "DEBUG")
    finally:
        logging.getLogger(logger).setLevel(level)


def test_beat_sending_housekeeping_is_debug() -> None:
    logger = logging.getLogger("celery.beat")
    record = logger.makeRecord("celery.beat", logging.INFO, __file__, 1,
                               "Scheduler: Sending due task %s (%s)",
                               ("housekeeping", "vancetope.housekeeping"), None)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        assert logs.QuietMaintenance().filter(record) is False
    finally:
        logger.setLevel(level)


def test_a_token_in_a_request_line_stays_redacted_in_json() -> None:
    capture = Captured("json")
    redact_access_logs()
    access = logging.getLogger("werkzeug")
    access.addHandler(capture.handler)
    level = access.level
    access.setLevel(logging.INFO)
    try:
        access.info('"%s" %s', "GET /ws?token=vt_secret-value HTTP/1.1", 101)
    finally:
        access.removeHandler(capture.handler)
        access.setLevel(level)
    (line,) = capture.lines()
    assert json.loads(line)["message"] == '"GET /ws?token=*** HTTP/1.1" 101'
