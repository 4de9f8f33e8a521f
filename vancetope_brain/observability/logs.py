"""Log lines: text or JSON (``VANCETOPE_LOG_FORMAT``), the turn's ids on every line of a
turn, and the maintenance jobs quiet when they did nothing. docs/operations.md "Logs".

- ``configure`` installs the one root handler of a process (stderr) — ``vancetope serve``,
  a gunicorn worker (``vancetope_gateway.wsgi``), a Celery worker or beat (Celery's
  ``setup_logging`` signal, so Celery does not install its own).
- ``turn_context`` / ``bind`` set the ids of the turn being run (``LaneRunner``) in a
  context variable; ``TurnIds`` copies them onto every record logged meanwhile (in JSON
  they are fields, in text a ``[process=… epoch=…]`` suffix). Threads a turn starts (the
  lease heartbeat) log without them.
- Secrets: the gateway's access loggers keep their redaction filter
  (``vancetope_gateway.logs``); JSON renders the redacted message like text does.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.json import JsonFormatter

IDS = ("tenant_id", "session_id", "process_id", "turn_id", "epoch")
"""The ids a line of a turn carries (those known at the time)."""

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

MAINTENANCE_TASKS = frozenset({"vancetope.sweep", "vancetope.housekeeping", "vancetope.webhooks"})
"""Celery tasks whose routine lines go to DEBUG unless they did something."""

_ids: ContextVar[dict[str, Any] | None] = ContextVar("vancetope_log_ids", default=None)


@contextlib.contextmanager
def turn_context(**ids: Any) -> Iterator[None]:
    """Lines logged inside carry ``ids`` (a fresh set; the previous one comes back after)."""
    token = _ids.set({k: v for k, v in ids.items() if v is not None})
    try:
        yield
    finally:
        _ids.reset(token)


def bind(**ids: Any) -> None:
    """Add ids to the current ``turn_context`` (e.g. the epoch, once taken)."""
    current = _ids.get()
    if current is not None:
        _ids.set({**current, **{k: v for k, v in ids.items() if v is not None}})


def current_ids() -> dict[str, Any]:
    return dict(_ids.get() or {})


class TurnIds(logging.Filter):
    """Puts the current turn's ids on each record (a handler filter: every logger's)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_ids.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT`` plus `` [tenant=… process=… epoch=…]`` on a turn's lines."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        ids = " ".join(f"{key.removesuffix('_id')}={getattr(record, key)}" for key in IDS
                       if getattr(record, key, None) is not None)
        if not ids:
            return text
        first, newline, rest = text.partition("\n")  # after the message, before a traceback
        return f"{first} [{ids}]{newline}{rest}"


class QuietMaintenance(logging.Filter):
    """Celery's "received" and "succeeded: 0" lines of the sweep, webhooks and housekeeping
    tasks (every 5, 5 and 30 s) and beat's "Sending due task" for them go to DEBUG; a run that
    did something (a non-zero result) stays at INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, dict) else {}
        routine = (args.get("name") in MAINTENANCE_TASKS and
                   str(args.get("return_value", "0")) in ("0", "'0'")) or (
            record.name == "celery.beat" and isinstance(record.args, tuple)
            and any(a in MAINTENANCE_TASKS for a in record.args))
        if routine and record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


QUIETED_LOGGERS = ("celery.app.trace", "celery.worker.strategy", "celery.beat")
"""Where ``QuietMaintenance`` sits."""


_QUERY = re.compile(r"(https?://[^\s'\"?]+)\?[^\s'\"]*")

HTTP_CLIENT_LOGGERS = ("httpx", "httpx2")
"""The HTTP clients' loggers (the openai client's, the MCP SDK's): their INFO line per
request carries the URL, whose query string may hold a key (``?api-key=``, ``?k=``)."""


def scrub(text: str) -> str:
    """``text`` without URL query strings (where a careless server config keeps a key)."""
    return _QUERY.sub(r"\1?…", text)


class ScrubUrlQueries(logging.Filter):
    """Renders a record's message with every URL's query string cut off."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(record.getMessage()), None
        return True


def scrub_http_client_logs() -> None:
    """Install ``ScrubUrlQueries`` on the HTTP clients' loggers (idempotent); on the
    loggers themselves, so every handler — a test's capture too — gets the scrubbed line."""
    for name in HTTP_CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ScrubUrlQueries) for f in logger.filters):
            logger.addFilter(ScrubUrlQueries())


scrub_http_client_logs()  # on import: whatever configures logging, no query string leaks


def json_formatter() -> logging.Formatter:
    return JsonFormatter("{asctime}{levelname}{name}{message}", style="{",
                         rename_fields={"asctime": "time", "levelname": "level",
                                        "name": "logger"})


def formatter(fmt: str) -> logging.Formatter:
    return json_formatter() if fmt == "json" else TextFormatter(TEXT_FORMAT)


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``configure`` installs (so a second call replaces it)."""


def configure(level: str, fmt: str, *, also: tuple[str, ...] = ()) -> None:
    """Log ``level`` and up to stderr in ``fmt`` (``text`` or ``json``), replacing any
    handler an earlier call installed. ``also``: loggers with handlers of their own
    (gunicorn's) that should write the same format."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler = _Handler(sys.stderr)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(TurnIds())
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)  # a Python warning is a log line too, in the same format
    for name in QUIETED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, QuietMaintenance) for f in logger.filters):
            logger.addFilter(QuietMaintenance())
    for name in also:
        for own in logging.getLogger(name).handlers:
            own.setFormatter(formatter(fmt))
            own.addFilter(TurnIds())
