"""No token in an access log line (issue 12 item 4): werkzeug's (``vancetope serve``) and
gunicorn's (the Procfile's ``web`` with ``--access-logfile``) request lines carry the query
string, where a browser's WebSocket puts its token."""

from __future__ import annotations

import contextlib
import logging
import urllib.error
import urllib.request

from gunicorn.glogging import SafeAtoms

from vancetope_gateway.logs import redact, redact_access_logs

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
