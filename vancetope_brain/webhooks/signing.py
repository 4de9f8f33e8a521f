"""Standard Webhooks signatures (https://www.standardwebhooks.com/, "Signature scheme"),
written from the specification; the tests verify them with the reference library.

A secret is ``whsec_`` and the base64 of 32 random bytes; the signature of a message is
``v1,`` and the base64 of HMAC-SHA256, keyed with the secret's bytes, of
``{webhook-id}.{webhook-timestamp}.{body}``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    """A fresh subscription secret."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers of one attempt: ``webhook-id``, ``webhook-timestamp`` (Unix
    seconds) and ``webhook-signature``."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": f"v1,{digest}"}
