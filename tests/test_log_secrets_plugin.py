"""The log scanner of ``tests/log_secrets.py`` finds what it must and nothing else, and a
planted token fails a whole pytest session — in a log record or in a harness's log file."""

from __future__ import annotations

import os
import secrets
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from tests.log_secrets import KNOWN_SECRETS, scan_files, scan_inspections, secrets_in
from vancetope_brain.identity import IdentityService
from vancetope_brain.models import utcnow
from vancetope_brain.store import InspectorStore, RetentionStore, open_store

ROOT = Path(__file__).resolve().parent.parent


def test_issued_tokens_and_keys_are_found_and_ids_are_not(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    try:
        identity = IdentityService.on(store)
        identity.create_tenant("acme", "acme")
        identity.create_user("acme", "ada", "ada")
        issued = identity.issue_token("acme", "ada")
    finally:
        store.close()
    assert secrets_in(f"GET /ws?token={issued} HTTP/1.1") == [issued]
    assert secrets_in(f"offered vancetope, bearer.{issued}") == [issued]
    assert secrets_in("api_key='sk-test-secret-key-0123456789'") == \
        ["sk-test-secret-key-0123456789"]
    assert secrets_in("smtp login failed: pa55-w0rd-SECRET") == ["pa55-w0rd-SECRET"]
    innocuous = ["task-0123456789abcdef", "vt_" + "a" * 42, "vt_" + "a" * 44,
                 "xvt_" + "a" * 43, "vt-writer", "VT_TEST_MODEL", "tok_3f2a9c", "disk-usage",
                 "token=*** redacted", "sha256 " + secrets.token_hex(32)]
    assert [t for t in innocuous if secrets_in(t)] == []


def test_every_known_secret_is_still_used_by_a_test():
    sources = "".join(p.read_text() for p in (ROOT / "tests").rglob("*.py")
                      if p.name != "log_secrets.py")
    assert [s for s in KNOWN_SECRETS if s not in sources] == []


def test_log_files_are_scanned_line_by_line(tmp_path):
    token = "vt_" + secrets.token_urlsafe(32)
    (tmp_path / "worker").mkdir()
    (tmp_path / "worker" / "output.txt").write_text(f"started\nauth with {token}\n")
    (tmp_path / "token").write_text(token)  # a token file is no log
    try:
        found = list(scan_files(tmp_path))
    finally:  # else this session's own scan finds it
        (tmp_path / "worker" / "output.txt").unlink()
    assert [f.where for f in found] == [f"{tmp_path / 'worker' / 'output.txt'}:2"]
    assert token not in found[0].excerpt  # the report does not leak it either


def test_inspector_records_of_a_sqlite_store_are_scanned(tmp_path):
    from tests.store_contract.inspector._build import inspection
    from vancetope_brain.models import ThinkProcess

    key = "sk-" + secrets.token_urlsafe(16)
    store = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    try:
        process = ThinkProcess(id="proc_1", tenant_id="acme", session_id="ses_1",
                               user_id="ada", name="main", engine="arthur", engine_version="1")
        store.port(InspectorStore).put_inspection(inspection(process, text="hi"))
        leaked = inspection(process, text=f"my key is {key}")
        store.port(InspectorStore).put_inspection(leaked)
        found = list(scan_inspections(tmp_path))
        # else this session's own scan finds it
        store.port(RetentionStore).purge_inspections("acme", utcnow() + timedelta(days=1))
    finally:
        store.close()
    assert [f.where for f in found] == [f"{tmp_path / 'v.db'} turn {leaked.id}:1"]
    assert key not in found[0].excerpt


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("where", ["record", "file"])
def test_a_planted_token_fails_the_session(pytester, monkeypatch, where, workers):
    """In the pytest process itself (``-n0``) and on pytest-xdist workers, whose findings
    the controller reports."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_planted=f'''
        import logging, secrets

        def test_leaks(tmp_path):
            token = "vt_" + secrets.token_urlsafe(32)
            if "{where}" == "record":
                logging.getLogger("vancetope_gateway.leaky").debug("authenticated with %s", token)
            else:
                (tmp_path / "server.log").write_text("GET /ws?token=" + token + "\\n")
    ''')
    try:
        result = pytester.runpytest_subprocess("-p", "tests.log_secrets", "-p", "no:randomly",
                                               "-p", "no:cacheprovider", "-n", workers)
    finally:  # the planted file would fail this session too
        for inner in pytester.path.glob("runpytest-*"):
            if not inner.is_symlink():
                shutil.rmtree(inner)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*secrets in logs*", "*1 log line(s) hold a token*",
                                 "*vancetope_gateway.leaky*" if where == "record" else "*server.log:1*"])
    print(f"\nplanted token in a {where} (-n {workers}): session exit {result.ret}, reported:\n"
          + "\n".join(line for line in result.outlines if "vt_" in line))
