"""A pytest plugin: after the run, no log the tests produced holds a token or a password
(issue 12: "grep over every log the tests captured finds no token and no password").

- Every record logged in this process reaches a handler on the root logger and is
  scanned as it is emitted (nothing is kept but what was found). The project's own
  loggers (``OWN_LOGGERS``) go to DEBUG for the session, so all their records exist;
  other libraries keep their levels, because lowering them changes behaviour
  (redis-py, at DEBUG, formats a failed connection in a way fakeredis breaks).
- At the end, every log file the harnesses wrote under pytest's base temp directory —
  the output of gateway, worker, Redis and MCP subprocesses (``*.log``, ``*.txt``,
  ``*.out``) — is scanned line by line.
- Inspector turn records (what a turn's model saw, ``InspectorStore``) are shown to users
  and operators like a log: every SQLite store under the base temp directory (``*.db``)
  that holds them has each record scanned too (``scan_inspections``); a MongoDB or
  PostgreSQL store's records are not reached.
- A finding fails the session, naming the logger or the file and line.
- Under pytest-xdist each worker does all of this for its own records and its own base
  temp directory (``popen-gwN`` under the controller's) and hands its findings to the
  controller (``workeroutput``), which reports them and fails the session.

Loaded by ``tests/conftest.py``; ``tests/test_log_secrets_plugin.py`` shows it fails.

Secrets: an API token (``vt_`` and 43 URL-safe characters, exactly what
``IdentityService.create_token`` issues), an OpenAI-style key (``sk-…``) and the fixed
passwords and keys the tests configure (``KNOWN_SECRETS``).
"""

from __future__ import annotations

import itertools
import logging
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_URLSAFE = r"A-Za-z0-9_-"
SECRET_PATTERN = re.compile(
    rf"(?<![{_URLSAFE}])(?:vt_[{_URLSAFE}]{{43}}(?![{_URLSAFE}])|sk-[{_URLSAFE}]{{8,}}"
    r"|whsec_[A-Za-z0-9+/]{43}=)")
"""A token as issued (``vt_`` + ``secrets.token_urlsafe(32)``), an ``sk-`` API key, or a
webhook secret as issued (``whsec_`` + the base64 of 32 bytes) —
each standing alone, so ids such as ``task-0123456789`` do not match."""

KNOWN_SECRETS = (
    "pa55-w0rd-SECRET",  # tests/notifications: the SMTP server's password
    "profile-key-SECRET-7731",  # tests/gateway/test_inspector.py: an LLM profile's API key
)
"""Fixed secrets the tests configure that ``SECRET_PATTERN`` does not catch."""

OWN_LOGGERS = ("vancetope_brain", "vancetope_gateway", "workers", "tests")
LOG_SUFFIXES = (".log", ".txt", ".out")
MAX_FINDINGS = 50
WORKEROUTPUT_KEY = "vancetope-log-secrets"


@dataclass(frozen=True)
class Finding:
    where: str
    excerpt: str


def secrets_in(text: str) -> list[str]:
    """The secrets ``text`` holds."""
    found = [m.group(0) for m in SECRET_PATTERN.finditer(text)]
    return found + [s for s in KNOWN_SECRETS if s in text]


def scan_lines(where: str, lines: Iterable[str]) -> Iterator[Finding]:
    for number, line in enumerate(lines, 1):
        for secret in secrets_in(line):
            yield Finding(f"{where}:{number}", _masked(line.strip(), secret))


def scan_files(base: Path) -> Iterator[Finding]:
    """Every log file under ``base``, line by line."""
    for path in sorted(base.rglob("*")):
        if path.suffix in LOG_SUFFIXES and path.is_file() and not path.is_symlink():
            with path.open(errors="replace") as f:
                yield from scan_lines(str(path), f)


def scan_inspections(base: Path) -> Iterator[Finding]:
    """Every inspector record of every SQLite store (``*.db``) under ``base``."""
    for path in sorted(base.rglob("*.db")):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
            try:
                rows = db.execute("SELECT id, doc FROM turn_inspections").fetchall()
            finally:
                db.close()
        except sqlite3.Error:  # not a store, or one without inspector records
            continue
        for turn_id, doc in rows:
            yield from scan_lines(f"{path} turn {turn_id}", [doc])


def _masked(line: str, secret: str) -> str:
    """The line around the secret, with the secret's tail hidden (the report is a log too)."""
    at = line.find(secret)
    shown = secret[:6] + "…"
    return (line[max(0, at - 80):at] + shown + line[at + len(secret):][:80])[:200]


class SecretScanner(logging.Handler):
    """Scans each formatted record as it is emitted; keeps only the findings."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.findings: list[Finding] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:
            self.handleError(record)
            return
        if len(self.findings) < MAX_FINDINGS:
            self.findings.extend(scan_lines(f"log record of {record.name!r} "
                                            f"({record.pathname}:{record.lineno})",
                                            text.splitlines()))


class LogSecrets:
    """The plugin object (registered by ``tests/conftest.py``)."""

    def __init__(self) -> None:
        self.scanner = SecretScanner()
        self.base: Path | None = None
        self.findings: list[Finding] = []
        self._levels: dict[str, int] = {}

    def pytest_configure(self, config: pytest.Config) -> None:
        for name in OWN_LOGGERS:
            logger = logging.getLogger(name)
            self._levels[name] = logger.level
            logger.setLevel(logging.DEBUG)
        logging.getLogger().addHandler(self.scanner)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        logging.getLogger().removeHandler(self.scanner)
        for name, level in self._levels.items():
            logging.getLogger(name).setLevel(level)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        findings = self.findings + self.scanner.findings  # a controller's: its workers' first
        if self.base is not None:
            for finding in itertools.chain(scan_files(self.base),
                                           scan_inspections(self.base)):
                findings.append(finding)
                if len(findings) >= MAX_FINDINGS:
                    break
        self.findings = findings
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: the controller reports and fails
            workeroutput[WORKEROUTPUT_KEY] = [(f.where, f.excerpt) for f in findings]
        elif findings and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """On the xdist controller: take a finished worker's findings."""
        found = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY, [])
        self.findings.extend(Finding(where, excerpt) for where, excerpt in found)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.findings:
            return
        terminalreporter.section("secrets in logs", red=True)
        terminalreporter.write_line(f"{len(self.findings)} log line(s) hold a token or a "
                                    "password (tests/log_secrets.py):")
        for finding in self.findings:
            terminalreporter.write_line(f"  {finding.where}: {finding.excerpt}")


PLUGIN_NAME = "vancetope-log-secrets"


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(LogSecrets(), PLUGIN_NAME)


@pytest.fixture(scope="session", autouse=True)
def _log_secrets_base(request: pytest.FixtureRequest,
                      tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tells the plugin where this run's log files go (a module-level fixture: pytest 9
    deprecates session fixtures that are methods of a plugin object)."""
    request.config.pluginmanager.get_plugin(PLUGIN_NAME).base = tmp_path_factory.getbasetemp()
