"""No token in an access log line (issue 12 item 4): werkzeug's (``vancetope serve``) and
gunicorn's (the Procfile's ``web`` with ``--access-logfile``) request lines carry the query
string, where a browser's WebSocket puts its token — however it is percent-encoded
(issue 27 item 22)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from gunicorn.glogging import SafeAtoms

from tests.helpers import server_env, wait_for
from vancetope_gateway.logs import redact, redact_access_logs

ROOT = Path(__file__).resolve().parents[2]

SECRET = "vt_0123456789abcdefSECRET"


def test_the_werkzeug_request_line_of_a_token_in_the_query_is_redacted(served, caplog):
    caplog.set_level(logging.INFO, logger="werkzeug")
    for path in (f"/healthz?token={SECRET}", f"/ws?x=1&token={SECRET}"):
        # /ws without an upgrade is refused; its line is logged all the same
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://{served}{path}", timeout=10).close()
    lines = [r.getMessage() for r in caplog.records if r.name == "werkzeug"]
    assert len(lines) == 2 and all("token=***" in line for line in lines), lines
    assert SECRET not in caplog.text


def test_a_gunicorn_access_line_is_redacted_and_keeps_its_atoms(caplog):
    redact_access_logs()
    caplog.set_level(logging.INFO, logger="gunicorn.access")
    atoms = SafeAtoms({"r": f"GET /ws?token={SECRET} HTTP/1.1", "s": "101",
                       "{user-agent}i": "test"})
    logging.getLogger("gunicorn.access").info('"%(r)s" %(s)s %({user-agent}i)s %(b)s', atoms)
    assert caplog.records[-1].getMessage() == '"GET /ws?token=*** HTTP/1.1" 101 test -'
    assert SECRET not in caplog.text


def test_redact_leaves_what_is_not_a_secret():
    assert redact("/inbox?limit=5&tokenizer=x") == "/inbox?limit=5&tokenizer=x"
    assert redact("/a?Token=abc&b=2") == "/a?Token=***&b=2"
    assert redact("/a?navt_0123456789abcdef0123=1") == "/a?navt_0123456789abcdef0123=1"


def test_redact_decodes_keys_and_values_and_reads_a_bare_query_string():
    # gunicorn's ``q`` atom is the query string without its ``?``.
    assert redact("%74oken=abc&b=2") == "%74oken=***&b=2"
    assert redact("/a?%2574oken=abc") == "/a?%2574oken=***"  # decoded twice
    assert redact(f"/a?b=%76{ISSUED[1:]}&c=3") == "/a?b=***&c=3"
    assert redact(f'"GET /a/{ISSUED} HTTP/1.1"') == '"GET /a/*** HTTP/1.1"'


# A token as issued (``vt_`` + 43 URL-safe characters), percent-encoded in each spelling a
# client could use: the server decodes a query's keys and values before it reads them.
ISSUED = "vt_" + "Q" * 20 + "-_" + "z9" * 10 + "k"
ENCODED_QUERIES = [
    f"%74oken={ISSUED}",                      # the key encoded: ?token=
    f"T%4FKEN={ISSUED}",                      # and in another case
    f"x=1&access%5Ftoken={ISSUED}",           # ?access_token=
    f"token=%76%74%5F{ISSUED[3:]}",           # the value encoded
    f"anything={ISSUED}",                     # a token under a key no rule names
    f"anything=%76t%5f{ISSUED[3:]}",          # … encoded
]


@pytest.mark.redis
def test_the_real_gunicorn_access_log_redacts_a_token_after_decoding(tmp_path, redis_url):
    access = tmp_path / "access.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VANCETOPE_", "OPENAI_"))}
    env.update(server_env(tmp_path / "data", VANCETOPE_REDIS_URL=redis_url,
                          VANCETOPE_STORE_URL=f"sqlite:///{tmp_path / 'vancetope.db'}"))
    gateway = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--worker-class",
         "vancetope_gateway.serving.GatewayWorker", "--workers", "1", "--bind", "127.0.0.1:0",
         "--timeout", "0", "--graceful-timeout", "1", "--no-control-socket",
         "--access-logfile", str(access), "vancetope_gateway.wsgi:app"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = _listening_port(gateway)
        for query in ENCODED_QUERIES:
            with contextlib.suppress(urllib.error.HTTPError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz?{query}",
                                       timeout=10).close()
        lines = wait_for(lambda: len(found := access.read_text().splitlines())
                         >= len(ENCODED_QUERIES) and found, what="the access log's lines")
    finally:
        gateway.terminate()
        gateway.communicate(timeout=30)
    assert ISSUED not in access.read_text() and ISSUED[3:] not in access.read_text(), lines
    for query, line in zip(ENCODED_QUERIES, lines, strict=True):
        key = query.rsplit("=", 1)[0]
        assert f"/healthz?{key}=*** HTTP/1.1" in line, line


def _listening_port(gunicorn: subprocess.Popen[str]) -> int:
    assert gunicorn.stdout is not None
    for line in gunicorn.stdout:
        if found := re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", line):
            threading.Thread(target=gunicorn.stdout.read, daemon=True).start()  # keep draining
            return int(found.group(1))
    raise AssertionError(f"gunicorn exited with {gunicorn.wait()}")
