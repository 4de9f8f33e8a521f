"""No secret in a log line: the access logs of werkzeug (``vancetope serve``) and gunicorn
(the Procfile's ``web``) write the request line, query string and all, and a client may
still pass its token as ``?token=`` (browsers should offer the ``bearer.<token>``
subprotocol instead).

A query's keys and values are matched as the server reads them, percent-decoded
(``?%74oken=`` is ``?token=``), and a value that is shaped like a token is redacted under
any key."""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

from vancetope_brain.identity import TOKEN_PREFIX

ACCESS_LOGGERS = ("werkzeug", "gunicorn.access")
"""The loggers that write request lines."""

SECRET_KEYS = frozenset({"token", "access_token", "api_key", "key", "sig", "signature"})
"""Query parameters whose value is a secret (compared decoded, in any case)."""

# One ``key=value`` of a query: after ``?`` or ``&``, or at the start (gunicorn's ``q`` atom
# is the bare query string); neither runs past a space or quote of the log line around it.
_PARAM = re.compile(r"(?P<lead>^|[?&])(?P<key>[^=&?#\s\"']*)=(?P<value>[^&#\s\"']*)")
# A token as issued is the prefix and 43 URL-safe characters (a shorter run: a cut one),
# standing alone, so that a word merely ending in the prefix is left as it is.
_TOKEN_SHAPED = re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(TOKEN_PREFIX)}[A-Za-z0-9_-]{{16,}}")
_MAX_DECODES = 4  # %2574 is %74 decoded once: decode until nothing changes, a few times


def redact(text: str) -> str:
    """``text`` with ``***`` for the value of every secret-bearing query parameter (its key
    decoded), for every value shaped like a token (decoded too), and for any plain token."""
    return _TOKEN_SHAPED.sub("***", _PARAM.sub(_redact_param, text))


def _redact_param(match: re.Match[str]) -> str:
    key, value = _decoded(match["key"]), _decoded(match["value"])
    if key.lower() in SECRET_KEYS or _TOKEN_SHAPED.search(value):
        return f"{match['lead']}{match['key']}=***"
    return match[0]


def _decoded(text: str) -> str:
    for _ in range(_MAX_DECODES):
        decoded = unquote_plus(text)
        if decoded == text:
            break
        text = decoded
    return text


class RedactSecrets(logging.Filter):
    """Rewrites a record's message and arguments so no query-string secret gets through."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(str(record.msg))
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):  # gunicorn's atoms: changed in place, so its
            for k, v in record.args.items():  # dict subclass keeps answering missing keys
                if isinstance(v, str):
                    record.args[k] = redact(v)
        return True


def redact_access_logs() -> None:
    """Install ``RedactSecrets`` on every access logger (idempotent)."""
    for name in ACCESS_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(RedactSecrets())
