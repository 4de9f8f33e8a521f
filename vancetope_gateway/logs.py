"""No secret in a log line: the access logs of werkzeug (``vancetope serve``) and gunicorn
(the Procfile's ``web``) write the request line, query string and all, and a client may
still pass its token as ``?token=`` (browsers should offer the ``bearer.<token>``
subprotocol instead)."""

from __future__ import annotations

import logging
import re

ACCESS_LOGGERS = ("werkzeug", "gunicorn.access")
"""The loggers that write request lines."""

_SECRET_PARAM = re.compile(r"([?&](?:token|access_token|api_key|key|sig|signature)=)[^&\s\"']*",
                           re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with the value of every secret-bearing query parameter replaced by ``***``."""
    return _SECRET_PARAM.sub(r"\1***", text)


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
